// Redfish walker, part 1: navigation, chassis, power subsystem, deprecated Power/Thermal, sensors,
// power equipment (PDUs, power shelves, circuits, outlets). Cooling is in redfish_walk_cooling.cpp.
#include "redfish_walk.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

namespace astral::facility::detail {

namespace {

// Six levels of expansion nest resources about 30 deep; the walk runs on 256 KiB fiber stacks.
constexpr int kMaxInlineDepth = 64;

bool has_type(const json& j, std::string_view type) {
  auto it = j.find("@odata.type");
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>().find(type) != std::string::npos;
}

}  // namespace

const json* Walker::get(const std::string& uri_in) {
  std::string uri = uri_in;
  if (auto hash = uri.find('#'); hash != std::string::npos) uri.resize(hash);
  if (uri.empty()) return nullptr;
  if (auto it = cache_.find(uri); it != cache_.end()) return &it->second;
  if (auto it = inline_members_.find(uri); it != inline_members_.end()) return it->second;
  if (failed_.count(uri)) return nullptr;
  if (uri.find("://") != std::string::npos) return nullptr;  // another service's resource
  if (cache_.size() + failed_.size() >= options_.max_resources) {
    if (!bound_reported_) {
      emit_.finding({}, "crawl_bound", fmt::format("stopped after {} resources", options_.max_resources));
      bound_reported_ = true;
    }
    complete_ = false;
    return nullptr;
  }
  if (fetch_.out_of_time()) {
    report_deadline();
    return nullptr;
  }
  Fetched f = fetch_.get(uri);
  if (!f.ok) {
    failed_.insert(uri);
    complete_ = false;
    if (f.malformed) emit_.snapshot().count_quirk("malformed_json");
    emit_.finding(entity_id(uri), f.malformed ? "malformed_json" : "http", f.error);
    // The deadline may run out during this request rather than before the next one.
    if (fetch_.out_of_time()) report_deadline();
    return nullptr;
  }
  if (!f.body.is_object()) {
    failed_.insert(uri);
    complete_ = false;
    emit_.finding(entity_id(uri), "malformed_json", fmt::format("{}: not a JSON object", uri));
    return nullptr;
  }
  auto [it, _] = cache_.emplace(uri, std::move(f.body));
  index_inline(it->second);
  return &it->second;
}

// Expanded resources ($expand) sit inside the payload that carried them: every object there that
// is a whole resource (an @odata.id and more) is found by its URI without a request.
void Walker::index_inline(const json& node, int depth) {
  if (depth > kMaxInlineDepth) return;  // a payload nested deeper is no expansion; bound the stack
  if (node.is_array()) {
    for (const auto& v : node) index_inline(v, depth + 1);
    return;
  }
  if (!node.is_object()) return;
  std::string uri = id_of(node);
  if (!uri.empty() && uri.find('#') == std::string::npos && node.size() > 1 &&
      (node.contains("Id") || node.contains("@odata.type")))
    inline_members_.emplace(std::move(uri), &node);
  for (const auto& [key, value] : node.items())
    if (value.is_structured() && key != "Links") index_inline(value, depth + 1);
}

bool Walker::expanded_inline(const std::string& collection_uri) const {
  auto it = inline_members_.find(collection_uri);
  if (it == inline_members_.end()) return false;
  const json& list = child(*it->second, "Members");
  return !list.is_array() || std::all_of(list.begin(), list.end(), [](const json& m) { return m.size() > 1; });
}

// One request for a whole subtree where the service expands several levels; when it refuses,
// the walk below fetches resource by resource as it would without.
void Walker::prefetch(const std::string& uri) {
  if (uri.empty() || expand_levels_ < 2 || inline_members_.count(uri) || cache_.count(uri)) return;
  std::string deep = fmt::format("{}?$expand=.($levels={})", uri, expand_levels_);
  if (fetch_.out_of_time()) return;
  Fetched f = fetch_.get(deep);
  if (!f.ok || !f.body.is_object()) {
    emit_.snapshot().count_quirk("deep_expand_refused");
    expand_levels_ = 1;
    return;
  }
  auto [it, _] = cache_.emplace(std::move(deep), std::move(f.body));
  index_inline(it->second);
}

void Walker::report_deadline() {
  if (!bound_reported_) {
    emit_.finding({}, "deadline", "endpoint deadline reached; the rest of the service was not read");
    bound_reported_ = true;
  }
  complete_ = false;
}

std::vector<std::reference_wrapper<const json>> Walker::members(const std::string& uri) {
  std::vector<std::reference_wrapper<const json>> out;
  std::string page = uri;
  if (page.empty()) return out;
  // A collection expanded inside its parent, members and all, is already here; otherwise ask for
  // its members (one request, not one per member).
  if (expand_ && !expanded_inline(page)) page += "?$expand=.($levels=1)";
  std::set<std::string> pages_seen;
  for (int pages = 0; !page.empty() && pages < 64 && pages_seen.insert(page).second; ++pages) {
    const json* coll = get(page);
    if (!coll) break;
    const json& list = child(*coll, "Members");
    if (list.is_array()) {
      for (const auto& m : list) {
        if (!m.is_object()) continue;
        bool inline_member = m.size() > 1 && (m.contains("Id") || m.contains("@odata.type"));
        if (inline_member) {
          inline_members_.emplace(id_of(m), &m);
          out.emplace_back(m);
        } else if (const json* full = get(id_of(m))) {
          out.emplace_back(*full);
        }
      }
    }
    const json& next = child(*coll, "Members@odata.nextLink");
    page = next.is_string() ? next.get<std::string>() : std::string();
  }
  return out;
}

bool Walker::run(const json& root) {
  const json& features = child(child(root, "ProtocolFeaturesSupported"), "ExpandQuery");
  expand_ = fetch_.supports_query() && features.is_object() &&
            (child(features, "ExpandAll") == true || child(features, "Levels") == true);
  const json& max_levels = child(features, "MaxLevels");
  if (expand_ && child(features, "Levels") == true && max_levels.is_number_integer()) {
    long long most = std::max(1, options_.expand_levels);
    expand_levels_ = static_cast<int>(std::clamp<long long>(max_levels.get<long long>(), 1, most));
  }
  // Power equipment first: it names the chassis that are power shelves.
  if (auto pe = link_of(root, "PowerEquipment"); !pe.empty()) {
    prefetch(pe);
    power_equipment(pe);
  }
  prefetch(link_of(root, "Chassis"));
  for (const json& c : members(link_of(root, "Chassis"))) chassis(c);
  if (auto te = link_of(root, "ThermalEquipment"); !te.empty()) {
    prefetch(te);
    thermal_equipment(te);
  }
  if (options_.telemetry) {
    if (auto ts = link_of(root, "TelemetryService"); !ts.empty()) telemetry(ts);
  }
  for (const auto& s : sensor_collections_) sensors(s);
  emit_.threshold_alarms();
  return complete_;
}

bool Walker::power_excerpt(const json& parent, const char* property, const Target& t,
                           const char* quantity) {
  if (!emit_.excerpt(parent, property, t, quantity, Unit::watts)) return false;
  const json& ex = child(parent, property);
  if (!ex.is_object()) return true;
  if (auto va = ex.find("ApparentVA"); va != ex.end()) {
    if (auto v = emit_.number(*va)) emit_.emit(t, "apparent_power", Unit::volt_amperes, *v);
  }
  if (auto pf = ex.find("PowerFactor"); pf != ex.end()) {
    if (auto v = emit_.number(*pf)) emit_.emit(t, "power_factor", Unit::ratio, *v);
  }
  return true;
}

void Walker::fan_speeds(const json& parent, const Target& owner) {
  const json& list = child(parent, "FanSpeedsPercent");
  if (!list.is_array()) return;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& f = list[i];
    std::string ds = f.is_object() ? f.value("DataSourceUri", std::string()) : std::string();
    std::string name = f.is_object() ? f.value("DeviceName", std::string()) : std::string();
    Target t{EntityKind::fan, ds.empty() ? fmt::format("{}/Fans/{}", owner.entity, i) : entity_id(ds),
             name, ds.empty() ? owner.origin : ds};
    json wrapper = {{"v", f}};
    emit_.excerpt(wrapper, "v", t, "fan_speed", Unit::ratio, 0.01);
    if (auto rpm = f.find("SpeedRPM"); f.is_object() && rpm != f.end()) {
      if (auto v = emit_.number(*rpm)) emit_.emit(t, "fan_speed_rpm", Unit::rpm, *v);
    }
  }
}

void Walker::chassis(const json& c) {
  std::string uri = id_of(c);
  std::string type = c.value("ChassisType", std::string());
  EntityKind kind = EntityKind::chassis;
  if (type == "Rack" || type == "RackGroup") kind = EntityKind::rack;
  else if (type == "PowerStrip") kind = EntityKind::pdu;
  else if (shelf_chassis_.count(uri)) kind = EntityKind::power_shelf;
  Target t{kind, entity_id(uri), name_of(c), uri};
  if (emit_.status(c, t).absent) return;
  if (auto max = c.find("MaxPowerWatts"); max != c.end()) {
    if (auto v = emit_.number(*max)) emit_.emit(t, "power_max", Unit::watts, *v);
  }
  bool have_power = false;
  if (auto env = link_of(c, "EnvironmentMetrics"); !env.empty()) have_power |= environment(env, t);
  if (auto ps = link_of(c, "PowerSubsystem"); !ps.empty()) have_power |= power_subsystem(ps, uri, t);
  if (!have_power) {
    if (auto p = link_of(c, "Power"); !p.empty()) have_power |= power_deprecated(p, t);
  }
  if (auto ts = link_of(c, "ThermalSubsystem"); !ts.empty()) thermal_subsystem(ts, t);
  else if (auto th = link_of(c, "Thermal"); !th.empty()) thermal_deprecated(th, t);
  if (auto leaks = link_of(c, "LeakDetectors"); !leaks.empty()) {
    for (const json& d : members(leaks)) {
      Target dt{EntityKind::leak_detector, entity_id(id_of(d)), name_of(d), id_of(d)};
      auto st = emit_.status(d, dt);
      if (!st.absent) leak_state(dt, d.value("DetectorState", std::string()), st.health);
    }
  }
  bool read_sensors = options_.sensors == SensorPolicy::all ||
                      (options_.sensors == SensorPolicy::automatic && (expand_ || !have_power));
  if (read_sensors) {
    if (auto s = link_of(c, "Sensors"); !s.empty()) sensor_collections_.push_back(s);
  }
}

bool Walker::environment(const std::string& uri, const Target& t) {
  auto env = get(uri);
  if (!env) return false;
  bool have_power = power_excerpt(*env, "PowerWatts", t, "power");
  emit_.excerpt(*env, "EnergykWh", t, "energy", Unit::joules, 3.6e6, true);
  emit_.excerpt(*env, "EnergyJoules", t, "energy", Unit::joules, 1, true);
  emit_.excerpt(*env, "TemperatureCelsius", t, "temperature", Unit::celsius);
  emit_.excerpt(*env, "HumidityPercent", t, "humidity", Unit::ratio, 0.01);
  emit_.excerpt(*env, "DewPointCelsius", t, "dew_point", Unit::celsius);
  emit_.excerpt(*env, "AmbientTemperatureCelsius", t, "ambient_temperature", Unit::celsius);
  emit_.excerpt(*env, "PowerLoadPercent", t, "power_load", Unit::ratio, 0.01);
  emit_.excerpt(*env, "CurrentAmps", t, "current", Unit::amperes);
  emit_.excerpt(*env, "Voltage", t, "voltage", Unit::volts);
  const json& limit = child(*env, "PowerLimitWatts");
  if (limit.is_object() && limit.value("ControlMode", std::string()) != "Disabled") {
    if (auto sp = limit.find("SetPoint"); sp != limit.end()) {
      if (auto v = emit_.number(*sp)) {
        emit_.emit(t, "power_limit", Unit::watts, *v);
        if (const Sample* p = emit_.snapshot().find(emit_.host(), t.entity, "power"); p && *v > 0 && p->value >= 0.98 * *v)
          emit_.alarm(t, Severity::warning, "power_capping",
                      fmt::format("{} draws {} W against its power limit of {} W", t.name.empty() ? t.entity : t.name, p->value, *v));
      }
    }
  }
  fan_speeds(*env, t);
  return have_power;
}

bool Walker::power_subsystem(const std::string& uri_in, const std::string& chassis_uri, const Target& chassis) {
  std::string uri = uri_in;
  auto ps = get(uri);
  if (ps && !has_type(*ps, "PowerSubsystem")) {
    // A link that points at the wrong resource (the DMTF power-shelf mockup links its Sensors
    // here); Redfish URIs are normative, so try the conventional one.
    emit_.snapshot().count_quirk("link_type_mismatch");
    emit_.finding(chassis.entity, "link_type_mismatch",
                  fmt::format("{} links PowerSubsystem to {}, a {}", chassis_uri, uri,
                              ps->value("@odata.type", std::string("resource of unknown type"))));
    uri = chassis_uri + "/PowerSubsystem";
    ps = uri == uri_in ? nullptr : get(uri);
    if (ps && !has_type(*ps, "PowerSubsystem")) ps = nullptr;
  }
  if (!ps) return false;
  if (auto cap = ps->find("CapacityWatts"); cap != ps->end()) {
    if (auto v = emit_.number(*cap)) emit_.emit(chassis, "power_capacity", Unit::watts, *v);
  }
  const json& alloc = child(*ps, "Allocation");
  if (alloc.is_object()) {
    if (auto a = alloc.find("AllocatedWatts"); a != alloc.end())
      if (auto v = emit_.number(*a)) emit_.emit(chassis, "power_allocated", Unit::watts, *v);
    if (auto r = alloc.find("RequestedWatts"); r != alloc.end())
      if (auto v = emit_.number(*r)) emit_.emit(chassis, "power_requested", Unit::watts, *v);
  }
  bool rectifier = shelf_chassis_.count(chassis_uri) > 0;
  bool have_power = false;
  for (const json& p : members(link_of(*ps, "PowerSupplies"))) have_power |= power_supply(p, rectifier);
  return have_power;
}

bool Walker::power_supply(const json& p, bool rectifier) {
  std::string uri = id_of(p);
  std::string name = name_of(p);
  Target t{rectifier ? EntityKind::rectifier : EntityKind::psu, entity_id(uri), name, uri};
  auto st = emit_.status(p, t);
  if (st.absent) return false;
  if (auto cap = p.find("PowerCapacityWatts"); cap != p.end()) {
    if (auto v = emit_.number(*cap)) emit_.emit(t, "power_capacity", Unit::watts, *v);
  }
  const char* fault = rectifier ? "rectifier_fault" : "psu_fault";
  std::string label = name.empty() ? t.entity : name;
  if (st.health && *st.health >= 1 && !st.standby && !emit_.has_alarm(t.entity))
    emit_.alarm(t, *st.health == 2 ? Severity::critical : Severity::warning, fault,
                fmt::format("{} {} health is {}", rectifier ? "Rectifier" : "Power supply", label,
                            *st.health == 2 ? "Critical" : "Warning"));
  std::string line = p.value("LineInputStatus", std::string());
  if (!line.empty() && line != "Normal" && line != "Unknown")
    emit_.alarm(t, Severity::error, "psu_input_lost",
                fmt::format("{} input line status is {}", label, line));
  bool have_power = false;
  if (auto m = link_of(p, "Metrics"); !m.empty()) {
    if (auto metrics = get(m)) {
      have_power = emit_.excerpt(*metrics, "InputPowerWatts", t, "input_power", Unit::watts).has_value();
      emit_.excerpt(*metrics, "OutputPowerWatts", t, "output_power", Unit::watts);
      emit_.excerpt(*metrics, "InputVoltage", t, "input_voltage", Unit::volts);
      emit_.excerpt(*metrics, "InputCurrentAmps", t, "input_current", Unit::amperes);
      emit_.excerpt(*metrics, "EnergykWh", t, "energy", Unit::joules, 3.6e6, true);
      emit_.excerpt(*metrics, "TemperatureCelsius", t, "temperature", Unit::celsius);
      emit_.excerpt(*metrics, "FrequencyHz", t, "frequency", Unit::hertz);
      emit_.excerpt(*metrics, "FanSpeedPercent", t, "fan_speed", Unit::ratio, 0.01);
    }
  }
  return have_power;
}

bool Walker::power_deprecated(const std::string& uri, const Target& chassis) {
  auto power = get(uri);
  if (!power) return false;
  bool have_power = false;
  const json& controls = child(*power, "PowerControl");
  for (std::size_t i = 0; controls.is_array() && i < controls.size(); ++i) {
    const json& pc = controls[i];
    std::string id = id_of(pc).empty() ? fmt::format("{}#/PowerControl/{}", uri, i) : id_of(pc);
    Target t{EntityKind::chassis, entity_id(id), name_of(pc), id};
    if (emit_.status(pc, t).absent) continue;
    if (auto w = pc.find("PowerConsumedWatts"); w != pc.end()) {
      if (auto v = emit_.number(*w); v && *v > 0) {  // 0 here means "no reading" on many BMCs
        emit_.emit(t, "power", Unit::watts, *v);
        have_power = true;
        const json& limit = child(pc, "PowerLimit");
        if (auto l = limit.is_object() ? limit.find("LimitInWatts") : limit.end(); limit.is_object() && l != limit.end()) {
          if (auto lv = emit_.number(*l); lv && *lv > 0) {
            emit_.emit(t, "power_limit", Unit::watts, *lv);
            if (*v >= 0.98 * *lv)
              emit_.alarm(t, Severity::warning, "power_capping",
                          fmt::format("{} draws {} W against its power limit of {} W", chassis.entity, *v, *lv));
          }
        }
      }
    }
    if (auto cap = pc.find("PowerCapacityWatts"); cap != pc.end())
      if (auto v = emit_.number(*cap)) emit_.emit(t, "power_capacity", Unit::watts, *v);
    const json& m = child(pc, "PowerMetrics");
    if (m.is_object()) {
      if (auto avg = m.find("AverageConsumedWatts"); avg != m.end())
        if (auto v = emit_.number(*avg)) emit_.emit(t, "power_average", Unit::watts, *v);
    }
  }
  // Inspur puts the total under Oem.Public.TotalPower (idrac_exporter #173).
  const json& oem_total = child(child(child(*power, "Oem"), "Public"), "TotalPower");
  if (!have_power && !oem_total.is_null()) {
    if (auto v = emit_.number(oem_total)) {
      emit_.emit(chassis, "power", Unit::watts, *v, false, uri);
      emit_.snapshot().count_quirk("oem_power");
      have_power = true;
    }
  }
  const json& supplies = child(*power, "PowerSupplies");
  for (std::size_t i = 0; supplies.is_array() && i < supplies.size(); ++i) {
    const json& ps = supplies[i];
    std::string id = id_of(ps).empty() ? fmt::format("{}#/PowerSupplies/{}", uri, i) : id_of(ps);
    Target t{EntityKind::psu, entity_id(id), name_of(ps), id};
    auto st = emit_.status(ps, t);
    if (st.absent) continue;
    if (st.health && *st.health >= 1 && !st.standby && !emit_.has_alarm(t.entity))
      emit_.alarm(t, *st.health == 2 ? Severity::critical : Severity::warning, "psu_fault",
                  fmt::format("Power supply {} health is {}", t.name.empty() ? t.entity : t.name,
                              *st.health == 2 ? "Critical" : "Warning"));
    const json& huawei = child(child(ps, "Oem"), "Huawei");
    auto field = [&](const char* key, const char* quantity, Unit unit) {
      const json& own = child(ps, key);
      const json& oem = child(huawei, key);
      if (own.is_null() && oem.is_null()) return;
      if (own.is_null()) emit_.snapshot().count_quirk("oem_power");
      if (auto n = emit_.number(own.is_null() ? oem : own)) emit_.emit(t, quantity, unit, *n);
    };
    field("PowerInputWatts", "input_power", Unit::watts);
    field("PowerOutputWatts", "output_power", Unit::watts);
    if (!ps.contains("PowerOutputWatts")) field("LastPowerOutputWatts", "output_power", Unit::watts);
    field("LineInputVoltage", "input_voltage", Unit::volts);
    field("PowerCapacityWatts", "power_capacity", Unit::watts);
  }
  const json& volts = child(*power, "Voltages");
  for (std::size_t i = 0; volts.is_array() && i < volts.size(); ++i) {
    const json& v = volts[i];
    if (!v.is_object()) continue;
    std::string id = id_of(v).empty() ? fmt::format("{}#/Voltages/{}", uri, i) : id_of(v);
    Target t{EntityKind::sensor, entity_id(id), name_of(v), id};
    if (emit_.status(v, t).absent) continue;
    if (auto r = v.find("ReadingVolts"); r != v.end())
      if (auto n = emit_.number(*r)) emit_.emit(t, "voltage", Unit::volts, *n);
  }
  return have_power;
}

void Walker::thermal_deprecated(const std::string& uri, const Target& chassis) {
  auto thermal = get(uri);
  if (!thermal) return;
  const json& temps = child(*thermal, "Temperatures");
  for (std::size_t i = 0; temps.is_array() && i < temps.size(); ++i) {
    const json& s = temps[i];
    if (!s.is_object()) continue;
    std::string id = id_of(s).empty() ? fmt::format("{}#/Temperatures/{}", uri, i) : id_of(s);
    Target t{EntityKind::sensor, entity_id(id), name_of(s), id};
    if (emit_.status(s, t).absent) continue;
    auto r = s.find("ReadingCelsius");
    if (r == s.end()) continue;
    auto v = emit_.number(*r);
    if (!v) continue;
    auto idx = emit_.emit(t, "temperature", Unit::celsius, *v);
    auto limit = [&](const char* key, std::optional<double>& slot) {
      if (auto it = s.find(key); it != s.end()) {
        if (it->is_null()) emit_.snapshot().count_quirk("null_threshold");
        else slot = emit_.number(*it);
      }
    };
    Thresholds& l = emit_.snapshot().samples[idx].limits;
    limit("UpperThresholdNonCritical", l.upper_caution);
    limit("UpperThresholdCritical", l.upper_critical);
    limit("UpperThresholdFatal", l.upper_fatal);
    limit("LowerThresholdNonCritical", l.lower_caution);
    limit("LowerThresholdCritical", l.lower_critical);
  }
  const json& fans = child(*thermal, "Fans");
  for (std::size_t i = 0; fans.is_array() && i < fans.size(); ++i) {
    const json& f = fans[i];
    if (!f.is_object()) continue;
    std::string id = id_of(f).empty() ? fmt::format("{}#/Fans/{}", uri, i) : id_of(f);
    Target t{EntityKind::fan, entity_id(id), name_of(f), id};
    if (emit_.status(f, t).absent) continue;
    auto r = f.find("Reading");
    if (r == f.end()) continue;
    auto v = emit_.number(*r);
    if (!v) continue;
    std::string units = f.value("ReadingUnits", std::string("RPM"));
    if (units == "Percent") emit_.emit(t, "fan_speed", Unit::ratio, *v / 100);
    else emit_.emit(t, "fan_speed_rpm", Unit::rpm, *v);
  }
  (void)chassis;
}

void Walker::sensors(const std::string& uri) {
  for (const json& s : members(uri)) emit_.sensor(s);
}

void Walker::power_equipment(const std::string& uri) {
  auto pe = get(uri);
  if (!pe) return;
  for (const char* coll : {"PowerShelves", "RackPDUs", "FloorPDUs", "TransferSwitches", "Switchgear", "ElectricalBuses"}) {
    for (const json& d : members(link_of(*pe, coll))) distribution(d);
  }
}

void Walker::distribution(const json& d) {
  std::string uri = id_of(d);
  std::string type = d.value("EquipmentType", std::string());
  EntityKind kind = EntityKind::switchgear;
  if (type == "RackPDU" || type == "FloorPDU") kind = EntityKind::pdu;
  else if (type == "PowerShelf" || type == "BatteryShelf") kind = EntityKind::power_shelf;
  else if (type == "Bus") kind = EntityKind::bus;
  Target t{kind, entity_id(uri), name_of(d), uri};
  if (emit_.status(d, t).absent) return;
  if (kind == EntityKind::power_shelf) {
    const json& chassis = child(child(d, "Links"), "Chassis");
    for (std::size_t i = 0; chassis.is_array() && i < chassis.size(); ++i) shelf_chassis_.insert(id_of(chassis[i]));
  }
  if (auto va = d.find("PowerCapacityVA"); va != d.end())
    if (auto v = emit_.number(*va)) emit_.emit(t, "power_capacity_apparent", Unit::volt_amperes, *v);
  if (auto m = link_of(d, "Metrics"); !m.empty()) {
    if (auto metrics = get(m)) {
      power_excerpt(*metrics, "PowerWatts", t, "power");
      emit_.excerpt(*metrics, "EnergykWh", t, "energy", Unit::joules, 3.6e6, true);
      emit_.excerpt(*metrics, "TemperatureCelsius", t, "temperature", Unit::celsius);
      emit_.excerpt(*metrics, "HumidityPercent", t, "humidity", Unit::ratio, 0.01);
      emit_.excerpt(*metrics, "PowerLoadPercent", t, "power_load", Unit::ratio, 0.01);
    }
  }
  for (const char* coll : {"Mains", "Feeders", "Branches", "Subfeeds"})
    for (const json& c : members(link_of(d, coll))) circuit(c, EntityKind::circuit);
  for (const json& o : members(link_of(d, "Outlets"))) circuit(o, EntityKind::outlet);
  // Deprecated in PowerDistribution, still used by shelves in the field.
  for (const json& p : members(link_of(d, "PowerSupplies"))) power_supply(p, kind == EntityKind::power_shelf);
}

void Walker::circuit(const json& c, EntityKind kind) {
  std::string uri = id_of(c);
  Target t{kind, entity_id(uri), name_of(c), uri};
  if (emit_.status(c, t).absent) return;
  std::string breaker = c.value("BreakerState", std::string());
  if (breaker == "Tripped")
    emit_.alarm(t, Severity::critical, "breaker_tripped", fmt::format("{} breaker tripped", t.name.empty() ? t.entity : t.name));
  if (auto rc = c.find("RatedCurrentAmps"); rc != c.end())
    if (auto v = emit_.number(*rc)) emit_.emit(t, "rated_current", Unit::amperes, *v);
  // DC nominal voltages (DC48V, DCNeg48V, DC380V, DC800V, ...) identify the HVDC stages.
  std::string nominal = c.value("NominalVoltage", std::string());
  if (nominal.rfind("DC", 0) == 0) {
    bool negative = nominal.rfind("DCNeg", 0) == 0;
    std::string digits = nominal.substr(negative ? 5 : 2);
    for (auto& ch : digits) if (ch == '_') ch = '.';
    double v = std::strtod(digits.c_str(), nullptr);
    if (v > 0) emit_.emit(t, "nominal_voltage", Unit::volts, negative ? -v : v);
  }
  bool have_power = power_excerpt(c, "PowerWatts", t, "power");
  emit_.excerpt(c, "EnergykWh", t, "energy", Unit::joules, 3.6e6, true);
  emit_.excerpt(c, "Voltage", t, "voltage", Unit::volts);
  emit_.excerpt(c, "CurrentAmps", t, "current", Unit::amperes);
  emit_.excerpt(c, "FrequencyHz", t, "frequency", Unit::hertz);
  emit_.excerpt(c, "PowerLoadPercent", t, "power_load", Unit::ratio, 0.01);
  double phase_sum = 0;
  bool have_phase_power = false;
  auto phases = [&](const char* property, const char* quantity, Unit unit) {
    const json& pp = child(c, property);
    if (!pp.is_object()) return;
    for (const auto& [line, ex] : pp.items()) {
      if (!ex.is_object()) continue;
      Target pt{kind, t.entity + "/" + line, t.name.empty() ? line : t.name + " " + line, uri};
      json wrapper = {{"v", ex}};
      auto idx = emit_.excerpt(wrapper, "v", pt, quantity, unit);
      if (idx && unit == Unit::watts) {
        phase_sum += emit_.snapshot().samples[*idx].value;
        have_phase_power = true;
      }
    }
  };
  phases("PolyPhaseVoltage", "phase_voltage", Unit::volts);
  phases("PolyPhaseCurrentAmps", "phase_current", Unit::amperes);
  phases("PolyPhasePowerWatts", "phase_power", Unit::watts);
  if (!have_power && have_phase_power) emit_.emit(t, "power", Unit::watts, phase_sum);
}

}  // namespace astral::facility::detail
