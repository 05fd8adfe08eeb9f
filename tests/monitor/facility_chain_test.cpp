// From the plant to the collective (issue 15): the throttling readers, facility events placed in
// the site layout, and the diagnosis that names a plant part only when the job felt it.
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/facility/events.hpp"
#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/metrics.hpp"
#include "astral/monitor/simulate.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;
namespace fs = std::filesystem;

namespace {

const char* kSmiDump = R"(
==============NVSMI LOG==============

Timestamp                                 : Sun Dec  6 12:51:41 2026
Driver Version                            : 550.90.07

Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Not Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Active
    Temperature
        GPU Current Temp                  : 91 C
        GPU Slowdown Temp                 : 89 C
GPU 00000000:2A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Clocks Event Reasons
        Idle                              : Active
        SW Power Cap                      : Not Active
        HW Slowdown                       : Not Active
    Temperature
        GPU Current Temp                  : 41 C
)";

Diagnosis diagnose_folder(const std::string& dir, const std::string& site = "") {
  BundleOptions o;
  o.jobs = 1;
  o.site_path = site;
  Bundle b = load_bundle(dir, o);
  return diagnose(b);
}

GroundTruth simulated(const TempDir& dir, const std::string& name, FaultKind kind, uint64_t seed) {
  SimulateOptions o;
  o.fault = kind;
  o.ranks = 24;
  o.seed = seed;
  return simulate(make_rail_fabric(24, 8, 8, 2), o, dir / name);
}

// A plant alarm as the facility reader writes it, placed by the layout in `site_json`.
std::string plant_line(const std::string& site_json, const std::string& source, const std::string& entity,
                       const std::string& type, int64_t time_us) {
  auto site = astral::facility::parse_site_layout(site_json, "site.json");
  astral::facility::Alarm a;
  a.time = astral::facility::Clock::time_point(std::chrono::microseconds(time_us));
  a.host = source;
  a.kind = astral::facility::EntityKind::pump;
  a.entity = entity;
  a.severity = astral::facility::Severity::critical;
  a.type = type;
  a.message = "Pump 2 has failed.";
  a.source = "redfish-event";
  return astral::facility::alarm_to_event(a, &site).dump() + "\n";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("nvidia-smi -q: a GPU held down by HW thermal slowdown is one event with its cause, an idle one none") {
  ParseResult r = parse_text(kSmiDump, "node07");
  REQUIRE(r.stats.kind == FileKind::nvidia_smi);
  auto ev = kind_of(r, "gpu_clock_event");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0]->component.device == "0000:18:00");  // the monitor's canonical PCI form
  CHECK(ev[0]->attr("cause") == "thermal");
  CHECK(ev[0]->attr("reasons") == "hw_slowdown,hw_thermal_slowdown,sw_thermal_slowdown");
  CHECK(ev[0]->attr("temperature_c") == "91");
  CHECK(ev[0]->severity == Severity::error);
  CHECK(format_time(ev[0]->time_us) == "2026-12-06T12:51:41.000000Z");

  // An older driver's wording, and a power brake: the cause is power, not thermal.
  std::string old = kSmiDump;
  auto replace = [&](const std::string& from, const std::string& to) { old.replace(old.find(from), from.size(), to); };
  replace("Clocks Event Reasons", "Clocks Throttle Reasons");
  replace("HW Thermal Slowdown           : Active", "HW Thermal Slowdown           : Not Active");
  replace("HW Power Brake Slowdown       : Not Active", "HW Power Brake Slowdown       : Active");
  replace("SW Thermal Slowdown               : Active", "SW Thermal Slowdown               : Not Active");
  ParseResult o = parse_text(old, "node07");
  auto brake = kind_of(o, "gpu_clock_event");
  REQUIRE(brake.size() == 1);
  CHECK(brake[0]->attr("cause") == "power");
  CHECK(brake[0]->attr("reasons") == "hw_slowdown,hw_power_brake");
}

TEST_CASE("Kernel thermal interrupts and the trainer's step time are read") {
  ParseResult k = parse_text(
      "Dec  6 12:40:01 node07 kernel: [ 8812.113] CPU12: Package temperature above threshold, cpu clock throttled (total events = 31)\n"
      "Dec  6 12:41:09 node07 kernel: [ 8880.001] thermal thermal_zone3: critical temperature reached (105 C), shutting down\n",
      "node07");
  CHECK(kind_of(k, "cpu_thermal_throttle").size() == 1);
  CHECK(kind_of(k, "thermal_shutdown").size() == 1);
  ParseResult p = parse_text(
      "[step 1200] loss=2.4950 lr=3.0e-04 grad_norm=0.784 time/iter=1.87s\n"
      " iteration      300/  5000 | consumed samples: 38400 | elapsed time per iteration (ms): 2310.5 | learning rate: 1.5E-04\n"
      "[step 1201] time/iter=fast\n",
      "node07");
  auto steps = kind_of(p, "step_time");
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]->attr("seconds") == "1.87");
  CHECK(steps[1]->attr("seconds") == "2.3105");
  CHECK(p.stats.damaged == 1);  // "time/iter=fast" is no number
}

TEST_CASE("A facility event keeps where the site layout put it") {
  const std::string site = R"({"racks": [{"id": "r41", "hosts": ["node07", "node08"], "cooled_by": ["cdu-1"]}],
                               "components": [{"id": "cdu-1", "kind": "cdu", "source": "cdu1", "entity": "ThermalEquipment/CDUs/1"}]})";
  ParseResult r = parse_text(plant_line(site, "cdu1", "ThermalEquipment/CDUs/1/Pumps/2", "pump_failed", 1'700'000'000'000'000),
                             "facility");
  REQUIRE(r.events.size() == 1);
  const Event& e = r.events[0];
  CHECK(e.layer == Layer::facility);
  CHECK(e.component.kind == ComponentKind::pump);
  CHECK(e.attr("site") == "cdu-1");
  CHECK(e.attr("site_kind") == "cdu");
  CHECK(e.attr("racks") == "r41");
  CHECK(e.attr("hosts") == "node07,node08");
}

TEST_CASE("Plant faults end to end: the part that failed, with evidence from plant, GPUs and job") {
  TempDir dir;
  for (FaultKind kind : {FaultKind::cooling_loss, FaultKind::power_capping, FaultKind::leak}) {
    const std::string name(to_string(kind));
    GroundTruth truth = simulated(dir, name, kind, 31);
    CHECK(fs::exists(dir / (name + "/site.json")));
    CHECK(fs::exists(dir / (name + ".plant")));  // the Redfish Event payloads the plant pushed
    Diagnosis d = diagnose_folder(dir / name);
    INFO(name << ": " << truth.description);
    REQUIRE(!d.root_causes.empty());
    const RootCause& top = d.root_causes[0];
    CHECK(matches(top, truth));
    CHECK(top.fault == std::string(name == "cooling-loss" ? "cooling_loss" : name == "power-capping" ? "power_capping" : "leak"));
    std::set<Layer> layers;
    for (const Evidence& e : top.evidence) layers.insert(e.layer);
    CHECK(layers.count(Layer::facility) + layers.count(Layer::bmc) >= 1);  // the plant (a rack manager is a BMC)
    CHECK((layers.count(Layer::pytorch) || layers.count(Layer::nccl)));    // the job
    if (kind != FaultKind::leak) CHECK((layers.count(Layer::astral) || layers.count(Layer::kernel)));  // the GPUs
    CHECK(!top.blast.ranks.empty());
  }
}

TEST_CASE("The same plant fault with the bundle's layout removed: the events' own site keys still place it") {
  TempDir dir;
  GroundTruth truth = simulated(dir, "b", FaultKind::cooling_loss, 44);
  const std::string site = read_file(dir / "b/site.json");
  fs::remove(dir / "b/site.json");
  Diagnosis d = diagnose_folder(dir / "b");
  REQUIRE(!d.root_causes.empty());
  CHECK(matches(d.root_causes[0], truth));
  // --site given outside the bundle works the same.
  dir.write("site-outside.json", site);
  Diagnosis with = diagnose_folder(dir / "b", dir / "site-outside.json");
  REQUIRE(!with.root_causes.empty());
  CHECK(matches(with.root_causes[0], truth));
}

TEST_CASE("A plant fault that no job felt is a facility alarm, not the job's root cause") {
  TempDir dir;
  // A job that failed for its own reason (a GPU fell off the bus); the pump that failed meanwhile
  // cools a rack with no host of the job.
  GroundTruth truth = simulated(dir, "xid", FaultKind::gpu_xid79, 52);
  const std::string site = R"({"racks": [{"id": "r90", "hosts": ["elsewhere01"], "cooled_by": ["cdu-9"]}],
                               "components": [{"id": "cdu-9", "kind": "cdu", "source": "cdu9", "entity": "ThermalEquipment/CDUs/1"}]})";
  dir.write("xid/site.json", site);
  dir.write("xid/facility/cdu9.events.jsonl",
            plant_line(site, "cdu9", "ThermalEquipment/CDUs/1/Pumps/2", "pump_failed", truth.fault_time_us - 60'000'000));
  Diagnosis d = diagnose_folder(dir / "xid");
  REQUIRE(!d.root_causes.empty());
  CHECK(matches(d.root_causes[0], truth));
  bool listed = false;
  for (const RootCause& rc : d.root_causes) CHECK(rc.fault != "cooling_loss");
  for (const RootCause& f : d.findings) listed = listed || (f.fault == "cooling_loss" && f.component.kind == ComponentKind::pump);
  CHECK(listed);

  // A healthy run under a failed pump: reported, never a root cause.
  simulated(dir, "ok", FaultKind::none, 53);
  dir.write("ok/facility/cdu9.events.jsonl",
            plant_line(site, "cdu9", "ThermalEquipment/CDUs/1/Pumps/2", "pump_failed", truth.fault_time_us));
  Diagnosis healthy = diagnose_folder(dir / "ok");
  CHECK(healthy.root_causes.empty());
}

TEST_CASE("A throttled GPU with a healthy plant is the GPU's own fault") {
  TempDir dir;
  GroundTruth truth = simulated(dir, "s", FaultKind::gpu_straggler, 61);
  REQUIRE(truth.component.kind == ComponentKind::gpu);
  // The straggler's host says its GPUs run hot; no plant alarm anywhere.
  std::string dump = kSmiDump;
  dump.replace(dump.find("00000000:18:00.0"), 16, "0000" + truth.component.device + ".0");  // 0000:ab:00 -> 00000000:ab:00.0
  // Without its Timestamp line (a dump pasted into a ticket): undated, still evidence.
  dump.erase(dump.find("Timestamp"), dump.find('\n', dump.find("Timestamp")) - dump.find("Timestamp") + 1);
  dir.write("s/" + truth.component.host + "/nvidia-smi-q.txt", dump);
  Diagnosis d = diagnose_folder(dir / "s");
  REQUIRE(!d.root_causes.empty());
  CHECK(matches(d.root_causes[0], truth));
  CHECK(d.root_causes[0].fault == "gpu_thermal");
}

TEST_CASE("A broken site layout in a bundle is a warning, a broken --site an error naming it") {
  TempDir dir;
  simulated(dir, "c", FaultKind::cooling_loss, 71);
  dir.write("c/site.json", R"({"racks": [{"id": "r1", "hosts": ["a"], "cooled_by": ["nowhere"]}]})");
  std::vector<std::string> progress;
  BundleOptions o;
  o.jobs = 1;
  o.progress = [&](std::string_view line) { progress.emplace_back(line); };
  Bundle b = load_bundle(dir / "c", o);
  CHECK(b.site.empty());
  bool warned = false;
  for (const auto& p : progress) warned = warned || (p.find("site.json") != std::string::npos && p.find("nowhere") != std::string::npos);
  CHECK(warned);
  BundleOptions bad;
  bad.site_path = dir / "c/site.json";
  try {
    load_bundle(dir / "c", bad);
    FAIL("a broken --site must not load");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("site.json") != std::string::npos);
  }
}

TEST_CASE("dcgm-exporter's clock-event bits alone carry the GPU layer of a power fault") {
  TempDir dir;
  GroundTruth truth = simulated(dir, "p", FaultKind::power_capping, 83);
  // Take away NVML alarms and nvidia-smi dumps: the hosts' throttling is known only from dcgm.
  for (const auto& f : fs::recursive_directory_iterator(dir / "p"))
    if (f.path().filename() == "astral-facility.events.jsonl" || f.path().filename() == "nvidia-smi-q.txt") fs::remove(f.path());
  BundleOptions o;
  o.jobs = 1;
  Bundle probe = load_bundle(dir / "p", o);
  const Diagnosis before = diagnose(probe);
  REQUIRE(before.incident.onset_us != kUnknownTime);
  MetricWindow w;
  w.onset_us = before.incident.onset_us;
  for (const std::string& host : truth.hosts) {
    std::string text;
    for (int64_t t = w.start_us(); t <= w.end_us(); t += w.step_us)  // capped a minute before onset: SwPowerCap|HwPowerBrake
      text += "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\",pci_bus_id=\"00000000:18:00.0\",Hostname=\"" + host + "\"} " +
              std::string(t >= w.onset_us - 60'000'000 ? "132" : "0") + " " + std::to_string(t / 1000) + "\n";
    dir.write("p/" + host + "/dcgm.prom", text);
  }
  Bundle b = load_bundle(dir / "p", o);
  MetricSourceOptions mo;
  const MetricReport report = add_metrics(b, mo, [&] { return w.onset_us; });
  CHECK(report.changes >= 1);
  Diagnosis d = diagnose(b);
  REQUIRE(!d.root_causes.empty());
  CHECK(matches(d.root_causes[0], truth));
  bool dcgm = false;
  for (const Evidence& e : d.root_causes[0].evidence) dcgm = dcgm || e.kind == "metric_change";
  CHECK(dcgm);
  CHECK(d.root_causes[0].summary.find("GPUs throttled") != std::string::npos);
}

TEST_CASE("nvidia-smi -q cut short anywhere reads what is there and no further") {
  const std::string dump = kSmiDump;
  for (size_t n = 0; n <= dump.size(); ++n) {
    ParseResult r = parse_text(dump.substr(0, n), "node07");
    CHECK(r.events.size() <= 1);
  }
  // A temperature field with no value at all.
  ParseResult r = parse_text(std::string(kSmiDump) + "GPU 00000000:3B:00.0\n    Temperature\n        GPU Current Temp :\n", "node07");
  CHECK(kind_of(r, "gpu_clock_event").size() == 1);
}
