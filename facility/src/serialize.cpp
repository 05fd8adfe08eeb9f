#include "astral/facility/serialize.hpp"

#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "astral/facility/events.hpp"

namespace astral::facility {

using json = nlohmann::json;

namespace {

const std::pair<Unit, const char*> kUnits[] = {
    {Unit::none, "none"}, {Unit::watts, "watts"}, {Unit::joules, "joules"}, {Unit::celsius, "celsius"},
    {Unit::pascals, "pascals"}, {Unit::liters_per_minute, "liters_per_minute"}, {Unit::volts, "volts"},
    {Unit::amperes, "amperes"}, {Unit::hertz, "hertz"}, {Unit::ratio, "ratio"}, {Unit::rpm, "rpm"},
    {Unit::volt_amperes, "volt_amperes"}, {Unit::kilograms_per_cubic_meter, "kilograms_per_cubic_meter"},
    {Unit::joules_per_kilogram_kelvin, "joules_per_kilogram_kelvin"},
    {Unit::cubic_meters_per_second, "cubic_meters_per_second"}, {Unit::seconds, "seconds"}};

const char* unit_name(Unit u) {
  for (const auto& [unit, name] : kUnits)
    if (unit == u) return name;
  return "none";
}

Unit unit_from(const std::string& s) {
  for (const auto& [unit, name] : kUnits)
    if (s == name) return unit;
  throw std::runtime_error("unknown unit '" + s + "'");
}

EntityKind kind_from(const std::string& s) {
  for (int k = 0; k <= static_cast<int>(EntityKind::sensor); ++k)
    if (s == to_string(static_cast<EntityKind>(k))) return static_cast<EntityKind>(k);
  throw std::runtime_error("unknown entity kind '" + s + "'");
}

void put(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = *v;
}

}  // namespace

std::optional<Clock::time_point> parse_time(const std::string& text) {
  int y, mo, d, h, mi;
  double sec;
  char z = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%lf%c", &y, &mo, &d, &h, &mi, &sec, &z) != 7 || z != 'Z')
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi;
  tm.tm_sec = static_cast<int>(sec);
  std::time_t t = timegm(&tm);
  auto us = static_cast<long long>((sec - tm.tm_sec) * 1e6 + 0.5);
  return Clock::from_time_t(t) + std::chrono::microseconds(us);
}

json to_json(const Sample& s) {
  json j = {{"time", format_time(s.time)}, {"source", s.source}, {"host", s.host}, {"kind", to_string(s.kind)},
            {"entity", s.entity}, {"quantity", s.quantity}, {"unit", unit_name(s.unit)}, {"value", s.value}};
  if (!s.name.empty()) j["name"] = s.name;
  if (s.counter) j["counter"] = true;
  if (!s.origin.empty()) j["origin"] = s.origin;
  if (!s.limits.empty()) {
    json l = json::object();
    put(l, "upper_caution", s.limits.upper_caution);
    put(l, "upper_critical", s.limits.upper_critical);
    put(l, "upper_fatal", s.limits.upper_fatal);
    put(l, "lower_caution", s.limits.lower_caution);
    put(l, "lower_critical", s.limits.lower_critical);
    j["limits"] = l;
  }
  return j;
}

json to_json(const Snapshot& snap) {
  json j;
  j["sources"] = json::array();
  for (const auto& s : snap.sources)
    j["sources"].push_back({{"name", s.name}, {"reader", s.reader}, {"ok", s.ok}, {"partial", s.partial},
                            {"error", s.error}, {"seconds", s.seconds}, {"requests", s.requests}});
  j["samples"] = json::array();
  for (const auto& s : snap.samples) j["samples"].push_back(to_json(s));
  j["alarms"] = json::array();
  for (const auto& a : snap.alarms) j["alarms"].push_back(alarm_to_event(a));
  j["findings"] = json::array();
  for (const auto& f : snap.findings)
    j["findings"].push_back({{"host", f.host}, {"entity", f.entity}, {"check", f.check}, {"message", f.message}});
  j["quirks"] = snap.quirks;
  return j;
}

json to_json(const Derived& d) {
  json j;
  j["racks"] = json::array();
  for (const auto& r : d.racks) {
    json x = {{"name", r.name}, {"it_power_watts", r.it_power_w}, {"meters", r.meters}, {"basis", r.basis}};
    put(x, "budget_watts", r.budget_w);
    put(x, "budget_ratio", r.budget_ratio);
    put(x, "headroom_watts", r.headroom_w);
    put(x, "facility_power_watts", r.facility_power_w);
    put(x, "pue_instantaneous", r.pue_instantaneous);
    put(x, "heat_removed_watts", r.heat_removed_w);
    put(x, "liquid_heat_capture_ratio", r.capture_ratio);
    j["racks"].push_back(x);
  }
  j["conversions"] = json::array();
  for (const auto& c : d.conversions)
    j["conversions"].push_back({{"host", c.host}, {"entity", c.entity}, {"name", c.name}, {"input_watts", c.input_w},
                                {"output_watts", c.output_w}, {"loss_watts", c.loss_w()}, {"efficiency", c.efficiency()}});
  j["conversion_loss_watts"] = d.conversion_loss_w();
  j["cooling"] = json::array();
  for (const auto& c : d.cooling) {
    json x = {{"host", c.host}, {"entity", c.entity}, {"name", c.name}, {"density_kg_per_m3", c.density},
              {"specific_heat_j_per_kg_k", c.specific_heat}, {"coolant_properties_from", c.coolant}};
    put(x, "flow_liters_per_minute", c.flow_lpm);
    put(x, "delta_t_kelvin", c.delta_t_k);
    put(x, "heat_reported_watts", c.heat_reported_w);
    put(x, "heat_computed_watts", c.heat_computed_w);
    j["cooling"].push_back(x);
  }
  j["cdus"] = json::array();
  for (const auto& c : d.cdus) {
    json x = {{"host", c.host}, {"entity", c.entity}, {"name", c.name}};
    put(x, "capacity_watts", c.capacity_w);
    put(x, "heat_watts", c.heat_w);
    put(x, "headroom_watts", c.headroom_w);
    j["cdus"].push_back(x);
  }
  j["thermal_headroom"] = json::array();
  for (const auto& h : d.headroom)
    j["thermal_headroom"].push_back({{"host", h.host}, {"entity", h.entity}, {"quantity", h.quantity},
                                     {"value_celsius", h.value}, {"limit_celsius", h.limit}, {"headroom_kelvin", h.headroom()}});
  if (d.chains) {
    auto chain = [](const ChainResult& c) {
      json stages = json::array();
      for (const auto& [name, loss] : c.stage_loss_w) stages.push_back({{"stage", name}, {"loss_watts", loss}});
      return json{{"efficiency", c.efficiency}, {"input_watts", c.input_w}, {"loss_watts", c.loss_w}, {"stages", stages}};
    };
    j["chains"] = {{"ac", chain(d.chains->ac)}, {"hvdc", chain(d.chains->hvdc)}, {"saved_watts", d.chains->saved_w},
                   {"saved_ratio", d.chains->saved_ratio}, {"saved_kwh_per_year", d.chains->saved_kwh_per_year}};
  }
  return j;
}

json to_json(const PueResult& p) {
  json j = {{"seconds", p.seconds}, {"it_joules", p.it_j}, {"facility_joules", p.facility_j},
            {"total_joules", p.total_j}, {"total_from_meter", p.from_total_meter}, {"notes", p.notes}};
  j["pue"] = p.pue ? json(*p.pue) : json(nullptr);
  j["meters"] = json::array();
  for (const auto& m : p.meters) {
    const char* cls = m.cls == MeterClass::it ? "it" : m.cls == MeterClass::facility ? "facility" : "total";
    j["meters"].push_back({{"meter", m.meter}, {"class", cls}, {"start_joules", m.start_j}, {"end_joules", m.end_j},
                           {"delta_joules", m.delta_j}, {"reset", m.reset}});
  }
  return j;
}

Snapshot snapshot_from_json(const json& doc) {
  if (!doc.is_object() || !doc.contains("samples") || !doc["samples"].is_array())
    throw std::runtime_error("not an `astral facility read --json` document (no \"samples\" list)");
  Snapshot s;
  std::size_t i = 0;
  for (const auto& x : doc["samples"]) {
    try {
      Sample v;
      auto t = parse_time(x.at("time").get<std::string>());
      if (!t) throw std::runtime_error("bad time");
      v.time = *t;
      v.source = x.at("source").get<std::string>();
      v.host = x.at("host").get<std::string>();
      v.kind = kind_from(x.at("kind").get<std::string>());
      v.entity = x.at("entity").get<std::string>();
      v.quantity = x.at("quantity").get<std::string>();
      v.unit = unit_from(x.at("unit").get<std::string>());
      v.value = x.at("value").get<double>();
      v.counter = x.value("counter", false);
      v.name = x.value("name", std::string());
      v.origin = x.value("origin", std::string());
      s.samples.push_back(std::move(v));
    } catch (const std::exception& e) {
      throw std::runtime_error("samples[" + std::to_string(i) + "]: " + e.what());
    }
    ++i;
  }
  return s;
}

}  // namespace astral::facility
