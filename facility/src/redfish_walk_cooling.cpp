// Redfish walker, part 2: cooling. ThermalSubsystem (fans, pumps, coolant connectors, filters,
// leak detection, thermal metrics), ThermalEquipment (CDUs and their loops), TelemetryService.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "redfish_walk.hpp"
#include "text_util.hpp"

namespace astral::facility::detail {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

std::string label(const Target& t) { return t.name.empty() ? t.entity : t.name; }

}  // namespace

void Walker::thermal_subsystem(const std::string& uri, const Target& chassis) {
  auto ts = get(uri);
  if (!ts) return;
  if (auto tm = link_of(*ts, "ThermalMetrics"); !tm.empty()) thermal_metrics(tm, chassis);
  for (const json& f : members(link_of(*ts, "Fans"))) fan(f);
  for (const json& p : members(link_of(*ts, "Pumps"))) pump(p);
  for (const json& c : members(link_of(*ts, "CoolantConnectors"))) connector(c);
  for (const json& f : members(link_of(*ts, "Filters"))) filter(f);
  if (auto leak = link_of(*ts, "LeakDetection"); !leak.empty()) leak_detection(leak, chassis);
}

void Walker::thermal_metrics(const std::string& uri, const Target& chassis) {
  auto tm = get(uri);
  if (!tm) return;
  const json& summary = child(*tm, "TemperatureSummaryCelsius");
  for (const char* where : {"Internal", "Intake", "Ambient", "Exhaust"}) {
    std::string quantity = std::string(where) + "_temperature";
    std::transform(quantity.begin(), quantity.end(), quantity.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    emit_.excerpt(summary, where, chassis, quantity, Unit::celsius);
  }
  const json& readings = child(*tm, "TemperatureReadingsCelsius");
  for (std::size_t i = 0; readings.is_array() && i < readings.size(); ++i) {
    const json& r = readings[i];
    if (!r.is_object()) continue;
    std::string ds = r.value("DataSourceUri", std::string());
    Target t{EntityKind::sensor, ds.empty() ? fmt::format("{}/Temperatures/{}", chassis.entity, i) : entity_id(ds),
             r.value("DeviceName", std::string()), ds.empty() ? uri : ds};
    json wrapper = {{"v", r}};
    emit_.excerpt(wrapper, "v", t, "temperature", Unit::celsius);
  }
  emit_.excerpt(*tm, "AirFlowCubicMetersPerMinute", chassis, "air_flow", Unit::cubic_meters_per_second, 1.0 / 60);
  emit_.excerpt(*tm, "DeltaPressurekPa", chassis, "air_delta_pressure", Unit::pascals, 1000);
  emit_.excerpt(*tm, "PowerWatts", chassis, "cooling_power", Unit::watts);
  emit_.excerpt(*tm, "EnergykWh", chassis, "cooling_energy", Unit::joules, 3.6e6, true);
}

void Walker::fan(const json& f) {
  std::string uri = id_of(f);
  Target t{EntityKind::fan, entity_id(uri), name_of(f), uri};
  auto st = emit_.status(f, t);
  if (st.absent) return;
  emit_.excerpt(f, "SpeedPercent", t, "fan_speed", Unit::ratio, 0.01);
  const json& sp = child(f, "SpeedPercent");
  if (sp.is_object() && sp.contains("SpeedRPM"))
    if (auto v = emit_.number(sp["SpeedRPM"])) emit_.emit(t, "fan_speed_rpm", Unit::rpm, *v);
  if (st.health && *st.health == 2 && !emit_.has_alarm(t.entity))
    emit_.alarm(t, Severity::error, "fan_failed", fmt::format("Fan {} health is Critical", label(t)));
}

void Walker::thermal_equipment(const std::string& uri) {
  auto te = get(uri);
  if (!te) return;
  for (const char* coll : {"CDUs", "ImmersionUnits", "HeatExchangers", "RPUs"})
    for (const json& u : members(link_of(*te, coll))) cooling_unit(u);
  for (const json& l : members(link_of(*te, "CoolingLoops"))) cooling_loop(l);
}

void Walker::cooling_unit(const json& u) {
  std::string uri = id_of(u);
  Target t{EntityKind::cdu, entity_id(uri), name_of(u), uri};
  auto st = emit_.status(u, t);
  if (st.absent) return;
  if (auto cap = u.find("CoolingCapacityWatts"); cap != u.end())
    if (auto v = emit_.number(*cap)) emit_.emit(t, "cooling_capacity", Unit::watts, *v);
  if (auto air = u.find("RatedThermalLossToAirWatts"); air != u.end())
    if (auto v = emit_.number(*air)) emit_.emit(t, "rated_heat_to_air", Unit::watts, *v);
  const json& coolant = child(u, "Coolant");
  if (coolant.is_object()) {
    if (auto d = coolant.find("DensityKgPerCubicMeter"); d != coolant.end())
      if (auto v = emit_.number(*d)) emit_.emit(t, "coolant_density", Unit::kilograms_per_cubic_meter, *v);
    if (auto c = coolant.find("SpecificHeatkJoulesPerKgK"); c != coolant.end())
      if (auto v = emit_.number(*c)) emit_.emit(t, "coolant_specific_heat", Unit::joules_per_kilogram_kelvin, *v * 1000);
  }
  if (auto env = link_of(u, "EnvironmentMetrics"); !env.empty()) environment(env, t);
  for (const char* coll : {"PrimaryCoolantConnectors", "SecondaryCoolantConnectors"})
    for (const json& c : members(link_of(u, coll))) connector(c);
  for (const json& p : members(link_of(u, "Pumps"))) pump(p);
  for (const json& r : members(link_of(u, "Reservoirs"))) reservoir(r);
  for (const json& f : members(link_of(u, "Filters"))) filter(f);
  if (auto leak = link_of(u, "LeakDetection"); !leak.empty()) leak_detection(leak, t);
}

void Walker::cooling_loop(const json& l) {
  std::string uri = id_of(l);
  Target t{EntityKind::cdu, entity_id(uri), name_of(l), uri};
  if (emit_.status(l, t).absent) return;
  emit_.excerpt(l, "CoolantLevelPercent", t, "coolant_level", Unit::ratio, 0.01);
  std::string level = l.value("CoolantLevelStatus", std::string());
  if (level == "Warning" || level == "Critical")
    emit_.alarm(t, level == "Critical" ? Severity::critical : Severity::warning, "coolant_level_low",
                fmt::format("Cooling loop {} coolant level is {}", label(t), level));
}

void Walker::connector(const json& c) {
  std::string uri = id_of(c);
  Target t{EntityKind::coolant_connector, entity_id(uri), name_of(c), uri};
  if (emit_.status(c, t).absent) return;
  const json& coolant = child(c, "Coolant");
  if (coolant.is_object()) {
    if (auto d = coolant.find("DensityKgPerCubicMeter"); d != coolant.end())
      if (auto v = emit_.number(*d)) emit_.emit(t, "coolant_density", Unit::kilograms_per_cubic_meter, *v);
    if (auto cp = coolant.find("SpecificHeatkJoulesPerKgK"); cp != coolant.end())
      if (auto v = emit_.number(*cp)) emit_.emit(t, "coolant_specific_heat", Unit::joules_per_kilogram_kelvin, *v * 1000);
  }
  if (auto rated = c.find("RatedFlowLitersPerMinute"); rated != c.end())
    if (auto v = emit_.number(*rated)) emit_.emit(t, "rated_flow", Unit::liters_per_minute, *v);
  auto flow = emit_.excerpt(c, "FlowLitersPerMinute", t, "coolant_flow", Unit::liters_per_minute);
  auto supply = emit_.excerpt(c, "SupplyTemperatureCelsius", t, "coolant_supply_temperature", Unit::celsius);
  emit_.excerpt(c, "ReturnTemperatureCelsius", t, "coolant_return_temperature", Unit::celsius);
  emit_.excerpt(c, "DeltaTemperatureCelsius", t, "coolant_delta_temperature", Unit::celsius);
  emit_.excerpt(c, "SupplyPressurekPa", t, "coolant_supply_pressure", Unit::pascals, 1000);
  emit_.excerpt(c, "ReturnPressurekPa", t, "coolant_return_pressure", Unit::pascals, 1000);
  emit_.excerpt(c, "DeltaPressurekPa", t, "coolant_delta_pressure", Unit::pascals, 1000);
  emit_.excerpt(c, "HeatRemovedkW", t, "heat_removed", Unit::watts, 1000);
  emit_.excerpt(c, "ValvePositionPercent", t, "valve_position", Unit::ratio, 0.01);
  // The control loop's allowable range bounds the reading: beyond it the CDU cannot hold the loop.
  auto control_limit = [&](std::optional<std::size_t> idx, const char* control, bool upper) {
    const json& ctl = child(c, control);
    if (!idx || !ctl.is_object()) return;
    const char* key = upper ? "AllowableMax" : "AllowableMin";
    if (auto it = ctl.find(key); it != ctl.end()) {
      if (auto v = emit_.number(*it)) {
        Thresholds& l = emit_.snapshot().samples[*idx].limits;
        (upper ? l.upper_critical : l.lower_critical) = *v;
      }
    }
  };
  control_limit(supply, "SupplyTemperatureControlCelsius", true);
  control_limit(flow, "FlowControlLitersPerMinute", false);
}

void Walker::pump(const json& p) {
  std::string uri = id_of(p);
  Target t{EntityKind::pump, entity_id(uri), name_of(p), uri};
  auto st = emit_.status(p, t);
  if (st.absent) return;
  auto speed = emit_.excerpt(p, "PumpSpeedPercent", t, "pump_speed", Unit::ratio, 0.01);
  const json& sp = child(p, "PumpSpeedPercent");
  if (sp.is_object() && sp.contains("SpeedRPM"))
    if (auto v = emit_.number(sp["SpeedRPM"])) emit_.emit(t, "pump_speed_rpm", Unit::rpm, *v);
  std::optional<double> setpoint;
  const json& ctl = child(p, "SpeedControlPercent");
  if (ctl.is_object() && ctl.contains("SetPoint")) {
    setpoint = emit_.number(ctl["SetPoint"]);
    if (setpoint) emit_.emit(t, "pump_speed_setpoint", Unit::ratio, *setpoint / 100);
  }
  emit_.excerpt(p, "InletPressurekPa", t, "pump_inlet_pressure", Unit::pascals, 1000);
  bool failed = (st.health && *st.health == 2) || st.state == "UnavailableOffline";
  if (failed) {
    emit_.alarm(t, Severity::critical, "pump_failed",
                fmt::format("Pump {} has failed (state {}, health {})", label(t), st.state.empty() ? "?" : st.state,
                            st.health ? (*st.health == 2 ? "Critical" : *st.health == 1 ? "Warning" : "OK") : "?"));
  } else if (speed && setpoint && *setpoint > 0 && emit_.snapshot().samples[*speed].value == 0 && st.state == "Enabled") {
    emit_.alarm(t, Severity::error, "pump_stalled",
                fmt::format("Pump {} reads 0 % speed against a set point of {} %", label(t), *setpoint));
  }
}

void Walker::reservoir(const json& r) {
  std::string uri = id_of(r);
  Target t{EntityKind::reservoir, entity_id(uri), name_of(r), uri};
  if (emit_.status(r, t).absent) return;
  emit_.excerpt(r, "FluidLevelPercent", t, "coolant_level", Unit::ratio, 0.01);
  emit_.excerpt(r, "InternalPressurekPa", t, "reservoir_pressure", Unit::pascals, 1000);
  std::string level = r.value("FluidLevelStatus", std::string());
  if (level == "Warning" || level == "Critical")
    emit_.alarm(t, level == "Critical" ? Severity::critical : Severity::warning, "coolant_level_low",
                fmt::format("Reservoir {} fluid level is {}", label(t), level));
}

void Walker::filter(const json& f) {
  std::string uri = id_of(f);
  Target t{EntityKind::filter, entity_id(uri), name_of(f), uri};
  auto st = emit_.status(f, t);
  if (st.absent) return;
  emit_.excerpt(f, "DeltaLiquidPressurekPa", t, "filter_delta_pressure", Unit::pascals, 1000);
  auto hours = f.find("ServiceHours");
  auto rated = f.find("RatedServiceHours");
  if (hours != f.end() && rated != f.end()) {
    auto h = emit_.number(*hours), r = emit_.number(*rated);
    if (h && r && *r > 0) emit_.emit(t, "service_life_used", Unit::ratio, *h / *r);
  }
  if (st.health && *st.health >= 1 && !emit_.has_alarm(t.entity))
    emit_.alarm(t, *st.health == 2 ? Severity::error : Severity::warning, "filter_requires_service",
                fmt::format("Filter {} health is {}", label(t), *st.health == 2 ? "Critical" : "Warning"));
}

void Walker::leak_detection(const std::string& uri, const Target& parent) {
  auto ld = get(uri);
  if (!ld) return;
  Target lt{parent.kind, entity_id(uri), name_of(*ld), uri};
  emit_.status(*ld, lt);
  const json& groups = child(*ld, "LeakDetectorGroups");
  bool have_groups = groups.is_array() && !groups.empty();
  for (std::size_t g = 0; have_groups && g < groups.size(); ++g) {
    const json& group = groups[g];
    Target gt{parent.kind, fmt::format("{}/{}", lt.entity, group.value("GroupName", std::to_string(g))),
              group.value("GroupName", std::string()), uri};
    emit_.excerpt(group, "HumidityPercent", gt, "humidity", Unit::ratio, 0.01);
    const json& detectors = child(group, "Detectors");
    for (std::size_t i = 0; detectors.is_array() && i < detectors.size(); ++i) {
      const json& d = detectors[i];
      if (!d.is_object()) continue;
      std::string ds = d.value("DataSourceUri", std::string());
      std::string name = d.value("DeviceName", std::string());
      Target dt{EntityKind::leak_detector,
                ds.empty() ? fmt::format("{}/{}", gt.entity, name.empty() ? std::to_string(i) : name) : entity_id(ds),
                name, ds.empty() ? uri : ds};
      std::optional<int> health;
      if (auto s = d.find("Status"); s != d.end() && s->is_object()) {
        std::string h = s->value("Health", std::string());
        if (h == "OK") health = 0;
        else if (h == "Warning") health = 1;
        else if (h == "Critical") health = 2;
      }
      leak_state(dt, d.value("DetectorState", std::string()), health);
    }
  }
  // The older model: a LeakDetectors collection (deprecated inside LeakDetection, still common).
  if (!have_groups) {
    for (const json& d : members(link_of(*ld, "LeakDetectors"))) {
      Target dt{EntityKind::leak_detector, entity_id(id_of(d)), name_of(d), id_of(d)};
      auto st = emit_.status(d, dt);
      if (!st.absent) leak_state(dt, d.value("DetectorState", std::string()), st.health);
    }
  }
}

void Walker::leak_state(const Target& t, const std::string& state, std::optional<int> health) {
  int level = -1;
  if (state == "OK") level = 0;
  else if (state == "Warning") level = 1;
  else if (state == "Critical") level = 2;
  else if (state == "Unavailable" || state == "Absent" || state.empty()) return;
  else {
    // Not a DMTF value ("LeakDetected" on some BMCs): trust Status.Health, else the word itself.
    emit_.snapshot().count_quirk("nonstandard_detector_state");
    std::string lower = state;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (health) level = *health;
    else if (lower.find("leak") != std::string::npos || lower.find("detect") != std::string::npos) level = 2;
    else level = 1;
  }
  emit_.emit(t, "leak_state", Unit::none, level);
  if (level >= 1)
    emit_.alarm(t, level == 2 ? Severity::critical : Severity::warning, "leak_detected",
                fmt::format("Leak detector {} reports {}", label(t), state));
}

void Walker::telemetry(const std::string& uri) {
  auto ts = get(uri);
  if (!ts) return;
  for (const json& report : members(link_of(*ts, "MetricReports"))) {
    const json& values = child(report, "MetricValues");
    if (!values.is_array()) continue;
    // Reports list values oldest first; keep the last value of each property.
    std::map<std::string, const json*> latest;
    for (const auto& v : values) {
      if (!v.is_object()) continue;
      std::string property = v.value("MetricProperty", v.value("MetricId", std::string()));
      if (!property.empty()) latest[property] = &v;
    }
    for (const auto& [full_property, v] : latest) {
      // ".../EnvironmentMetrics#/PowerWatts/Reading" names the quantity before "/Reading".
      std::string property = full_property;
      if (ends_with(property, "/Reading")) property.resize(property.size() - 8);
      std::string last = property.substr(property.find_last_of("/#") + 1);
      const char* quantity = nullptr;
      Unit unit = Unit::none;
      double scale = 1;
      bool counter = false;
      if (ends_with(last, "Watts")) quantity = "power", unit = Unit::watts;
      else if (ends_with(last, "Celsius")) quantity = "temperature", unit = Unit::celsius;
      else if (ends_with(last, "kWh")) quantity = "energy", unit = Unit::joules, scale = 3.6e6, counter = true;
      else if (ends_with(last, "Joules")) quantity = "energy", unit = Unit::joules, counter = true;
      else if (ends_with(last, "Volts")) quantity = "voltage", unit = Unit::volts;
      else if (ends_with(last, "RPM")) quantity = "speed", unit = Unit::rpm;
      if (!quantity) continue;
      std::string owner = property.substr(0, property.find_last_of("/#"));
      while (!owner.empty() && owner.back() == '#') owner.pop_back();
      std::string entity = entity_id(owner);
      Target t{EntityKind::sensor, entity, report.value("Id", std::string()), id_of(report)};
      auto value = v->find("MetricValue");
      if (value == v->end()) continue;
      auto n = emit_.number(*value);
      if (!n) continue;
      auto idx = emit_.emit(t, quantity, unit, *n * scale, counter);
      emit_.snapshot().samples[idx].source = "redfish-telemetry";
    }
  }
}

}  // namespace astral::facility::detail
