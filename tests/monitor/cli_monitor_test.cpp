// `astral monitor` end to end: exit codes, JSON contract, simulate -> diagnose, timeline.
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "monitor_test_util.hpp"
#include "run_process.hpp"
#include "test_paths.hpp"

using astral::test::run_process;
using astral::monitor::testing::TempDir;

namespace {
std::string incident(const std::string& name) { return astral::test::fixture("astral/monitor/incidents/" + name); }
}  // namespace

TEST_CASE("CLI: diagnose prints JSON with root_causes and exits 0, healthy or not") {
  auto r = run_process({ASTRAL_CLI, "monitor", "diagnose", incident("desync-1409"), "--json", "--year", "2025", "--tz", "UTC"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["root_causes"].size() >= 1);
  CHECK(j["root_causes"][0]["component"]["kind"] == "process");
  CHECK(j["root_causes"][0]["component"]["rank"] == 7);
  auto h = run_process({ASTRAL_CLI, "monitor", "diagnose", incident("healthy"), "--json"});
  REQUIRE(h.exit_code == 0);
  CHECK(nlohmann::json::parse(h.out)["root_causes"].empty());
  auto text = run_process({ASTRAL_CLI, "monitor", "diagnose", incident("gb200-xid149"), "--year", "2025"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("0019:01:00") != std::string::npos);
}

TEST_CASE("CLI: bad input exits 2 with one line naming it") {
  auto r = run_process({ASTRAL_CLI, "monitor", "diagnose", "/nonexistent/bundle"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("/nonexistent/bundle") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  auto tz = run_process({ASTRAL_CLI, "monitor", "diagnose", incident("healthy"), "--tz", "Mars/Olympus"});
  CHECK(tz.exit_code == 2);
  CHECK(tz.err.find("--tz") != std::string::npos);
  auto fault = run_process({ASTRAL_CLI, "monitor", "simulate", "--fabric", "rail:4", "--fault", "meteor", "--ranks", "16",
                            "-o", "/tmp/astral-never-written"});
  CHECK(fault.exit_code == 2);
  CHECK(fault.err.find("meteor") != std::string::npos);
}

TEST_CASE("CLI: simulate writes a bundle and its truth, diagnose finds the injected fault") {
  TempDir dir;
  auto s = run_process({ASTRAL_CLI, "monitor", "simulate", "--fabric", "rail:8:8:4", "--fault", "link-flap", "--ranks",
                        "16", "-o", dir / "b", "--seed", "11", "--json"});
  REQUIRE(s.exit_code == 0);
  auto truth = nlohmann::json::parse(s.out);
  CHECK(truth["fault"] == "link-flap");
  std::ifstream beside(dir / "b.truth.json");
  CHECK(beside.good());
  auto d = run_process({ASTRAL_CLI, "monitor", "diagnose", dir / "b", "--json", "--timeline", dir / "t.json"});
  REQUIRE(d.exit_code == 0);
  auto j = nlohmann::json::parse(d.out);
  REQUIRE(!j["root_causes"].empty());
  CHECK(j["root_causes"][0]["component"]["kind"] == "link");
  CHECK(j["root_causes"][0]["component"]["host"] == truth["component"]["host"]);
  std::ifstream t(dir / "t.json");
  std::stringstream ss;
  ss << t.rdbuf();
  CHECK(nlohmann::json::parse(ss.str())["traceEvents"].size() > 10);
  auto again = run_process({ASTRAL_CLI, "monitor", "simulate", "--fabric", "rail:8:8:4", "--fault", "none", "--ranks",
                            "16", "-o", dir / "b"});
  CHECK(again.exit_code == 2);  // never writes into a non-empty folder
}
