#include "redfish_emit.hpp"

#include "alarm_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility::detail {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

// Sensor.ReadingType -> (quantity, unit, scale to base unit, counter). facility-formats.md §1.2.
struct ReadingTypeInfo {
  std::string_view type, quantity;
  Unit unit;
  double scale;
  bool counter;
  std::string_view units;  // the schema's ReadingUnits
};
constexpr ReadingTypeInfo kReadingTypes[] = {
    {"Temperature", "temperature", Unit::celsius, 1, false, "Cel"},
    {"Power", "power", Unit::watts, 1, false, "W"},
    {"EnergykWh", "energy", Unit::joules, 3.6e6, true, "kW.h"},
    {"EnergyJoules", "energy", Unit::joules, 1, true, "J"},
    {"EnergyWh", "energy", Unit::joules, 3600, true, "W.h"},
    {"Voltage", "voltage", Unit::volts, 1, false, "V"},
    {"Current", "current", Unit::amperes, 1, false, "A"},
    {"Frequency", "frequency", Unit::hertz, 1, false, "Hz"},
    {"Pressure", "pressure", Unit::pascals, 1, false, "Pa"},
    {"PressurePa", "pressure", Unit::pascals, 1, false, "Pa"},
    {"PressurekPa", "pressure", Unit::pascals, 1000, false, "kPa"},
    {"Humidity", "humidity", Unit::ratio, 0.01, false, "%"},
    {"Percent", "level", Unit::ratio, 0.01, false, "%"},
    {"Valve", "valve_position", Unit::ratio, 0.01, false, "%"},
    {"Rotational", "speed", Unit::rpm, 1, false, "{rev}/min"},
    {"AirFlow", "air_flow", Unit::cubic_meters_per_second, 0.028316846592 / 60, false, "[ft_i]3/min"},
    {"AirFlowCMM", "air_flow", Unit::cubic_meters_per_second, 1.0 / 60, false, "m3/min"},
    {"LiquidFlow", "coolant_flow", Unit::liters_per_minute, 60, false, "L/s"},
    {"LiquidFlowLPM", "coolant_flow", Unit::liters_per_minute, 1, false, "L/min"},
    {"Heat", "heat_removed", Unit::watts, 1000, false, "kW"},
    {"Barometric", "pressure", Unit::pascals, 133.322387415, false, "mm[Hg]"},
};

// Unit spellings seen on real BMCs for the schema spelling (§1.5): accepted, counted.
bool same_units(std::string_view schema, std::string_view seen) {
  if (schema == seen) return true;
  std::string a = lower(schema), b = lower(seen);
  auto norm = [](std::string s) {
    std::erase_if(s, [](char c) { return c == '.' || c == ' ' || c == '_'; });
    if (s == "rpm" || s == "{rev}/min") s = "rpm";
    if (s == "cel" || s == "c" || s == "degc" || s == "°c") s = "cel";
    return s;
  };
  return norm(a) == norm(b);
}

const ReadingTypeInfo* reading_type_from_units(std::string_view units) {
  for (const auto& info : kReadingTypes) {
    if (same_units(info.units, units)) return &info;
  }
  return nullptr;
}

Severity severity_from(std::string_view s) {
  if (s == "Critical") return Severity::critical;
  if (s == "Warning") return Severity::warning;
  return Severity::info;
}

}  // namespace

// Environmental/Power registry message names (version-independent, §1.6) -> alarm type.
std::string alarm_type_for_message(std::string_view name, EntityKind kind) {
  bool coolant = kind == EntityKind::cdu || kind == EntityKind::coolant_connector ||
                 kind == EntityKind::pump || kind == EntityKind::reservoir;
  if (starts_with(name, "LeakDetectorFailure")) return "leak_detector_failure";
  if (starts_with(name, "LeakDetected")) return name == "LeakDetectedNormal" ? "" : "leak_detected";
  if (name == "PumpFailed") return "pump_failed";
  if (starts_with(name, "FilterRequiresService")) return "filter_requires_service";
  if (starts_with(name, "FlowRateBelow")) return "coolant_flow_low";
  if (starts_with(name, "FlowRateAbove")) return "coolant_flow_high";
  if (starts_with(name, "TemperatureAbove") || name == "TempWayTooHot")
    return coolant ? "coolant_over_temperature" : "over_temperature";
  if (starts_with(name, "PressureAbove") || starts_with(name, "PressureBelow"))
    return "coolant_pressure_out_of_range";
  if (starts_with(name, "FluidLevelBelow")) return "coolant_level_low";
  if (starts_with(name, "FluidQuality")) return "coolant_quality";
  if (name == "ValveUnableToReachSetPoint") return "valve_fault";
  if (contains(name, "PowerSupply") && contains(name, "Predictive")) return "psu_predictive_failure";
  if (contains(name, "PowerSupply") && (contains(name, "Fail") || contains(name, "Fault")))
    return kind == EntityKind::rectifier ? "rectifier_fault" : "psu_fault";
  if (contains(name, "PowerLimit") || contains(name, "PowerCap")) return "power_capping";
  if (contains(name, "Below") && contains(name, "Threshold")) return "reading_below_threshold";
  if (contains(name, "Threshold")) return "reading_above_threshold";
  return "condition";
}

std::string entity_id(std::string_view id) {
  constexpr std::string_view kRoot = "/redfish/v1";
  // Absolute URIs to another service (PowerSupply.Links.Outlet) keep their host.
  auto scheme = id.find("://");
  if (scheme != std::string_view::npos) {
    auto path = id.find('/', scheme + 3);
    if (path == std::string_view::npos) return std::string(id);
    std::string host(id.substr(scheme + 3, path - scheme - 3));
    return host + ":" + entity_id(id.substr(path));
  }
  if (starts_with(id, kRoot)) id.remove_prefix(kRoot.size());
  while (!id.empty() && id.front() == '/') id.remove_prefix(1);
  while (!id.empty() && id.back() == '/') id.remove_suffix(1);
  return std::string(id);
}

std::string link_of(const json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return {};
  auto id = it->find("@odata.id");
  if (id == it->end() || !id->is_string()) return {};
  return id->get<std::string>();
}

std::string id_of(const json& j) {
  if (!j.is_object()) return {};
  auto id = j.find("@odata.id");
  return id != j.end() && id->is_string() ? id->get<std::string>() : std::string();
}

std::string name_of(const json& j) {
  if (!j.is_object()) return {};
  auto n = j.find("Name");
  return n != j.end() && n->is_string() ? n->get<std::string>() : std::string();
}

std::string string_of(const json& j, std::string_view key, std::string fallback) {
  if (!j.is_object()) return fallback;
  auto v = j.find(key);
  return v != j.end() && v->is_string() ? v->get<std::string>() : fallback;
}

const json& child(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

EntityKind kind_from_path(std::string_view p, EntityKind fallback) {
  if (contains(p, "/Pumps/")) return EntityKind::pump;
  if (contains(p, "/LeakDetect")) return EntityKind::leak_detector;
  if (contains(p, "/Filters/")) return EntityKind::filter;
  if (contains(p, "/Reservoirs/")) return EntityKind::reservoir;
  if (contains(p, "CoolantConnectors/")) return EntityKind::coolant_connector;
  // A shelf's supplies are its rectifiers (PowerEquipment/PowerShelves/N/PowerSupplies/M).
  if (contains(p, "/PowerSupplies/")) return contains(p, "PowerShel") ? EntityKind::rectifier : EntityKind::psu;
  if (contains(p, "/Outlets/")) return EntityKind::outlet;
  if (contains(p, "/Mains/") || contains(p, "/Branches/") || contains(p, "/Feeders/")) return EntityKind::circuit;
  if (contains(p, "/Fans/")) return EntityKind::fan;
  if (contains(p, "ThermalEquipment/")) return EntityKind::cdu;
  if (contains(p, "PowerEquipment/PowerShelves/")) return EntityKind::power_shelf;
  return fallback;
}

std::optional<double> Emitter::number(const json& v) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (std::isfinite(d)) return d;
    out_.count_quirk("non_finite_number");
    return std::nullopt;
  }
  if (v.is_null()) {
    out_.count_quirk("null_reading");
    return std::nullopt;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::string l = lower(s);
    if (l == "nan" || l == "-nan" || l.empty() || l == "n/a" || l == "inf" || l == "-inf") {
      out_.count_quirk("nan_string");
      return std::nullopt;
    }
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0' && std::isfinite(d)) {
      out_.count_quirk("number_as_string");
      return d;
    }
    out_.count_quirk("non_numeric_reading");
    return std::nullopt;
  }
  out_.count_quirk("non_numeric_reading");
  return std::nullopt;
}

std::size_t Emitter::emit(const Target& t, std::string_view quantity, Unit unit, double value,
                          bool counter, std::string origin) {
  // A resource reachable by two links (a detector listed in its group and in the chassis) is
  // reported once.
  std::string key = t.entity;
  key += '\0';
  key += quantity;
  if (auto it = by_key_.find(key); it != by_key_.end()) {
    out_.count_quirk("duplicate_reading");
    return it->second;
  }
  by_key_.emplace(std::move(key), out_.samples.size());
  Sample s;
  s.time = now_;
  s.source = "redfish";
  s.host = host_;
  s.kind = t.kind;
  s.entity = t.entity;
  s.name = t.name;
  s.quantity = std::string(quantity);
  s.unit = unit;
  s.value = value;
  s.counter = counter;
  s.origin = origin.empty() ? t.origin : std::move(origin);
  out_.samples.push_back(std::move(s));
  return out_.samples.size() - 1;
}

std::optional<std::size_t> Emitter::excerpt(const json& parent, std::string_view property,
                                            const Target& t, std::string_view quantity, Unit unit,
                                            double scale, bool counter) {
  if (!parent.is_object()) return std::nullopt;
  auto it = parent.find(property);
  if (it == parent.end()) return std::nullopt;
  const json* reading = &*it;
  std::string data_source;
  if (it->is_object()) {
    auto r = it->find("Reading");
    if (r == it->end()) return std::nullopt;  // a control excerpt or an empty object
    reading = &*r;
    auto ds = it->find("DataSourceUri");
    if (ds != it->end() && ds->is_string()) data_source = ds->get<std::string>();
  }
  auto v = number(*reading);
  if (!v) return std::nullopt;
  auto idx = emit(t, quantity, unit, *v * scale, counter, data_source.empty() ? t.origin : data_source);
  if (!data_source.empty()) by_data_source_.emplace(data_source, idx);
  return idx;
}

StatusInfo Emitter::status(const json& resource, const Target& t) {
  StatusInfo info;
  auto st = resource.find("Status");
  if (st == resource.end() || !st->is_object()) return info;
  if (auto state = st->find("State"); state != st->end() && state->is_string()) {
    info.state = state->get<std::string>();
    static const char* kStates[] = {"Enabled", "Disabled", "StandbyOffline", "StandbySpare",
                                    "InTest", "Starting", "Absent", "UnavailableOffline",
                                    "Deferring", "Quiesced", "Updating", "Qualified", "Degraded"};
    bool standard = std::any_of(std::begin(kStates), std::end(kStates),
                                [&](const char* s) { return info.state == s; });
    if (!standard) out_.count_quirk("nonstandard_state");
    info.absent = info.state == "Absent";
    info.standby = starts_with(info.state, "Standby");
  }
  if (auto h = st->find("Health"); h != st->end() && h->is_string()) {
    const auto& health = h->get_ref<const std::string&>();
    if (health == "OK") info.health = 0;
    else if (health == "Warning") info.health = 1;
    else if (health == "Critical") info.health = 2;
    else out_.count_quirk("nonstandard_health");
  }
  if (info.health && !info.absent) emit(t, "health", Unit::none, *info.health);
  if (auto conds = st->find("Conditions"); conds != st->end() && conds->is_array()) {
    for (const auto& c : *conds) condition_alarm(c, t);
  }
  return info;
}

void Emitter::condition_alarm(const json& c, const Target& t) {
  if (!c.is_object()) return;
  auto type_it = c.find("ConditionType");
  // Subsystem conditions roll up member health; the members raise their own alarms.
  if (type_it != c.end() && type_it->is_string() && *type_it == "Subsystem") return;
  auto sev_it = c.find("Severity");
  Severity sev = sev_it != c.end() && sev_it->is_string() ? severity_from(sev_it->get<std::string>())
                                                         : Severity::warning;
  if (sev == Severity::info) return;
  std::string message_id = c.value("MessageId", std::string());
  std::string name = message_id.substr(message_id.rfind('.') == std::string::npos ? 0 : message_id.rfind('.') + 1);
  Target at = t;
  std::string origin = link_of(c, "OriginOfCondition");
  if (!origin.empty()) {
    at.entity = entity_id(origin);
    at.kind = kind_from_path(origin, t.kind);
    at.origin = origin;
    if (at.entity != t.entity) at.name.clear();
  }
  std::string type = alarm_type_for_message(name, at.kind);
  if (type.empty()) return;
  std::string msg = c.value("Message", message_id);
  alarm(at, sev, type, msg.empty() ? message_id : msg);
}

void Emitter::alarm(const Target& t, Severity severity, std::string type, std::string message) {
  Alarm a;
  a.time = now_;
  a.host = host_;
  a.kind = t.kind;
  a.entity = t.entity;
  a.severity = severity;
  a.type = std::move(type);
  a.message = std::move(message);
  a.origin = t.origin;
  a.source = "redfish";
  out_.add_alarm(std::move(a));
}

void Emitter::finding(const std::string& entity, std::string check, std::string message) {
  out_.findings.push_back(Finding{host_, entity, std::move(check), std::move(message)});
}

void Emitter::sensor(const json& s) {
  if (!s.is_object()) return;
  std::string uri = id_of(s);
  std::string type = s.value("ReadingType", std::string());
  std::string units = s.value("ReadingUnits", std::string());
  const ReadingTypeInfo* info = nullptr;
  for (const auto& i : kReadingTypes) {
    if (i.type == type) info = &i;
  }
  if (!info) {
    if (!type.empty()) {
      out_.count_quirk("unknown_reading_type");
      return;
    }
    info = reading_type_from_units(units);
    if (!info) return;  // neither a type nor a recognisable unit: nothing we can name
    out_.count_quirk("missing_reading_type");
  }
  double scale = info->scale;
  if (!units.empty() && units != info->units) {
    if (info->type == "EnergykWh" && same_units("kWh", units)) out_.count_quirk("unit_kWh");
    else if (info->type == "Power" && units == "kW") { scale = 1000; out_.count_quirk("unit_variant"); }
    else if (same_units(info->units, units)) out_.count_quirk("unit_variant");
    else {
      out_.count_quirk("unit_mismatch");
      finding(entity_id(uri), "unit_mismatch",
              fmt::format("{}: ReadingType {} with ReadingUnits \"{}\" (expected \"{}\"); reading skipped",
                          uri, info->type, units, info->units));
      return;
    }
  }
  Target t{EntityKind::sensor, entity_id(uri), s.value("Name", std::string()), uri};
  auto st = status(s, t);
  if (st.absent) return;
  std::optional<double> value;
  if (auto r = s.find("Reading"); r != s.end()) value = number(*r);
  Thresholds limits;
  if (auto th = s.find("Thresholds"); th != s.end() && th->is_object()) {
    auto limit = [&](const char* key, std::optional<double>& slot) {
      auto it = th->find(key);
      if (it == th->end() || !it->is_object()) return;
      auto r = it->find("Reading");
      if (r == it->end()) return;
      if (r->is_null()) { out_.count_quirk("null_threshold"); return; }
      if (auto v = number(*r)) slot = *v * scale;
    };
    limit("UpperCaution", limits.upper_caution);
    limit("UpperCritical", limits.upper_critical);
    limit("UpperFatal", limits.upper_fatal);
    limit("LowerCaution", limits.lower_caution);
    limit("LowerCritical", limits.lower_critical);
  }
  if (auto known = by_data_source_.find(uri); known != by_data_source_.end()) {
    Sample& merged = out_.samples[known->second];
    bool agree = true;
    if (value) {
      double v = *value * scale;
      if (std::fabs(v - merged.value) > 1e-6 * std::max(1.0, std::fabs(v))) {
        agree = false;
        out_.count_quirk("excerpt_disagrees_with_sensor");
        finding(merged.entity, "excerpt_mismatch",
                fmt::format("{} reads {} in {} but {} in the sensor {}", merged.quantity,
                            merged.value, merged.entity, v, uri));
      }
    }
    // The sensor's limits belong to the sensor's reading; when the two disagree, applying them to
    // the excerpt would raise alarms about a number the limits were never meant for.
    if (agree && merged.limits.empty()) merged.limits = limits;
    return;
  }
  if (!value) return;
  auto idx = emit(t, info->quantity, info->unit, *value * scale, info->counter);
  out_.samples[idx].limits = limits;
  by_data_source_.emplace(uri, idx);
}

bool Emitter::has_alarm(const std::string& entity) const {
  for (const auto& a : out_.alarms)
    if (a.host == host_ && a.entity == entity) return true;
  return false;
}

void Emitter::threshold_alarms() { raise_threshold_alarms(out_, host_); }

}  // namespace astral::facility::detail
