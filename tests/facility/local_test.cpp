// Local sources: hwmon and powercap/RAPL on node_exporter's fake sysfs (and small trees made
// here for sentinels, wraps and permissions), recorded ipmitool output, NVML through a fake
// libnvidia-ml loaded with dlopen.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "astral/facility/local.hpp"
#include "support.hpp"
#include "test_paths.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
namespace fs = std::filesystem;

namespace {

std::string ipmitool_fixture(const std::string& name) {
  return astral::test::fixture("astral/facility/ipmitool/" + name);
}

struct FakeSys {
  TempDir dir;
  FakeSys() { extract_ttar(astral::test::fixture("sysfs/sys.ttar"), dir.path); }
};

}  // namespace

TEST_CASE("hwmon on node_exporter's fake sysfs: chips by device, milli-units converted, limits kept") {
  FakeSys sys;
  Snapshot s = read_hwmon(sys.dir.path, "node1");
  REQUIRE(s.sources.at(0).ok);
  const Sample* t = s.find("node1", "coretemp@coretemp.0/temp1", "temperature");
  REQUIRE(t);
  CHECK(t->value == 55);
  CHECK(t->name == "Physical id 0");
  CHECK(t->limits.upper_caution == 84);
  CHECK(t->limits.upper_critical == 100);
  const Sample* fan = s.find("node1", "nct6779@nct6775.656/fan2", "fan_speed_rpm");
  REQUIRE(fan);
  CHECK(fan->value == 1098);
  const Sample* in0 = s.find("node1", "nct6779@nct6775.656/in0", "voltage");
  REQUIRE(in0);
  CHECK(in0->value == Approx(0.792));
  // A chip without a device link keeps its hwmon name; three radios on one device stay apart.
  CHECK(s.find("node1", "hwmon4/temp1", "temperature"));
  CHECK(s.find("node1", "mt7996_phy0_0@phy0/temp1", "temperature"));
  CHECK(s.find("node1", "mt7996_phy0_2@phy0/temp1", "temperature"));
  CHECK(s.alarms.empty());
}

TEST_CASE("hwmon power: the ACPI 4294967295000 µW sentinel is dropped, real power and limits kept") {
  TempDir dir;
  std::string chip = "sys/devices/platform/ACPI000D:00/hwmon/hwmon2";
  dir.file(chip + "/name", "power_meter\n");
  dir.file(chip + "/power1_average", "4294967295000\n");
  std::string gpu = "sys/devices/pci0000:00/0000:3b:00.0/hwmon/hwmon3";
  dir.file(gpu + "/name", "amdgpu\n");
  dir.file(gpu + "/power1_average", "212500000\n");
  dir.file(gpu + "/power1_cap", "300000000\n");
  dir.file(gpu + "/energy1_input", "987654321\n");
  dir.file(gpu + "/temp1_input", "97000\n");
  dir.file(gpu + "/temp1_crit", "95000\n");
  dir.file(gpu + "/humidity1_input", "45000\n");
  fs::create_directories(dir.path + "/sys/class/hwmon");
  fs::create_symlink("../../devices/platform/ACPI000D:00/hwmon/hwmon2", dir.path + "/sys/class/hwmon/hwmon2");
  fs::create_symlink("../../devices/pci0000:00/0000:3b:00.0/hwmon/hwmon3", dir.path + "/sys/class/hwmon/hwmon3");
  Snapshot s = read_hwmon(dir.path, "node1");
  CHECK_FALSE(s.find("node1", "power_meter@ACPI000D:00/power1", "power_average"));
  CHECK(s.quirks["hwmon_power_sentinel"] == 1);
  const Sample* p = s.find("node1", "amdgpu@0000:3b:00.0/power1", "power_average");
  REQUIRE(p);
  CHECK(p->value == Approx(212.5));
  CHECK(s.find("node1", "amdgpu@0000:3b:00.0/power1", "power_limit")->value == Approx(300));
  const Sample* e = s.find("node1", "amdgpu@0000:3b:00.0/energy1", "energy");
  REQUIRE(e);
  CHECK(e->counter);
  CHECK(e->value == Approx(987.654321));
  CHECK(s.find("node1", "amdgpu@0000:3b:00.0/humidity1", "humidity")->value == Approx(0.45));
  CHECK(has_alarm(s, "over_temperature", "amdgpu@0000:3b:00.0/temp1"));
}

TEST_CASE("RAPL zones from the fake sysfs: names, ranges, limits") {
  FakeSys sys;
  auto zones = read_rapl_zones(sys.dir.path);
  REQUIRE(zones.size() == 2);
  CHECK(zones[0].id == "intel-rapl:0");
  CHECK(zones[0].name == "package-0");
  CHECK(zones[0].energy_uj == 240422366267ULL);
  CHECK(zones[0].max_energy_range_uj == 262143328850ULL);
  CHECK(zones[0].power_limit_w == Approx(4090));
  CHECK(zones[1].name == "package-0/core");
  RaplMeter meter(sys.dir.path, "node1");
  Snapshot first = meter.sample();
  const Sample* e = first.find("node1", "package-0", "energy");
  REQUIRE(e);
  CHECK(e->value == Approx(240422.366267));
  CHECK(e->counter);
  CHECK_FALSE(first.find("node1", "package-0", "power"));  // one read cannot give power
}

TEST_CASE("RAPL power across a counter wrap, per zone") {
  TempDir dir;
  std::string zone = dir.path + "/sys/class/powercap/intel-rapl:0";
  dir.file("sys/class/powercap/intel-rapl:0/name", "package-0\n");
  dir.file("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n");
  dir.file("sys/class/powercap/intel-rapl:0/energy_uj", "262100000000\n");
  RaplMeter meter(dir.path, "node1");
  auto t0 = std::chrono::steady_clock::now();
  meter.sample(t0);
  // 2 s later the counter has wrapped: (range - prev) + cur = 43328850 + 356671150 = 400 J.
  dir.file("sys/class/powercap/intel-rapl:0/energy_uj", "356671150\n");
  Snapshot s = meter.sample(t0 + std::chrono::seconds(2));
  const Sample* p = s.find("node1", "package-0", "power");
  REQUIRE(p);
  CHECK(p->value == Approx(200.0));
  CHECK(s.quirks["rapl_wrap"] == 1);
  CHECK(wrapped_delta(10, 30, 100) == 20);
  CHECK(wrapped_delta(90, 5, 100) == 15);
  CHECK(wrapped_delta(90, 5, 0) == 5);  // unknown range: a reset
}

TEST_CASE("RAPL: an unreadable zone is a zone-local problem, reported, never fatal") {
  TempDir dir;
  dir.file("sys/class/powercap/intel-rapl:0/name", "package-0\n");
  dir.file("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "1000\n");
  fs::create_directories(dir.path + "/sys/class/powercap/intel-rapl:0/energy_uj");  // reads fail (EISDIR)
  dir.file("sys/class/powercap/intel-rapl:1/name", "package-1\n");
  dir.file("sys/class/powercap/intel-rapl:1/energy_uj", "500\n");
  RaplMeter meter(dir.path, "node1");
  Snapshot s = meter.sample();
  CHECK(s.sources.at(0).ok);  // one zone still reads
  CHECK(s.quirks["rapl_unreadable"] == 1);
  CHECK(s.find("node1", "package-1", "energy"));
  CHECK_FALSE(s.find("node1", "package-0", "energy"));
}

TEST_CASE("RAPL: a root-only energy_uj is reported as 'no permission', distinct from absent") {
  if (geteuid() == 0) {
    WARN("running as root: permission cannot be denied here; this case runs for unprivileged users");
    return;
  }
  TempDir dir;
  dir.file("sys/class/powercap/intel-rapl:0/name", "package-0\n");
  std::string energy = dir.file("sys/class/powercap/intel-rapl:0/energy_uj", "500\n");
  chmod(energy.c_str(), 0);
  auto zones = read_rapl_zones(dir.path);
  REQUIRE(zones.size() == 1);
  CHECK_FALSE(zones[0].energy_uj);
  CHECK(zones[0].error.rfind("no permission", 0) == 0);
}

TEST_CASE("ipmitool dcmi power reading: 1.8.19 and 1.8.18 layouts parse the same") {
  std::string error;
  auto a = parse_dcmi_power_reading(slurp(ipmitool_fixture("dcmi-power-reading-1.8.19.txt")), &error);
  auto b = parse_dcmi_power_reading(slurp(ipmitool_fixture("dcmi-power-reading-1.8.18.txt")), &error);
  REQUIRE(a);
  REQUIRE(b);
  for (const auto* r : {&*a, &*b}) {
    CHECK(r->active);
    CHECK(r->current_w == 412);
    CHECK(r->minimum_w == 98);
    CHECK(r->maximum_w == 633);
    CHECK(r->average_w == 405);
    CHECK(r->sampling_period_s == 1);
  }
  CHECK(a->timestamp == "03/14/25 10:22:31 UTC");
  CHECK(b->timestamp == "Fri Mar 14 10:22:31 2025");
  CHECK_FALSE(parse_dcmi_power_reading("hello", &error));
  CHECK_FALSE(error.empty());
}

TEST_CASE("ipmitool dcmi: deactivated means no numbers, an active 0 W is a policy") {
  IpmiOptions o;
  o.host = "node1";
  Snapshot off = ipmi_from_text(slurp(ipmitool_fixture("dcmi-power-reading-deactivated.txt")), o, "f");
  CHECK(off.sources.at(0).ok);
  CHECK(off.samples.empty());
  CHECK(off.quirks["dcmi_deactivated"] == 1);
  Snapshot zero = ipmi_from_text(slurp(ipmitool_fixture("dcmi-power-reading-zero.txt")), o, "f");
  CHECK(zero.samples.empty());
  o.zero_is_reading = true;
  zero = ipmi_from_text(slurp(ipmitool_fixture("dcmi-power-reading-zero.txt")), o, "f");
  REQUIRE(zero.find("node1", "dcmi", "power"));
  CHECK(zero.find("node1", "dcmi", "power")->value == 0);
  Snapshot on = ipmi_from_text(slurp(ipmitool_fixture("dcmi-power-reading-1.8.19.txt")), o, "f");
  CHECK(on.find("node1", "dcmi", "power")->value == 412);
  CHECK(on.find("node1", "dcmi", "power_average")->value == 405);
}

TEST_CASE("ipmitool sdr elist and list: readings, units, threshold states and PSU events") {
  auto records = parse_sdr(slurp(ipmitool_fixture("sdr-elist.txt")));
  REQUIRE(records.size() == 12);
  CHECK(records[0].name == "Inlet Temp");
  CHECK(records[0].sensor_number == "04h");
  CHECK(records[0].entity == "7.1");
  CHECK(records[0].value == 24);
  CHECK(records[0].unit == "degrees C");
  CHECK(records[10].value == Approx(1.8));
  IpmiOptions o;
  o.host = "node1";
  Snapshot s = ipmi_from_text(slurp(ipmitool_fixture("sdr-elist.txt")), o, "sdr-elist.txt");
  CHECK(s.find("node1", "sdr/Inlet Temp", "temperature")->value == 24);
  const Sample* psu = s.find("node1", "sdr/PSU1 Power In", "input_power");
  REQUIRE(psu);
  CHECK(psu->kind == EntityKind::psu);
  CHECK(s.find("node1", "sdr/Fan1A", "fan_speed_rpm")->value == 7440);
  CHECK(s.find("node1", "sdr/Voltage 1", "voltage")->value == 230);
  CHECK_FALSE(s.find("node1", "sdr/PSU2 Power In", "input_power"));
  CHECK(s.quirks["ipmi_no_reading"] == 1);
  CHECK(has_alarm(s, "psu_fault", "sdr/PSU2 Status"));
  CHECK_FALSE(has_alarm(s, "psu_fault", "sdr/PSU1 Status"));
  CHECK(has_alarm(s, "over_temperature", "sdr/CPU1 Temp"));
  CHECK(has_alarm(s, "fan_speed_rpm_below_threshold", "sdr/Fan2A"));
  auto list = parse_sdr(slurp(ipmitool_fixture("sdr-list.txt")));
  REQUIRE(list.size() == 4);
  CHECK(list[1].value == 420);
  CHECK(list[1].status == "ok");
  CHECK_FALSE(list[3].value);
}

TEST_CASE("ipmitool: text that is not ipmitool output, and a missing ipmitool, are clear errors") {
  IpmiOptions o;
  o.host = "node1";
  Snapshot s = ipmi_from_text(slurp(ipmitool_fixture("not-ipmitool.txt")), o, "not-ipmitool.txt");
  CHECK_FALSE(s.sources.at(0).ok);
  CHECK(s.sources.at(0).error.find("not-ipmitool.txt") != std::string::npos);
  o.ipmitool = "/nonexistent/ipmitool";
  Snapshot r = read_ipmi(o);
  REQUIRE(r.sources.size() == 1);
  CHECK_FALSE(r.sources[0].ok);
  CHECK(r.sources[0].error.find("--ipmi-file") != std::string::npos);
}

TEST_CASE("NVML through dlopen: power, energy, temperature, limit, throttling becomes alarms") {
  setenv("FAKE_NVML_MODE", "ok", 1);
  NvmlOptions o{FAKE_NVML_PATH, "gpu-node"};
  Snapshot s = read_nvml(o);
  REQUIRE(s.sources.at(0).ok);
  const std::string gpu0 = "GPU-00000000-1111-2222-3333-444444444444";
  const std::string gpu1 = "GPU-55555555-6666-7777-8888-999999999999";
  CHECK(s.find("gpu-node", gpu0, "power")->value == Approx(312.5));
  CHECK(s.find("gpu-node", gpu0, "energy")->value == Approx(123456.789));
  CHECK(s.find("gpu-node", gpu0, "energy")->counter);
  CHECK(s.find("gpu-node", gpu1, "temperature")->value == 87);
  CHECK(s.find("gpu-node", gpu1, "power_limit")->value == 700);
  CHECK(s.find("gpu-node", gpu0, "power")->name == "GPU 0 NVIDIA H100 80GB HBM3");
  CHECK(has_alarm(s, "gpu_thermal_throttling", gpu1));
  CHECK(has_alarm(s, "power_capping", gpu1));
  CHECK_FALSE(has_alarm(s, "gpu_thermal_throttling", gpu0));  // idle is not throttling
  auto thermal = std::find_if(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.type == "gpu_thermal_throttling"; });
  CHECK(thermal->severity == Severity::error);
  CHECK(thermal->kind == EntityKind::gpu);
}

TEST_CASE("NVML clock events: each alarm by its specific bit, a power brake is not thermal throttling") {
  auto types = [](std::uint64_t reasons) {
    std::vector<std::string> out;
    for (const auto& a : clock_event_alarms(reasons)) out.push_back(a.type);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(types(0x88) == V{"power_brake"});                        // HwSlowdown | HwPowerBrake
  CHECK(types(0x48) == V{"gpu_thermal_throttling"});             // HwSlowdown | HwThermal
  CHECK(types(0xC8) == V{"gpu_thermal_throttling", "power_brake"});
  CHECK(types(0x8) == V{"gpu_hw_slowdown"});                     // cause not given
  CHECK(types(0x20) == V{"gpu_thermal_throttling"});
  CHECK(clock_event_alarms(0x20).at(0).severity == Severity::warning);
  CHECK(types(0x84) == V{"power_brake"});                        // the brake explains the cap
  CHECK(types(0x1).empty());                                      // idle
  // Through the reader: GPU 1 under a power brake only.
  setenv("FAKE_NVML_MODE", "ok", 1);
  setenv("FAKE_NVML_REASONS", "88", 1);
  Snapshot s = read_nvml(NvmlOptions{FAKE_NVML_PATH, "gpu-node"});
  unsetenv("FAKE_NVML_REASONS");
  const std::string gpu1 = "GPU-55555555-6666-7777-8888-999999999999";
  CHECK(has_alarm(s, "power_brake", gpu1));
  CHECK_FALSE(has_alarm(s, "gpu_thermal_throttling", gpu1));
  CHECK_FALSE(has_alarm(s, "gpu_hw_slowdown", gpu1));
}

TEST_CASE("NVML absent or without a driver: skipped with a reason, nothing else") {
  Snapshot none = read_nvml(NvmlOptions{"libnvidia-ml-does-not-exist.so.1", "n"});
  REQUIRE(none.sources.size() == 1);
  CHECK_FALSE(none.sources[0].ok);
  CHECK(none.sources[0].error.rfind("skipped", 0) == 0);
  CHECK(none.samples.empty());
  setenv("FAKE_NVML_MODE", "no_driver", 1);
  Snapshot nodriver = read_nvml(NvmlOptions{FAKE_NVML_PATH, "n"});
  CHECK_FALSE(nodriver.sources.at(0).ok);
  CHECK(nodriver.sources.at(0).error.find("Driver Not Loaded") != std::string::npos);
  setenv("FAKE_NVML_MODE", "ok", 1);
}
