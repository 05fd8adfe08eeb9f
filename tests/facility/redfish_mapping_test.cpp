// The Redfish mapping (payload -> samples, alarms, findings, quirks) on the DMTF mockups and the
// project's quirky-BMC fixture, read offline through the same service code the HTTP tests use.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "astral/facility/redfish.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;

namespace {

double value(const Snapshot& s, const std::string& entity, const std::string& quantity) {
  const Sample* x = s.find("", entity, quantity);
  if (!x) FAIL("no " << quantity << " for " << entity);
  return x->value;
}

}  // namespace

TEST_CASE("CDU mockup: loops, pumps, coolant, leak detection and the failed pump") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-cooling-unit"), "cdu");
  REQUIRE(s.sources.at(0).ok);
  const std::string primary = "ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1";
  const std::string secondary = "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1";
  CHECK(value(s, primary, "coolant_flow") == 42);
  CHECK(value(s, primary, "coolant_supply_temperature") == 30);
  CHECK(value(s, primary, "coolant_return_temperature") == 40);
  CHECK(value(s, primary, "coolant_supply_pressure") == Approx(827000));  // kPa -> Pa
  CHECK(value(s, primary, "heat_removed") == Approx(25480));              // kW -> W
  CHECK(value(s, secondary, "heat_removed") == Approx(25310));
  CHECK(value(s, secondary, "coolant_delta_temperature") == 18);
  CHECK(value(s, "ThermalEquipment/CDUs/1", "coolant_density") == 1030);
  CHECK(value(s, "ThermalEquipment/CDUs/1", "coolant_specific_heat") == Approx(3974));
  CHECK(value(s, "ThermalEquipment/CDUs/1/Pumps/1", "pump_speed") == Approx(0.385));
  CHECK(value(s, "ThermalEquipment/CDUs/1/Pumps/2", "health") == 2);
  CHECK(value(s, "Chassis/CDU/LeakDetectors/Moisture", "leak_state") == 0);
  CHECK(value(s, "ThermalEquipment/CDUs/1/Filters/1", "service_life_used") == Approx(0.5791));
  // The secondary supply temperature's control limit became its critical threshold.
  const Sample* supply = s.find("", secondary, "coolant_supply_temperature");
  REQUIRE(supply);
  REQUIRE(supply->limits.upper_critical);
  CHECK(*supply->limits.upper_critical == 35);
  // Pump 2: failed in its own status and in the CDU's conditions; reported once.
  CHECK(has_alarm(s, "pump_failed", "ThermalEquipment/CDUs/1/Pumps/2", Severity::critical));
  CHECK(std::count_if(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.type == "pump_failed"; }) == 1);
  // The detector reachable from the chassis and from the CDU's group is one reading.
  CHECK(std::count_if(s.samples.begin(), s.samples.end(), [](const Sample& x) {
          return x.entity == "Chassis/CDU/LeakDetectors/Moisture" && x.quantity == "leak_state";
        }) == 1);
  // §1.4 inconsistencies surface as findings, never as failures.
  CHECK(has_finding(s, "excerpt_mismatch", "SecondaryFlow"));
}

TEST_CASE("liquid-cooled server mockup: PSU metrics, chassis power, limits and the PSU warning") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-liquid-cooled-server"), "server");
  const std::string bay1 = "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1";
  CHECK(value(s, bay1, "input_power") == Approx(937.4));
  CHECK(value(s, bay1, "output_power") == Approx(937.4));
  CHECK(value(s, bay1, "energy") == Approx(325675 * 3.6e6));  // kWh -> J
  CHECK(s.find("", bay1, "energy")->counter);
  CHECK(value(s, bay1, "power_capacity") == 400);
  CHECK(value(s, "Chassis/1U", "power") == 374);
  CHECK(value(s, "Chassis/1U", "power_limit") == 500);
  CHECK(value(s, "Chassis/1U", "exhaust_temperature") == Approx(40.5));
  CHECK(value(s, "Chassis/1U/ThermalSubsystem/Pumps/CPU1", "pump_speed_rpm") == 300);
  CHECK(value(s, "Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU2", "coolant_delta_temperature") == Approx(24.5));
  CHECK(has_alarm(s, "psu_fault", bay1, Severity::warning));
  // Bay2 is Absent: nothing is read or alarmed for it.
  CHECK_FALSE(s.find("", "Chassis/1U/PowerSubsystem/PowerSupplies/Bay2", "health"));
  // Sensors with thresholds that belong to another reading are not applied to the excerpt.
  CHECK(std::none_of(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.type == "input_power_above_threshold"; }));
  // The CPU sensor's thresholds apply to the CPU sensor itself: 37 °C against 45 °C.
  const Sample* cpu = s.find("", "Chassis/1U", "temperature");
  REQUIRE(cpu);
  CHECK(has_finding(s, "excerpt_mismatch", "CPU1Temp"));
}

TEST_CASE("power-shelf mockup: rectifiers found despite a mislinked PowerSubsystem, DC bus circuit") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-power-shelf"), "shelf");
  CHECK(value(s, "PowerEquipment/PowerShelves/1", "power") == 6438);
  CHECK(value(s, "PowerEquipment/PowerShelves/1", "apparent_power") == 6300);
  CHECK(value(s, "PowerEquipment/PowerShelves/1/Branches/DC", "nominal_voltage") == 48);
  CHECK(value(s, "PowerEquipment/PowerShelves/1/Branches/DC", "current") == Approx(16.93));
  CHECK(value(s, "PowerEquipment/PowerShelves/1/Mains/AC1", "power") == Approx(897.4));
  const Sample* rect = s.find("", "Chassis/PowerShelf/PowerSubsystem/PowerSupplies/Bay1", "input_power");
  REQUIRE(rect);
  CHECK(rect->kind == EntityKind::rectifier);
  CHECK(s.quirks["link_type_mismatch"] == 1);
  CHECK(has_finding(s, "link_type_mismatch", "SensorCollection"));
}

TEST_CASE("rack PDU mockup: mains phases, branches and outlets, unit mismatches counted") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-pdu"), "pdu");
  CHECK(value(s, "PowerEquipment/RackPDUs/1", "power") == 6438);
  CHECK(value(s, "PowerEquipment/RackPDUs/1/Outlets/A1", "power") == Approx(197.4));
  CHECK(value(s, "PowerEquipment/RackPDUs/1/Outlets/A1", "energy") == Approx(36166 * 3.6e6));
  CHECK(value(s, "PowerEquipment/RackPDUs/1/Mains/AC1/Line1", "phase_current") == Approx(8.02));
  CHECK(value(s, "PowerEquipment/RackPDUs/1/Mains/AC1/Line1ToLine2", "phase_voltage") == Approx(202.8));
  const Sample* outlet = s.find("", "PowerEquipment/RackPDUs/1/Outlets/A1", "power");
  CHECK(outlet->kind == EntityKind::outlet);
  CHECK(s.quirks["unit_mismatch"] > 0);
}

TEST_CASE("deprecated Power and Thermal are the fallback when PowerSubsystem and ThermalSubsystem are absent") {
  TempDir dir;
  namespace fs = std::filesystem;
  fs::copy(mockup_dir("public-rackmount1"), dir.path + "/m", fs::copy_options::recursive);
  std::string chassis = dir.path + "/m/Chassis/1U/index.json";
  auto j = nlohmann::json::parse(std::ifstream(chassis));
  j.erase("PowerSubsystem");
  j.erase("ThermalSubsystem");
  j.erase("EnvironmentMetrics");
  std::ofstream(chassis) << j.dump();
  Snapshot s = read_redfish_mockup(dir.path + "/m", "rack1");
  REQUIRE(s.sources.at(0).ok);
  CHECK(value(s, "Chassis/1U/Power#/PowerControl/0", "power") == 344);
  CHECK(value(s, "Chassis/1U/Power#/PowerControl/0", "power_limit") == 500);
  CHECK(value(s, "Chassis/1U/Power#/PowerControl/0", "power_average") == 319);
  CHECK(value(s, "Chassis/1U/Power#/PowerSupplies/0", "output_power") == 325);
  const Sample* t = s.find("", "Chassis/1U/Thermal#/Temperatures/0", "temperature");
  REQUIRE(t);
  CHECK(t->value == 41);
  CHECK(t->limits.upper_critical == 45);
  CHECK(t->limits.upper_caution == 42);
  CHECK(value(s, "Chassis/1U/Thermal#/Fans/0", "fan_speed_rpm") == 2100);

  SECTION("with PowerSubsystem present, Power is not read twice") {
    Snapshot both = read_redfish_mockup(mockup_dir("public-rackmount1"), "rack1");
    CHECK_FALSE(both.find("", "Chassis/1U/Power#/PowerControl/0", "power"));
    CHECK(both.find("", "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1", "health"));
  }
}

TEST_CASE("quirky BMC: every real-BMC deviation is tolerated, counted and never a failure") {
  Snapshot s = read_redfish_mockup(quirky_dir(), "tray");
  REQUIRE(s.sources.at(0).ok);
  CHECK_FALSE(s.sources.at(0).partial);
  CHECK(s.quirks["nan_string"] == 2);              // PowerWatts "nan", the stale metric report value
  CHECK(s.quirks["number_as_string"] >= 1);        // EnergykWh "1234.5"
  CHECK(s.quirks["null_reading"] >= 1);            // TemperatureCelsius null
  CHECK(s.quirks["null_threshold"] == 1);
  CHECK(s.quirks["nan_literal"] == 1);             // a bare NaN, which is not JSON
  CHECK(s.quirks["unit_kWh"] == 1);
  CHECK(s.quirks["nonstandard_state"] == 1);       // PSU0 "Standby"
  CHECK(s.quirks["nonstandard_detector_state"] == 1);
  CHECK(s.quirks["unknown_reading_type"] == 1);
  // "nan" is no value, never 0.
  CHECK_FALSE(s.find("", "Chassis/Tray0", "power"));
  CHECK(value(s, "Chassis/Tray0", "energy") == Approx(1234.5 * 3.6e6));
  CHECK(value(s, "Chassis/Tray0/Sensors/TrayEnergy", "energy") == Approx(512.25 * 3.6e6));
  CHECK_FALSE(s.find("", "Chassis/Tray0/Sensors/GPU0Temp", "temperature"));
  // Standby PSU: present, not a fault. Critical PSU with lost input: both alarms.
  CHECK(std::none_of(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.entity.find("PSU0") != std::string::npos; }));
  CHECK(has_alarm(s, "psu_fault", "Chassis/Tray0/PowerSubsystem/PowerSupplies/PSU2", Severity::critical));
  CHECK(has_alarm(s, "psu_input_lost", "Chassis/Tray0/PowerSubsystem/PowerSupplies/PSU2", Severity::error));
  // "LeakDetected" under the deprecated LeakDetectors link, mapped through Status.Health.
  CHECK(has_alarm(s, "leak_detected", "Chassis/Tray0/ThermalSubsystem/LeakDetection/LeakDetectors/ColdPlate", Severity::critical));
  CHECK(value(s, "Chassis/Tray0/ThermalSubsystem/LeakDetection/LeakDetectors/Manifold", "leak_state") == 0);
  CHECK(has_alarm(s, "over_temperature", "Chassis/Tray0/Sensors/InletTemp", Severity::warning));
  // Metric reports: the latest value wins; "nan" is skipped.
  const Sample* gpu = s.find("", "Chassis/GPU_0/EnvironmentMetrics", "power");
  REQUIRE(gpu);
  CHECK(gpu->value == Approx(712.5));
  CHECK(gpu->source == "redfish-telemetry");
  CHECK_FALSE(s.find("", "Chassis/GPU_1/EnvironmentMetrics", "power"));
}

TEST_CASE("a mockup directory without a service root is a clear error") {
  TempDir dir;
  Snapshot s = read_redfish_mockup(dir.path, "empty");
  REQUIRE(s.sources.size() == 1);
  CHECK_FALSE(s.sources[0].ok);
  CHECK(s.sources[0].error.find("index.json") != std::string::npos);
}

TEST_CASE("in-memory payloads: links that loop, wrong types and garbage never hang or crash") {
  std::map<std::string, std::string> r = {
      {"/redfish/v1", R"({"@odata.id": "/redfish/v1", "Chassis": {"@odata.id": "/redfish/v1/Chassis"}})"},
      {"/redfish/v1/Chassis", R"({"Members": [{"@odata.id": "/redfish/v1/Chassis/A"}, 7, "x", {"@odata.id": 5}],
                                "Members@odata.nextLink": "/redfish/v1/Chassis"})"},
      {"/redfish/v1/Chassis/A", R"({"@odata.id": "/redfish/v1/Chassis/A", "Id": "A",
                                   "EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/A"},
                                   "PowerSubsystem": {"@odata.id": "/redfish/v1/Chassis"},
                                   "PowerWatts": {"Reading": [1, 2]}, "Status": {"State": 5, "Health": ["OK"]}})"},
  };
  Snapshot s = read_redfish_resources(r, "loop");
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].ok);
  CHECK(s.quirks["link_type_mismatch"] == 1);
  CHECK(s.quirks["non_numeric_reading"] >= 1);
}

TEST_CASE("Snapshot::merged gives what merging one by one gives: one alarm per type, host and entity") {
  auto part = [](const std::string& host, Severity severity, const std::string& entity) {
    Snapshot s;
    s.samples.push_back(Sample{});
    s.samples.back().host = host;
    s.alarms.push_back(Alarm{});
    s.alarms.back().host = host;
    s.alarms.back().entity = entity;
    s.alarms.back().type = "psu_fault";
    s.alarms.back().severity = severity;
    s.count_quirk("nan_literal");
    s.sources.push_back(SourceStatus{});
    s.sources.back().name = host;
    return s;
  };
  auto parts = [&] {
    std::vector<Snapshot> v;
    v.push_back(part("bmc1", Severity::warning, "PSU1"));
    v.push_back(part("bmc2", Severity::warning, "PSU1"));
    v.push_back(part("bmc1", Severity::critical, "PSU1"));  // same alarm, worse: replaces the first
    v.push_back(part("bmc1", Severity::info, "PSU1"));      // same alarm, milder: dropped
    v.push_back(part("bmc1", Severity::info, "PSU2"));
    return v;
  };
  Snapshot one_by_one;
  for (auto& p : parts()) one_by_one.merge(std::move(p));
  Snapshot all = Snapshot::merged(parts());
  REQUIRE(all.alarms.size() == 3);
  REQUIRE(all.alarms.size() == one_by_one.alarms.size());
  for (std::size_t i = 0; i < all.alarms.size(); ++i) {
    CHECK(all.alarms[i].host == one_by_one.alarms[i].host);
    CHECK(all.alarms[i].entity == one_by_one.alarms[i].entity);
    CHECK(all.alarms[i].severity == one_by_one.alarms[i].severity);
  }
  CHECK(all.alarms[0].severity == Severity::critical);
  CHECK(all.samples.size() == 5);
  CHECK(all.sources.size() == 5);
  CHECK(all.quirks.at("nan_literal") == 5);
}
