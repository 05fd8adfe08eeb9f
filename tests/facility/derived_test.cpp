// Derived figures against hand computations: liquid heat, counter deltas, chain comparison, PUE,
// rack budget, meter priority, physics cross-checks with their tolerance, thermal headroom.
#include <catch2/catch.hpp>

#include <algorithm>

#include "astral/facility/derived.hpp"
#include "astral/facility/redfish.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;

namespace {

Sample sample(const std::string& host, EntityKind kind, const std::string& entity, const std::string& quantity,
              Unit unit, double value, bool counter = false) {
  Sample s;
  s.time = Clock::now();
  s.source = "test";
  s.host = host;
  s.kind = kind;
  s.entity = entity;
  s.quantity = quantity;
  s.unit = unit;
  s.value = value;
  s.counter = counter;
  return s;
}

const CoolingFigures* cooling(const Derived& d, const std::string& entity) {
  for (const auto& c : d.cooling)
    if (c.entity == entity) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("liquid heat: flow × density × c_p × ΔT, the reference's worked examples") {
  // 42 L/min, ΔT 10 K, water: 42/60 L/s × 1.0 kg/L × 4.18 kJ/(kg·K) × 10 K = 29.26 kW.
  CHECK(liquid_heat_watts(42, 10) == Approx(29260));
  // 42 L/min, ΔT 18 K, 20 % glycol (1030 kg/m³, 3.974 kJ/(kg·K)) = 51.57 kW.
  CHECK(liquid_heat_watts(42, 18, 1030, 3974) == Approx(0.7 * 1.03 * 3.974 * 18 * 1000));
  CHECK(liquid_heat_watts(0, 10) == 0);
}

TEST_CASE("CDU mockup: computed heat disagrees with the reported heat on both loops (a finding)") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-cooling-unit"), "cdu");
  Derived d = derive(s, DeriveConfig{});
  const auto* primary = cooling(d, "ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1");
  const auto* secondary = cooling(d, "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1");
  REQUIRE(primary);
  REQUIRE(secondary);
  // The primary side is facility water; the rack side carries the CDU's glycol mix.
  CHECK(*primary->heat_computed_w == Approx(29260));
  CHECK(primary->density == 1000);
  CHECK(*primary->heat_reported_w == Approx(25480));
  CHECK(*secondary->heat_computed_w == Approx(51574.6).epsilon(1e-4));
  CHECK(secondary->density == 1030);
  CHECK(secondary->coolant == "the CDU");
  CHECK(std::count_if(s.findings.begin(), s.findings.end(), [](const Finding& f) { return f.check == "heat_balance"; }) == 2);
  // Reported values are never rewritten.
  CHECK(s.find("", "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1", "heat_removed")->value == Approx(25310));
}

TEST_CASE("counter deltas: growth, reset to zero, wrap") {
  CHECK(counter_delta(100, 150) == 50);
  CHECK(counter_delta(100, 30) == 30);  // reset: counts from zero
  CHECK(counter_delta(90, 5, 100.0) == 15);
}

TEST_CASE("AC versus HVDC chains from configured stage efficiencies") {
  std::vector<ChainStage> ac = {{"UPS", 0.95}, {"PDU transformer", 0.98}, {"server PSU", 0.94}};
  std::vector<ChainStage> hvdc = {{"rectifier", 0.975}, {"DC-DC", 0.98}};
  ChainComparison c = compare_chains(ac, hvdc, 100000);
  CHECK(c.ac.efficiency == Approx(0.95 * 0.98 * 0.94));
  CHECK(c.ac.input_w == Approx(100000 / (0.95 * 0.98 * 0.94)));
  CHECK(c.hvdc.input_w == Approx(100000 / (0.975 * 0.98)));
  CHECK(c.saved_w == Approx(c.ac.input_w - c.hvdc.input_w));
  CHECK(c.saved_ratio == Approx(c.saved_w / c.ac.input_w));
  CHECK(c.saved_kwh_per_year == Approx(c.saved_w * 8.76));
  // Stage losses add up to the chain's loss; the last stage (next to the load) loses the least power.
  double sum = 0;
  for (const auto& [name, loss] : c.ac.stage_loss_w) sum += loss;
  CHECK(sum == Approx(c.ac.loss_w));
  CHECK(c.ac.stage_loss_w.front().first == "UPS");
  CHECK(c.ac.stage_loss_w.back().second == Approx(100000 / 0.94 - 100000));
  CHECK_THROWS_AS(evaluate_chain("bad", {{"x", 1.2}}, 1000), std::invalid_argument);
  CHECK_THROWS_AS(evaluate_chain("bad", {{"x", 0}}, 1000), std::invalid_argument);
}

TEST_CASE("PUE over an interval from classified energy counters") {
  auto at = [](double it_kwh, double fac_kwh, double total_kwh) {
    Snapshot s;
    s.samples.push_back(sample("pdu", EntityKind::pdu, "PowerEquipment/RackPDUs/1", "energy", Unit::joules, it_kwh * 3.6e6, true));
    s.samples.push_back(sample("cdu", EntityKind::cdu, "ThermalEquipment/CDUs/1", "energy", Unit::joules, fac_kwh * 3.6e6, true));
    s.samples.push_back(sample("utility", EntityKind::pdu, "main", "energy", Unit::joules, total_kwh * 3.6e6, true));
    return s;
  };
  DeriveConfig cfg;
  cfg.pue_it = {parse_selector("pdu:PowerEquipment/RackPDUs/*")};
  cfg.pue_facility = {parse_selector("cdu:*")};
  SECTION("total = IT + facility") {
    PueResult r = pue_between(at(1000, 50, 0), at(1100, 70, 0), cfg);
    CHECK(r.it_j == Approx(100 * 3.6e6));
    CHECK(r.facility_j == Approx(20 * 3.6e6));
    REQUIRE(r.pue);
    CHECK(*r.pue == Approx(1.2));
    CHECK_FALSE(r.from_total_meter);
    CHECK(r.meters.size() == 2);
  }
  SECTION("a total meter wins over the sum") {
    cfg.pue_total = {parse_selector("utility:main")};
    PueResult r = pue_between(at(1000, 50, 5000), at(1100, 70, 5130), cfg);
    CHECK(r.from_total_meter);
    CHECK(*r.pue == Approx(1.3));
  }
  SECTION("a counter that went down was reset: counted from zero, noted") {
    PueResult r = pue_between(at(1000, 50, 0), at(40, 60, 0), cfg);
    CHECK(r.it_j == Approx(40 * 3.6e6));
    CHECK(*r.pue == Approx(50.0 / 40.0));
    CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("reset") != std::string::npos; }));
  }
  SECTION("PUE below one is flagged: the boundary is wrong") {
    cfg.pue_total = {parse_selector("utility:main")};
    PueResult r = pue_between(at(1000, 50, 5000), at(1100, 70, 5050), cfg);
    CHECK(*r.pue == Approx(0.5));
    CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("< 1") != std::string::npos; }));
  }
  SECTION("no IT energy moved: no PUE") {
    PueResult r = pue_between(at(1000, 50, 0), at(1000, 70, 0), cfg);
    CHECK_FALSE(r.pue);
  }
}

TEST_CASE("rack power: source priority per host, budget ratio, headroom and over-budget alarms") {
  Snapshot s;
  // Host a: the PDU total wins over its chassis reading (the same power, measured upstream).
  s.samples.push_back(sample("a", EntityKind::pdu, "PowerEquipment/RackPDUs/1", "power", Unit::watts, 6000));
  s.samples.push_back(sample("a", EntityKind::chassis, "Chassis/1U", "power", Unit::watts, 5000));
  // Host b: a server with chassis power only.
  s.samples.push_back(sample("b", EntityKind::chassis, "Chassis/1U", "power", Unit::watts, 2500));
  // Host c: only PSU inputs: summed.
  s.samples.push_back(sample("c", EntityKind::psu, "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1", "input_power", Unit::watts, 700));
  s.samples.push_back(sample("c", EntityKind::psu, "Chassis/1U/PowerSubsystem/PowerSupplies/Bay2", "input_power", Unit::watts, 800));
  DeriveConfig cfg;
  cfg.racks.push_back(RackConfig{"r1", 10000.0, {}, {}, {}, {}});
  Derived d = derive(s, cfg);
  REQUIRE(d.racks.size() == 1);
  CHECK(d.racks[0].it_power_w == Approx(6000 + 2500 + 1500));
  CHECK(d.racks[0].meters.size() == 4);
  CHECK(*d.racks[0].budget_ratio == Approx(1.0));
  CHECK(*d.racks[0].headroom_w == Approx(0));
  REQUIRE(s.alarms.size() == 1);
  CHECK(s.alarms[0].type == "rack_power_over_budget");
  CHECK(s.alarms[0].severity == Severity::warning);  // at 100 %, not over
  CHECK(s.alarms[0].kind == EntityKind::rack);

  SECTION("configured meters replace the priority rule; over budget is critical") {
    Snapshot t = s;
    t.alarms.clear();
    DeriveConfig c2;
    c2.racks.push_back(RackConfig{"r1", 5000.0, {parse_selector("a:PowerEquipment/*"), parse_selector("b:Chassis/1U")}, {}, {}, {}});
    Derived d2 = derive(t, c2);
    CHECK(d2.racks[0].it_power_w == Approx(8500));
    CHECK(d2.racks[0].basis == "configured meters");
    REQUIRE(t.alarms.size() == 1);
    CHECK(t.alarms[0].severity == Severity::critical);
  }
  SECTION("facility power gives the instantaneous (interim) PUE") {
    Snapshot t = s;
    t.samples.push_back(sample("cdu", EntityKind::cdu, "ThermalEquipment/CDUs/1", "power", Unit::watts, 1000));
    DeriveConfig c3;
    c3.racks.push_back(RackConfig{"r1", std::nullopt, {parse_selector("a:PowerEquipment/*")}, {parse_selector("cdu:*")}, {}, {}});
    Derived d3 = derive(t, c3);
    CHECK(*d3.racks[0].pue_instantaneous == Approx(7000.0 / 6000.0));
  }
}

TEST_CASE("physics cross-checks are findings with a configurable tolerance, never rewrites") {
  SECTION("efficiency above one and input above capacity (quirky BMC PSU, DMTF server PSU)") {
    Snapshot s = read_redfish_mockup(quirky_dir(), "tray");
    s.merge(read_redfish_mockup(mockup_dir("public-liquid-cooled-server"), "server"));
    Derived d = derive(s, DeriveConfig{});
    CHECK(has_finding(s, "efficiency_above_one"));
    CHECK(has_finding(s, "over_capacity"));  // Bay1: 937.4 W in, rated 400 W
    auto psu1 = std::find_if(d.conversions.begin(), d.conversions.end(), [](const ConversionFigures& c) { return c.entity.find("PSU1") != std::string::npos; });
    REQUIRE(psu1 != d.conversions.end());
    CHECK(psu1->efficiency() == Approx(3100.0 / 2950.0));
    CHECK(s.find("tray", "Chassis/Tray0/PowerSubsystem/PowerSupplies/PSU1", "output_power")->value == 3100);
  }
  SECTION("apparent power below real power; DC P = V·I within or beyond the tolerance") {
    Snapshot s = read_redfish_mockup(mockup_dir("public-power-shelf"), "shelf");
    Snapshot one_percent = s, tenth_percent = s;
    Derived d = derive(s, DeriveConfig{});
    // 6300 VA against 6438 W is 2 % short: below the default 5 % tolerance, above 1 %.
    CHECK_FALSE(has_finding(s, "apparent_below_real"));
    DeriveConfig c1;
    c1.tolerance = 0.01;
    derive(one_percent, c1);
    CHECK(has_finding(one_percent, "apparent_below_real"));
    // 48.45 V × 16.93 A = 820.3 W against 816.5 W: 0.5 %.
    CHECK_FALSE(has_finding(one_percent, "power_mismatch"));
    DeriveConfig c2;
    c2.tolerance = 0.001;
    derive(tenth_percent, c2);
    CHECK(has_finding(tenth_percent, "power_mismatch"));
    // The shelf's end-to-end conversion: AC mains in, DC bus out.
    auto shelf = std::find_if(d.conversions.begin(), d.conversions.end(), [](const ConversionFigures& c) { return c.entity == "PowerEquipment/PowerShelves/1"; });
    REQUIRE(shelf != d.conversions.end());
    CHECK(shelf->input_w == Approx(897.4 * 2));
    CHECK(shelf->output_w == Approx(816.5));
  }
}

TEST_CASE("liquid heat capture against rack IT power, and capture above one is a finding") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-cooling-unit"), "cdu");
  s.samples.push_back(sample("pdu", EntityKind::pdu, "PowerEquipment/RackPDUs/1", "power", Unit::watts, 30000));
  DeriveConfig cfg;
  cfg.racks.push_back(RackConfig{"r", std::nullopt, {parse_selector("pdu:*")}, {}, {}, {parse_selector("cdu:*SecondaryCoolantConnectors/*")}});
  Derived d = derive(s, cfg);
  CHECK(*d.racks[0].heat_removed_w == Approx(25310));
  CHECK(*d.racks[0].capture_ratio == Approx(25310.0 / 30000.0));
  CHECK_FALSE(has_finding(s, "capture_above_one"));
  Snapshot t = read_redfish_mockup(mockup_dir("public-cooling-unit"), "cdu");
  t.samples.push_back(sample("pdu", EntityKind::pdu, "PowerEquipment/RackPDUs/1", "power", Unit::watts, 20000));
  derive(t, cfg);
  CHECK(has_finding(t, "capture_above_one"));
}

TEST_CASE("thermal headroom from limits, selectors with globs") {
  Snapshot s;
  Sample t = sample("n", EntityKind::sensor, "cpu", "temperature", Unit::celsius, 80);
  t.limits.upper_caution = 85;
  t.limits.upper_critical = 95;
  s.samples.push_back(t);
  Derived d = derive(s, DeriveConfig{});
  REQUIRE(d.headroom.size() == 1);
  CHECK(d.headroom[0].headroom() == Approx(15));  // against the critical limit

  CHECK(glob_match("*Secondary*", "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"));
  CHECK_FALSE(glob_match("*Primary*", "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"));
  CHECK(glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXbYY"));
  Selector sel = parse_selector("cdu:ThermalEquipment/*:heat_removed");
  CHECK(sel.host == "cdu");
  CHECK(sel.entity == "ThermalEquipment/*");
  CHECK(sel.quantity == "heat_removed");
  Selector host_only = parse_selector("pdu");
  CHECK(host_only.entity == "*");
  CHECK(host_only.quantity == "*");
}
