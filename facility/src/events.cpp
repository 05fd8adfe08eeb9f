#include "astral/facility/events.hpp"

#include <set>

namespace astral::facility {

std::string event_layer(const Alarm& a) {
  if (a.source == "nvml" || a.source == "astral") return "astral";
  if (a.source == "hwmon" || a.source == "rapl") return "kernel";
  if (a.source == "ipmi") return "bmc";
  switch (a.kind) {
    case EntityKind::chassis:
    case EntityKind::node:
    case EntityKind::cpu:
    case EntityKind::gpu:
    case EntityKind::fan:
    case EntityKind::psu:
    case EntityKind::sensor:
      return "bmc";
    case EntityKind::leak_detector:
      // A detector in a CDU is plant; one in a server tray is that server's BMC's.
      return a.entity.rfind("ThermalEquipment/", 0) == 0 || a.entity.find("CDU") != std::string::npos ? "facility" : "bmc";
    default:
      return "facility";
  }
}

std::string event_component_kind(EntityKind kind, const std::string& layer) {
  switch (kind) {
    case EntityKind::psu: return "psu";
    case EntityKind::rectifier: return "rectifier";
    case EntityKind::pdu:
    case EntityKind::outlet:
    case EntityKind::circuit:
    case EntityKind::bus:
    case EntityKind::switchgear:
      return "pdu";
    case EntityKind::power_shelf: return "power_shelf";
    case EntityKind::cdu:
    case EntityKind::coolant_connector:
    case EntityKind::reservoir:
    case EntityKind::filter:
      return "cdu";
    case EntityKind::pump: return "pump";
    case EntityKind::rack: return "rack";
    case EntityKind::gpu: return "gpu";
    case EntityKind::leak_detector: return layer == "facility" ? "cdu" : "host";
    default: return "host";
  }
}

namespace {

// Where an alarm sits in the site layout: the equipment (by source and entity prefix), the
// rack chassis that reported it, or the rack that holds its host.
void add_site_keys(const Alarm& a, const SiteLayout& site, nlohmann::json& component, nlohmann::json& keys) {
  std::vector<std::string> racks;
  if (const SiteComponent* c = site.component_for(a.host, a.entity)) {
    component["site"] = c->id;
    keys["site_kind"] = c->kind;
    racks = site.racks_served_by(c->id);
  } else {
    const SiteRack* rack = site.rack_of_host(a.host);
    for (const auto& r : site.racks)
      if (!rack && !r.source.empty() && r.source == a.host && (r.entity.empty() || a.entity.rfind(r.entity, 0) == 0))
        rack = &r;
    if (!rack) return;
    if (rack->source == a.host) {  // the rack's own chassis reported it
      component["site"] = rack->id;
      keys["site_kind"] = "rack";
    }
    racks.push_back(rack->id);
  }
  std::vector<std::string> hosts;
  for (const auto& id : racks)
    for (const auto& h : site.rack(id)->hosts) hosts.push_back(h);
  keys["racks"] = racks;
  keys["hosts"] = hosts;
}

}  // namespace

nlohmann::json alarm_to_event(const Alarm& a, const SiteLayout* site) {
  std::string layer = event_layer(a);
  nlohmann::json component = {{"kind", event_component_kind(a.kind, layer)}, {"host", a.host}};
  if (!a.entity.empty()) component["device"] = a.entity;
  nlohmann::json source = nlohmann::json::object();
  if (!a.origin.empty()) source["file"] = a.origin;
  nlohmann::json keys = nlohmann::json::object();
  if (site) add_site_keys(a, *site, component, keys);
  return {
      {"time", format_time(a.time)},
      // Readings are taken when polled; the fault may be up to a poll interval older.
      {"time_confidence_s", 1.0},
      {"host", a.host},
      {"layer", layer},
      {"component", component},
      {"severity", to_string(a.severity)},
      {"kind", a.type},
      {"message", a.message},
      {"keys", keys},
      {"source", source},
  };
}

void write_events(std::ostream& out, const std::vector<Alarm>& alarms, const SiteLayout* site) {
  for (const auto& a : alarms) out << alarm_to_event(a, site).dump() << '\n';
}

std::vector<Alarm> AlarmTracker::update(const std::vector<Alarm>& current, Clock::time_point now) {
  std::vector<Alarm> changes;
  std::set<std::string> seen;
  for (const auto& a : current) {
    std::string key = a.host + "|" + a.entity + "|" + a.type;
    seen.insert(key);
    auto it = active_.find(key);
    if (it == active_.end() || it->second.severity != a.severity) {
      changes.push_back(a);
      active_[key] = a;
    }
  }
  for (auto it = active_.begin(); it != active_.end();) {
    auto pushed = pushed_.find(it->first);
    if (pushed != pushed_.end() && (seen.count(it->first) || pushed->second-- > 0)) {
      if (seen.count(it->first)) pushed_.erase(pushed);  // the poll sees it too: polled from now on
      ++it;
      continue;
    }
    if (pushed != pushed_.end()) pushed_.erase(pushed);
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    Alarm cleared = it->second;
    cleared.time = now;
    cleared.severity = Severity::info;
    cleared.message = "cleared: " + cleared.message;
    cleared.type += "_cleared";
    changes.push_back(std::move(cleared));
    it = active_.erase(it);
  }
  return changes;
}

std::vector<Alarm> AlarmTracker::held() const {
  std::vector<Alarm> out;
  for (const auto& [key, polls] : pushed_)
    if (auto it = active_.find(key); it != active_.end()) out.push_back(it->second);
  return out;
}

bool AlarmTracker::raise(const Alarm& a) {
  std::string key = a.host + "|" + a.entity + "|" + a.type;
  auto it = active_.find(key);
  pushed_[key] = 2;
  if (it != active_.end() && it->second.severity == a.severity) return false;
  active_[key] = a;
  return true;
}

}  // namespace astral::facility
