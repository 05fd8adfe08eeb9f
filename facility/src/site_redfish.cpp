// A site layout derived from Redfish rack chassis (Chassis.v1_28_0 Links; facility-formats.md
// §1.1): a chassis of ChassisType Rack contains servers (Links.Contains) and is cooled by
// (Links.CooledBy, CoolingUnits, ConnectedCoolingLoops) and powered by (Links.PoweredBy,
// PowerDistribution) equipment that may live on other services (absolute URIs).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/facility/site.hpp"
#include "redfish_emit.hpp"

namespace astral::facility {

namespace {

using json = nlohmann::json;

struct LinkTarget {
  std::string source, entity, kind;
};

// "/redfish/v1/PowerEquipment/RackPDUs/1/Outlets/A4" or "https://pdu.example/redfish/v1/..." ->
// the equipment it belongs to (the PDU, not its outlet), its kind, and the source that serves it.
std::optional<LinkTarget> equipment_of(const std::string& link, const std::string& own_source) {
  LinkTarget t;
  t.source = own_source;
  std::string path = link;
  if (auto scheme = link.find("://"); scheme != std::string::npos) {
    auto slash = link.find('/', scheme + 3);
    t.source = link.substr(scheme + 3, slash == std::string::npos ? std::string::npos : slash - scheme - 3);
    path = slash == std::string::npos ? "/" : link.substr(slash);
  }
  const std::string root = "/redfish/v1/";
  if (path.rfind(root, 0) != 0) return std::nullopt;
  path = path.substr(root.size());
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= path.size();) {
    auto next = path.find('/', at);
    if (next == std::string::npos) next = path.size();
    if (next > at) parts.push_back(path.substr(at, next - at));
    at = next + 1;
  }
  if (parts.size() < 3) return std::nullopt;
  const std::string& collection = parts[1];
  if (parts[0] == "ThermalEquipment") {
    if (collection == "CoolingLoops") t.kind = "cooling_loop";
    else if (collection == "CDUs" || collection == "HeatExchangers" || collection == "RPUs") t.kind = "cdu";
    else return std::nullopt;
  } else if (parts[0] == "PowerEquipment") {
    if (collection == "PowerShelves") t.kind = "power_shelf";
    else if (collection == "RackPDUs" || collection == "FloorPDUs") t.kind = "pdu";
    else if (collection == "Switchgear" || collection == "TransferSwitches" || collection == "ElectricalBuses") t.kind = "switchgear";
    else return std::nullopt;
  } else {
    return std::nullopt;
  }
  t.entity = parts[0] + "/" + parts[1] + "/" + parts[2];
  return t;
}

std::vector<std::string> link_ids(const json& links, const char* key) {
  std::vector<std::string> out;
  if (!links.contains(key) || !links[key].is_array()) return out;
  for (const auto& l : links[key])
    if (l.is_object() && l.contains("@odata.id") && l["@odata.id"].is_string()) out.push_back(l["@odata.id"].get<std::string>());
  return out;
}

const json* resource(const std::map<std::string, json>& parsed, const std::string& path) {
  auto it = parsed.find(path);
  return it == parsed.end() ? nullptr : &it->second;
}

// The host name a contained chassis stands for: its computer system's HostName, else its Id.
std::string host_of(const std::map<std::string, json>& parsed, const std::string& chassis_path) {
  const json* ch = resource(parsed, chassis_path);
  if (!ch) return chassis_path.substr(chassis_path.find_last_of('/') + 1);
  if (ch->contains("Links") && (*ch)["Links"].is_object())
    for (const auto& sys : link_ids((*ch)["Links"], "ComputerSystems"))
      if (const json* s = resource(parsed, sys); s && s->contains("HostName") && (*s)["HostName"].is_string() &&
                                                 !(*s)["HostName"].get<std::string>().empty())
        return (*s)["HostName"].get<std::string>();
  return detail::string_of(*ch, "Id", chassis_path.substr(chassis_path.find_last_of('/') + 1));
}

}  // namespace

SiteLayout site_from_redfish(const std::map<std::string, std::string>& resources, const std::string& source) {
  std::map<std::string, json> parsed;
  for (const auto& [path, text] : resources) {
    json j = json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.is_object()) parsed.emplace(path, std::move(j));
  }
  SiteLayout s;
  auto component_id = [&](const LinkTarget& t) {
    std::string id = t.source + ":" + t.entity;
    if (!s.component(id)) s.components.push_back(SiteComponent{id, t.kind, t.source, t.entity, {}, {}});
    return id;
  };
  for (const auto& [path, j] : parsed) {
    if (path.rfind("/redfish/v1/Chassis/", 0) != 0 || detail::string_of(j, "ChassisType") != "Rack") continue;
    SiteRack rack;
    rack.id = source + ":" + path.substr(std::string("/redfish/v1/").size());
    rack.source = source;
    rack.entity = path.substr(std::string("/redfish/v1/").size());
    const json links = j.contains("Links") && j["Links"].is_object() ? j["Links"] : json::object();
    for (const auto& c : link_ids(links, "Contains")) {
      const json* ch = resource(parsed, c);
      if (ch && detail::string_of(*ch, "ChassisType") == "Rack") continue;  // nested racks are not hosts
      std::string host = host_of(parsed, c);
      if (std::find(rack.hosts.begin(), rack.hosts.end(), host) == rack.hosts.end()) rack.hosts.push_back(host);
    }
    for (const char* key : {"CooledBy", "CoolingUnits", "ConnectedCoolingLoops", "PoweredBy", "PowerDistribution"})
      for (const auto& l : link_ids(links, key))
        if (auto t = equipment_of(l, source)) {
          auto& to = is_cooling_kind(t->kind) ? rack.cooled_by : rack.powered_by;
          std::string id = component_id(*t);
          if (std::find(to.begin(), to.end(), id) == to.end()) to.push_back(id);
        }
    s.racks.push_back(std::move(rack));
  }
  // Validate what was derived the same way as a written file (duplicate hosts, families).
  json j = json::parse(site_layout_to_json(s));
  return parse_site_layout(j.dump(), fmt::format("site derived from {}", source));
}

SiteLayout site_from_redfish_mockup(const std::string& dir, const std::string& source) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> resources;
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / "index.json", ec))
    throw std::runtime_error(fmt::format("mockup {}: no index.json (the service root) in it", dir));
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "index.json" || !it->is_regular_file()) continue;
    std::string rel = fs::relative(it->path().parent_path(), dir).generic_string();
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    resources.emplace(rel == "." ? "/redfish/v1" : "/redfish/v1/" + rel, ss.str());
  }
  return site_from_redfish(resources, source);
}

}  // namespace astral::facility
