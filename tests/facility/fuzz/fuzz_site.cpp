// Fuzz target: the site layout (racks, their hosts and the cooling and power equipment they
// depend on), as a user writes it in site.json and as it is derived from a Redfish service's rack
// chassis. A bad layout is refused with std::runtime_error naming the file and field; nothing
// else may escape, and a layout that was accepted must survive its own JSON unchanged.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/facility/site.hpp"

using namespace astral::facility;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const SiteLayout s = parse_site_layout(input, "site.json");
    const std::string written = site_layout_to_json(s);
    if (site_layout_to_json(parse_site_layout(written, "written")) != written) __builtin_trap();
    (void)unknown_hosts(s, {"node041a", "fuzz"});
  } catch (const std::runtime_error&) {
  }
  // The input as a rack chassis, and as every chassis and system it links to.
  std::map<std::string, std::string> resources{{"/redfish/v1/Chassis/Rack1", input}};
  auto j = nlohmann::json::parse(input, nullptr, false);
  if (j.is_object() && j.contains("Links") && j["Links"].is_object())
    for (const auto& [key, links] : j["Links"].items())
      if (links.is_array())
        for (const auto& l : links)
          if (l.is_object() && l.contains("@odata.id") && l["@odata.id"].is_string())
            resources.emplace(l["@odata.id"].get<std::string>(), input);
  try {
    (void)site_from_redfish(resources, "fuzz-bmc");
  } catch (const std::runtime_error&) {
  }
  return 0;
}
