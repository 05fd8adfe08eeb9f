// Plant faults: the site the job runs on (racks of two hosts, a CDU per two racks on one cooling
// loop, a power shelf per rack on two feeds, a rack manager per rack), the Redfish events its
// equipment pushes, and what the hosts and the job log while the plant is failing.
#include "sim_facility.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "astral/facility/events.hpp"
#include "astral/facility/eventservice.hpp"
#include "sim_job.hpp"

namespace astral::monitor::sim {

namespace {

// Racks of two hosts; a job of fewer than four hosts gets a rack per host, so that a rack lost
// to a leak leaves survivors to report it.
constexpr int kRacksPerCdu = 2;
int hosts_per_rack(const World& w) {
  int job = 0;
  for (const Host& h : w.hosts) job += h.job;
  return job >= 4 ? 2 : 1;
}

std::string rack_id(int rack) { return "rack-" + std::to_string(41 + rack); }
std::string cdu_source(int cdu) { return "cdu" + std::to_string(cdu + 1) + "-bmc"; }
std::string shelf_source(int rack) { return "shelf" + std::to_string(41 + rack) + "-bmc"; }
std::string rack_manager(int rack) { return "rackmgr" + std::to_string(41 + rack); }

facility::SiteLayout build_site(const World& w) {
  facility::SiteLayout site;
  const int racks = (int(w.hosts.size()) + hosts_per_rack(w) - 1) / hosts_per_rack(w);
  site.components.push_back({"loop-a", "cooling_loop", "bms", "ThermalEquipment/CoolingLoops/A", {}, {}});
  site.components.push_back({"feed-a", "feed", "", "", {}, {}});
  site.components.push_back({"feed-b", "feed", "", "", {}, {}});
  for (int c = 0; c < (racks + kRacksPerCdu - 1) / kRacksPerCdu; ++c)
    site.components.push_back({"cdu-" + std::to_string(c + 1), "cdu", cdu_source(c), "ThermalEquipment/CDUs/1", {"loop-a"}, {}});
  for (int r = 0; r < racks; ++r) {
    site.components.push_back({"shelf-" + std::to_string(41 + r), "power_shelf", shelf_source(r),
                               "PowerEquipment/PowerShelves/1", {r % 2 ? "feed-b" : "feed-a"}, {}});
    facility::SiteRack rack;
    rack.id = rack_id(r);
    for (int k = r * hosts_per_rack(w); k < std::min<int>((r + 1) * hosts_per_rack(w), int(w.hosts.size())); ++k)
      rack.hosts.push_back(w.hosts[size_t(k)].name);
    rack.cooled_by = {"cdu-" + std::to_string(r / kRacksPerCdu + 1)};
    rack.powered_by = {"shelf-" + std::to_string(41 + r)};
    rack.source = rack_manager(r);
    rack.entity = "Chassis/Rack" + std::to_string(41 + r);
    site.racks.push_back(std::move(rack));
  }
  return site;
}

facility::Clock::time_point wall(int64_t us) {
  return facility::Clock::time_point(std::chrono::duration_cast<facility::Clock::duration>(std::chrono::microseconds(us)));
}

std::string rfc3339(int64_t us) {
  Civil c = to_civil(us);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year, c.month, c.day, c.hour, c.minute, c.second);
  return buf;
}

// One Redfish Event payload (DSP0266 Event.v1_7) as the service pushes it, and the alarm the
// facility reader makes of it, written as the reader writes its events file.
void plant_event(World& w, PlantOutcome& out, const facility::SiteLayout& site, const std::string& source, int64_t t,
                 const std::string& message_id, const std::string& severity, const std::string& message,
                 const std::string& origin) {
  const std::string id = std::to_string(w.pick(100000, 999999));
  nlohmann::json payload = {
      {"@odata.type", "#Event.v1_7_0.Event"},
      {"Id", id},
      {"Name", "Event Array"},
      {"Events",
       {{{"EventId", "ev-" + id},
         {"EventTimestamp", rfc3339(t)},
         {"MessageId", message_id},
         {"MessageSeverity", severity},
         {"Message", message},
         {"OriginOfCondition", {{"@odata.id", origin}}}}}}};
  const std::string text = payload.dump();
  out.redfish_events[source].push_back(text);
  for (const facility::Alarm& a : facility::parse_redfish_event(text, source).alarms)
    w.raw_line("facility/" + source + ".events.jsonl", t, facility::alarm_to_event(a, &site).dump());
}

// NVML's alarms on a host, as `astral facility` writes them there (layer astral).
void nvml_alarms(World& w, const facility::SiteLayout& site, int host, int64_t t, const std::string& type,
                 facility::Severity sev, const std::string& cause, uint64_t reasons) {
  const Host& h = w.hosts[size_t(host)];
  const int gpus = int(w.pick(2, int64_t(h.gpu_bdf.size())));
  for (int g = 0; g < gpus; ++g) {
    char uuid[64], msg[160];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-%04x-4b8a-9e2d-7f6b1c0a55e1", unsigned(std::hash<std::string>{}(h.name) & 0xffffffff), g);
    std::snprintf(msg, sizeof msg, "GPU %d NVIDIA H100 80GB HBM3 clocks held down: %s (reasons 0x%llx)", g, cause.c_str(),
                  static_cast<unsigned long long>(reasons));
    facility::Alarm a{wall(t + h.skew_us + w.pick(0, 30'000'000)), h.name, facility::EntityKind::gpu, uuid, sev, type, msg,
                      "nvml:" + std::to_string(g), "nvml"};
    w.raw_line(h.name + "/astral-facility.events.jsonl", t, facility::alarm_to_event(a, &site).dump(), h.skew_us);
  }
}

// `nvidia-smi -q` on the host while it throttles (driver 550: "Clocks Event Reasons").
void smi_dump(World& w, int host, int64_t t, int hot_gpu, bool thermal) {
  const Host& h = w.hosts[size_t(host)];
  Civil c = to_civil(t + h.skew_us + w.tz_s * 1000000);
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%s %s %2d %02d:%02d:%02d %d", kDays[c.weekday], kMonths[c.month - 1], c.day, c.hour,
                c.minute, c.second, c.year);
  const std::string path = h.name + "/nvidia-smi-q.txt";
  auto line = [&](const std::string& s) { w.raw_line(path, t, s, h.skew_us); };
  auto field = [&](int indent, const std::string& k, const std::string& v) {
    std::string s(size_t(indent), ' ');
    s += k;
    s.resize(std::max<size_t>(s.size() + 1, 42), ' ');
    line(s + ": " + v);
  };
  line("");
  line("==============NVSMI LOG==============");
  line("");
  field(0, "Timestamp", stamp);
  field(0, "Driver Version", "550.90.07");
  field(0, "CUDA Version", "12.4");
  line("");
  field(0, "Attached GPUs", std::to_string(h.gpu_bdf.size()));
  for (size_t g = 0; g < h.gpu_bdf.size(); ++g) {
    const bool hot = int(g) == hot_gpu;
    line("GPU 0000" + h.gpu_bdf[g]);
    field(4, "Product Name", "NVIDIA H100 80GB HBM3");
    line("    Clocks Event Reasons");
    auto active = [](bool on) { return std::string(on ? "Active" : "Not Active"); };
    field(8, "Idle", active(false));
    field(8, "Applications Clocks Setting", active(false));
    field(8, "SW Power Cap", active(!thermal));
    field(8, "HW Slowdown", active(hot));
    field(12, "HW Thermal Slowdown", active(hot && thermal));
    field(12, "HW Power Brake Slowdown", active(hot && !thermal));
    field(8, "Sync Boost", active(false));
    field(8, "SW Thermal Slowdown", active(thermal));
    field(8, "Display Clock Setting", active(false));
    line("    Temperature");
    field(8, "GPU Current Temp", std::to_string(thermal ? (hot ? 91 : 86) : 62) + " C");
    field(8, "GPU Shutdown Temp", "92 C");
    field(8, "GPU Slowdown Temp", "89 C");
  }
}

// The job slows as its GPUs throttle: step times creep, one rank lags in every collective.
// Without a timeout at the end, the timing records are what shows the straggler.
void job_slows(World& w, const Rank& v, int64_t from, int64_t to, double iter_s, bool only_slows) {
  const int64_t span = std::max<int64_t>(to - from, 3);
  for (int k = 0; k < 3; ++k)
    training_output(w, from + span * k / 3, from + span * (k + 1) / 3, iter_s * (1.15 + 0.2 * k));
  if (only_slows || w.chance(0.5)) inspector(w, from + span / 2, int(w.pick(20, 40)), w.uniform(8, 40), v.rank, w.uniform(0.5, 1.5));
}

// The hosts a plant part serves, of the victim's rack or its CDU.
std::vector<int> hosts_of_racks(const World& w, int first_rack, int racks) {
  std::vector<int> out;
  for (int k = first_rack * hosts_per_rack(w); k < std::min<int>((first_rack + racks) * hosts_per_rack(w), int(w.hosts.size())); ++k)
    out.push_back(k);
  return out;
}

void cpu_thermal_lines(World& w, int host, int64_t t) {
  for (int cpu : {int(w.pick(0, 47)), int(w.pick(48, 95))})
    w.kernel_line(host, t + w.pick(0, 20'000'000),
                  "CPU" + std::to_string(cpu) + ": Package temperature above threshold, cpu clock throttled (total events = " +
                      std::to_string(w.pick(1, 400)) + ")");
}


// The CDU's Redfish service in the state it is in after the fault, as a DMTF mockup tree
// ("/redfish/v1/..." -> resource): `astral facility mockup --dir` serves it and the facility
// reader, polling it, raises the same alarm the pushed event did.
std::map<std::string, std::string> cdu_mockup(int cdu, int failed_pump, bool warm_supply, int64_t t) {
  using nlohmann::json;
  const std::string root = "/redfish/v1", base = root + "/ThermalEquipment/CDUs/1";
  auto link = [](const std::string& id) { return json{{"@odata.id", id}}; };
  auto collection = [&](const std::string& id, const std::string& name, std::vector<std::string> members) {
    json m = json::array();
    for (const auto& x : members) m.push_back(link(x));
    return json{{"@odata.type", "#Collection"}, {"Name", name}, {"Members@odata.count", m.size()}, {"Members", m}, {"@odata.id", id}};
  };
  std::map<std::string, json> r;
  r[root] = {{"@odata.type", "#ServiceRoot.v1_15_0.ServiceRoot"}, {"Id", "RootService"},
             {"Name", "CDU " + std::to_string(cdu + 1)}, {"RedfishVersion", "1.15.0"},
             {"ThermalEquipment", link(root + "/ThermalEquipment")}, {"@odata.id", root + "/"}};
  r[root + "/ThermalEquipment"] = {{"@odata.type", "#ThermalEquipment.v1_2_0.ThermalEquipment"}, {"Id", "ThermalEquipment"},
                                   {"Name", "Thermal equipment"}, {"CDUs", link(root + "/ThermalEquipment/CDUs")},
                                   {"@odata.id", root + "/ThermalEquipment"}};
  r[root + "/ThermalEquipment/CDUs"] = collection(root + "/ThermalEquipment/CDUs", "CDUs", {base});
  const std::string origin = warm_supply ? base + "/PrimaryCoolantConnectors/1" : base + "/Pumps/" + std::to_string(failed_pump);
  json condition = {{"MessageId", warm_supply ? "Environmental.1.0.TemperatureAboveUpperCriticalThreshold" : "Environmental.1.0.PumpFailed"},
                    {"Message", warm_supply ? "Facility supply temperature 38.5 C is above the upper critical threshold of 35 C."
                                            : "Pump " + std::to_string(failed_pump) + " has failed."},
                    {"Severity", "Critical"}, {"Timestamp", rfc3339(t)}, {"OriginOfCondition", link(origin)}};
  r[base] = {{"@odata.type", "#CoolingUnit.v1_5_0.CoolingUnit"}, {"Id", "1"}, {"EquipmentType", "CDU"},
             {"Name", "CDU " + std::to_string(cdu + 1)}, {"CoolingCapacityWatts", 300000},
             {"Status", {{"State", "Enabled"}, {"Health", "Critical"}, {"Conditions", json::array({condition})}}},
             {"Pumps", link(base + "/Pumps")}, {"PrimaryCoolantConnectors", link(base + "/PrimaryCoolantConnectors")},
             {"@odata.id", base}};
  r[base + "/Pumps"] = collection(base + "/Pumps", "Pumps", {base + "/Pumps/1", base + "/Pumps/2"});
  for (int p = 1; p <= 2; ++p) {
    const bool failed = !warm_supply && p == failed_pump;
    r[base + "/Pumps/" + std::to_string(p)] = {
        {"@odata.type", "#Pump.v1_2_0.Pump"}, {"Id", std::to_string(p)}, {"Name", "CDU pump " + std::to_string(p)},
        {"PumpType", "Liquid"}, {"Status", {{"State", "Enabled"}, {"Health", failed ? "Critical" : "OK"}}},
        {"PumpSpeedPercent", {{"Reading", failed ? 0 : 96}, {"SpeedRPM", failed ? 0 : 3900}}},
        {"@odata.id", base + "/Pumps/" + std::to_string(p)}};
  }
  r[base + "/PrimaryCoolantConnectors"] = collection(base + "/PrimaryCoolantConnectors", "Primary coolant connectors",
                                                     {base + "/PrimaryCoolantConnectors/1"});
  r[base + "/PrimaryCoolantConnectors/1"] = {
      {"@odata.type", "#CoolantConnector.v1_3_0.CoolantConnector"}, {"Id", "1"}, {"Name", "Facility supply"},
      {"CoolantConnectorType", "Pair"}, {"Status", {{"State", "Enabled"}, {"Health", warm_supply ? "Critical" : "OK"}}},
      {"SupplyTemperatureCelsius", {{"Reading", warm_supply ? 38.5 : 30.2}}},
      {"FlowLitersPerMinute", {{"Reading", warm_supply ? 410 : 180}}},
      {"@odata.id", base + "/PrimaryCoolantConnectors/1"}};
  std::map<std::string, std::string> out;
  for (auto& [path, resource] : r) out[path] = resource.dump(1);
  return out;
}

}  // namespace

int64_t plant_lead_us(World& w) { return w.pick(4, 10) * 60'000'000; }

PlantOutcome plant_fault(World& w, FaultKind kind, const Rank& v, int64_t t_fault, int64_t lead_us, double iter_s) {
  const facility::SiteLayout site = build_site(w);
  w.raw_line("site.json", 0, facility::site_layout_to_json(site));
  PlantOutcome out;
  const int64_t t_plant = t_fault - lead_us;
  out.job_normal_until = t_plant;
  const int rack = v.host / hosts_per_rack(w);
  if (kind == FaultKind::cooling_loss) {
    const int cdu = rack / kRacksPerCdu;
    const std::string src = cdu_source(cdu), base = "/redfish/v1/ThermalEquipment/CDUs/1";
    const bool warm_supply = w.chance(0.3);  // the facility water warms instead of a pump failing
    if (warm_supply) {
      const std::string origin = base + "/PrimaryCoolantConnectors/1";
      plant_event(w, out, site, src, t_plant, "Environmental.1.0.TemperatureAboveUpperCriticalThreshold", "Critical",
                  "Facility supply temperature 38.5 C is above the upper critical threshold of 35 C.", origin);
      out.component = {ComponentKind::cdu, src, "ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1", "", "", -1};
      out.description = "facility water to CDU cdu-" + std::to_string(cdu + 1) + " warmed (supply over its critical limit)";
    } else {
      const int pump = int(w.pick(1, 2));
      const std::string origin = base + "/Pumps/" + std::to_string(pump);
      plant_event(w, out, site, src, t_plant, "Environmental.1.0.PumpFailed", "Critical",
                  "Pump " + std::to_string(pump) + " has failed.", origin);
      if (w.chance(0.7))
        plant_event(w, out, site, src, t_plant + w.pick(10'000'000, 60'000'000), "Environmental.1.0.FlowRateBelowLowerCriticalThreshold",
                    "Critical", "Secondary loop flow 61 L/min is below the lower critical threshold of 90 L/min.",
                    base + "/SecondaryCoolantConnectors/1");
      out.component = {ComponentKind::pump, src, "ThermalEquipment/CDUs/1/Pumps/" + std::to_string(pump), "", "", -1};
      out.description = "pump " + std::to_string(pump) + " of CDU cdu-" + std::to_string(cdu + 1) + " failed";
    }
    for (int h : hosts_of_racks(w, cdu * kRacksPerCdu, kRacksPerCdu)) {
      if (w.chance(0.85))
        nvml_alarms(w, site, h, t_plant + w.pick(60'000'000, 180'000'000), "gpu_thermal_throttling", facility::Severity::error,
                    "hardware thermal slowdown", 0x68);
      if (w.chance(0.5)) cpu_thermal_lines(w, h, t_plant + w.pick(90'000'000, 200'000'000));
    }
    if (w.chance(0.6)) smi_dump(w, v.host, t_fault - w.pick(20'000'000, 120'000'000), v.local, true);
    out.mockups[src] = cdu_mockup(cdu, warm_supply ? 0 : std::stoi(out.component.device.substr(out.component.device.rfind('/') + 1)),
                                  warm_supply, t_plant);
  } else if (kind == FaultKind::power_capping) {
    const std::string src = shelf_source(rack), base = "/redfish/v1/PowerEquipment/PowerShelves/1";
    const int psu = int(w.pick(1, 6));
    plant_event(w, out, site, src, t_plant, "Power.1.0.PowerSupplyFailed", "Critical",
                "Power supply " + std::to_string(psu) + " has failed.", base + "/PowerSupplies/" + std::to_string(psu));
    if (w.chance(0.7))
      plant_event(w, out, site, src, t_plant + w.pick(2'000'000, 20'000'000), "Power.1.0.PowerLimitApplied", "Warning",
                  "Rack power limited to 96 kW after the loss of redundancy.", base);
    for (int h : hosts_of_racks(w, rack, 1)) {
      const bool brake = w.chance(0.5);
      if (w.chance(0.85))
        nvml_alarms(w, site, h, t_plant + w.pick(5'000'000, 90'000'000), brake ? "power_brake" : "power_capping",
                    brake ? facility::Severity::error : facility::Severity::warning,
                    brake ? "hardware power brake asserted (external power-brake signal)" : "clocks capped by the power limit",
                    brake ? 0x88 : 0x4);
    }
    if (w.chance(0.6)) smi_dump(w, v.host, t_fault - w.pick(20'000'000, 120'000'000), v.local, false);
    out.component = {ComponentKind::rectifier, src, "PowerEquipment/PowerShelves/1/PowerSupplies/" + std::to_string(psu), "", "", -1};
    out.description = "rectifier " + std::to_string(psu) + " of power shelf shelf-" + std::to_string(41 + rack) +
                      " failed and the rack was capped";
  } else {  // leak: the rack manager sees it in a tray and shuts the rack down
    const int tray = int(w.pick(1, 8));
    const std::string src = rack_manager(rack), entity = "Chassis/Rack" + std::to_string(41 + rack) +
                                                         "/ThermalSubsystem/LeakDetection/LeakDetectors/Tray" + std::to_string(tray);
    plant_event(w, out, site, src, t_fault, "Environmental.1.0.LeakDetectedCritical", "Critical",
                "Leak detected at tray " + std::to_string(tray) + "; rack power is being removed.", "/redfish/v1/" + entity);
    for (int h : hosts_of_racks(w, rack, 1)) {
      const int64_t t_off = t_fault + w.pick(3'000'000, 15'000'000);
      if (w.chance(0.7)) w.sel_line(h, t_off, "Power Unit #0x01", "Power off/down");
      if (w.chance(0.4)) w.kernel_line(h, t_off - 1'000'000, "reboot: Power down");
      for (int r : w.hosts[size_t(h)].ranks) out.dead.insert(r);
    }
    for (int r : out.dead)
      for (int p : network_peers(w, w.ranks[size_t(r)]))
        if (!out.dead.count(p))
          completion_error(w, w.ranks[size_t(p)], t_fault + w.pick(18'000'000, 32'000'000),
                           w.hosts[size_t(w.ranks[size_t(r)].host)].oob_ip, 12);
    out.component = {ComponentKind::rack, src, entity, "", "", -1};
    out.description = "coolant leak in " + rack_id(rack) + " (tray " + std::to_string(tray) + "); the rack was shut down";
    out.hangs = true;
    out.job_normal_until = t_fault;
    return out;
  }
  out.hangs = w.chance(0.6);
  job_slows(w, v, t_plant, t_fault, iter_s, !out.hangs);
  if (out.hangs) out.late.insert(v.rank);
  return out;
}

}  // namespace astral::monitor::sim
