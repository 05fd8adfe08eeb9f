// The shipped Prometheus rules and Grafana dashboard (facility/prometheus, facility/grafana):
// promtool (Debian's prometheus package) checks the rules and runs their unit tests, and every
// series a rule or a dashboard panel names is one the exporter emits (or a recorded rule).
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "astral/facility/prometheus.hpp"
#include "astral/facility/redfish.hpp"
#include "run_process.hpp"
#include "support.hpp"
#include "test_paths.hpp"

using namespace astral::facility;
using json = nlohmann::json;

namespace {

std::string source_dir() { return astral::test::fixture("../.."); }
std::string rules_file() { return source_dir() + "/facility/prometheus/astral-facility.rules.yml"; }

// Every metric family the exporter can emit over the DMTF mockups, with rack budgets, PUE
// meters and event streams in use.
std::set<std::string> emitted_families() {
  Snapshot s;
  for (const char* m : {"public-cooling-unit", "public-liquid-cooled-server", "public-power-shelf", "public-pdu", "public-rackmount1"})
    s.merge(read_redfish_mockup(astral::facility::test::mockup_dir(m), m));
  // The project's liquid-cooled rack: a CDU that reports its cooling capacity (headroom).
  s.merge(read_redfish_mockup(astral::test::fixture("astral/facility/rack42/cdu"), "rack42-cdu"));
  DeriveConfig cfg;
  cfg.racks.push_back(RackConfig{"rack-41", 8000.0, {parse_selector("public-power-shelf:PowerEquipment/PowerShelves/1")}, {}, {},
                                 {parse_selector("public-cooling-unit:*SecondaryCoolantConnectors/*")}});
  Derived d = derive(s, cfg);
  ExporterCounters counters;
  counters.pue_last_interval = 1.2;
  counters.event_streams.push_back({"public-cooling-unit", "sse", true, 1, 0, 3, 0, 0});
  std::string text = render_prometheus(s, &d, &counters);
  std::set<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("# TYPE ", 0) == 0) out.insert(line.substr(7, line.find(' ', 7) - 7));
  return out;
}

std::set<std::string> names_in(const std::string& expr) {
  static const std::regex kName(R"((astral_facility_[a-z0-9_]+|astral:[a-zA-Z0-9_:]+))");
  std::set<std::string> out;
  for (std::sregex_iterator it(expr.begin(), expr.end(), kName), end; it != end; ++it) out.insert((*it)[1]);
  return out;
}

void collect_exprs(const json& panels, std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& p : panels) {
    if (p.contains("panels")) collect_exprs(p["panels"], out);
    if (!p.contains("targets")) continue;
    for (const auto& t : p["targets"]) out.emplace_back(p.value("title", "?"), t.value("expr", ""));
  }
}

}  // namespace

TEST_CASE("alert and recording rules pass promtool check rules and promtool test rules") {
  auto check = astral::test::run_process({"promtool", "check", "rules", rules_file()}, 120);
  INFO(check.out << check.err);
  REQUIRE(check.exit_code == 0);  // promtool comes with Debian's prometheus (scripts/install-deps.sh)
  CHECK(check.out.find("SUCCESS: 11 rules found") != std::string::npos);
  auto unit = astral::test::run_process(
      {"promtool", "test", "rules", source_dir() + "/facility/prometheus/astral-facility.rules.test.yml"}, 240);
  INFO(unit.out << unit.err);
  CHECK(unit.exit_code == 0);
  // Every alert has a test that fires it and one that sees it clear.
  std::string tests = astral::facility::test::slurp(source_dir() + "/facility/prometheus/astral-facility.rules.test.yml");
  std::string rules = astral::facility::test::slurp(rules_file());
  std::regex alert(R"(- alert: (\w+))");
  for (std::sregex_iterator it(rules.begin(), rules.end(), alert), end; it != end; ++it) {
    std::string name = (*it)[1];
    INFO(name);
    CHECK(tests.find("alertname: " + name) != std::string::npos);
  }
}

TEST_CASE("every series the rules and the Grafana dashboard name is one the exporter emits") {
  std::set<std::string> emitted = emitted_families();
  std::string rules = astral::facility::test::slurp(rules_file());
  std::set<std::string> recorded;
  std::regex record(R"(- record: (\S+))");
  for (std::sregex_iterator it(rules.begin(), rules.end(), record), end; it != end; ++it) recorded.insert((*it)[1]);
  REQUIRE(recorded.size() == 4);
  auto known = [&](const std::string& n) { return emitted.count(n) > 0 || recorded.count(n) > 0; };
  for (const auto& n : names_in(rules)) {
    INFO("rules name " << n);
    CHECK(known(n));
  }
  json dash = json::parse(astral::facility::test::slurp(source_dir() + "/facility/grafana/astral-facility.json"), nullptr, false);
  REQUIRE_FALSE(dash.is_discarded());
  CHECK(dash["uid"] == "astral-facility");
  std::vector<std::pair<std::string, std::string>> exprs;
  collect_exprs(dash["panels"], exprs);
  REQUIRE(exprs.size() >= 15);
  std::set<std::string> titles;
  for (const auto& [title, expr] : exprs) {
    titles.insert(title);
    auto names = names_in(expr);
    INFO("panel '" << title << "': " << expr);
    CHECK_FALSE(names.empty());
    for (const auto& n : names) {
      INFO("names " << n);
      CHECK(known(n));
    }
  }
  for (const char* view : {"Rack IT power", "Coolant supply temperature and limit", "Rectifier health"}) CHECK(titles.count(view));
}
