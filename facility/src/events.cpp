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
    case EntityKind::power_shelf:
      return "pdu";
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

nlohmann::json alarm_to_event(const Alarm& a) {
  std::string layer = event_layer(a);
  nlohmann::json component = {{"kind", event_component_kind(a.kind, layer)}, {"host", a.host}};
  if (!a.entity.empty()) component["device"] = a.entity;
  nlohmann::json source = nlohmann::json::object();
  if (!a.origin.empty()) source["file"] = a.origin;
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
      {"keys", nlohmann::json::object()},
      {"source", source},
  };
}

void write_events(std::ostream& out, const std::vector<Alarm>& alarms) {
  for (const auto& a : alarms) out << alarm_to_event(a).dump() << '\n';
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

}  // namespace astral::facility
