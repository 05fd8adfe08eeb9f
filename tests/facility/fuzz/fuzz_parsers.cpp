// Fuzz target: every facility parser that reads bytes from outside. The input is offered as each
// Redfish resource of a small service skeleton (so the JSON mapping of readings, statuses, leak
// detectors, sensors and metric reports sees it), as ipmitool output, as sources.json, and as a
// saved `read --json` document. Nothing may crash, hang or throw out of the library.
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/facility/config.hpp"
#include "astral/facility/derived.hpp"
#include "astral/facility/local.hpp"
#include "astral/facility/prometheus.hpp"
#include "astral/facility/redfish.hpp"
#include "astral/facility/serialize.hpp"

using namespace astral::facility;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  const std::string root = R"({"@odata.id": "/redfish/v1", "ProtocolFeaturesSupported": {"ExpandQuery": {"Levels": true}},
    "Chassis": {"@odata.id": "/redfish/v1/Chassis"}, "ThermalEquipment": {"@odata.id": "/redfish/v1/ThermalEquipment"},
    "PowerEquipment": {"@odata.id": "/redfish/v1/PowerEquipment"}, "TelemetryService": {"@odata.id": "/redfish/v1/TelemetryService"}})";
  const char* places[] = {"/redfish/v1/Chassis", "/redfish/v1/ThermalEquipment", "/redfish/v1/PowerEquipment",
                          "/redfish/v1/TelemetryService"};
  // One placement per input (chosen by its length) keeps every run cheap; mutations cover all four.
  for (const char* place : {places[size % 4]}) {
    std::map<std::string, std::string> resources{{"/redfish/v1", root}, {place, input}};
    // The input also stands for every member it links to.
    auto j = nlohmann::json::parse(input, nullptr, false);
    if (j.is_object() && j.contains("Members") && j["Members"].is_array()) {
      for (const auto& m : j["Members"])
        if (m.is_object() && m.contains("@odata.id") && m["@odata.id"].is_string())
          resources.emplace(m["@odata.id"].get<std::string>(), input);
    }
    Snapshot s = read_redfish_resources(resources, "fuzz");
    Derived d = derive(s, DeriveConfig{});
    (void)render_prometheus(s, &d);
  }
  IpmiOptions o;
  o.host = "fuzz";
  (void)ipmi_from_text(input, o, "fuzz");
  try {
    (void)parse_config(input, "/nonexistent", "fuzz.json");
  } catch (const std::exception&) {
  }
  auto doc = nlohmann::json::parse(input, nullptr, false);
  if (!doc.is_discarded()) {
    try {
      (void)snapshot_from_json(doc);
    } catch (const std::exception&) {
    }
  }
  return 0;
}
