// `astral facility` end to end: real processes, real HTTP, exit codes 0/1/2, --json, events files,
// credentials from the environment only.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "support.hpp"
#include "test_paths.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
using astral::test::run_process;
using json = nlohmann::json;

extern char** environ;

TEST_CASE("facility read --mockup: a report with cooling balance and the failed pump (exit 1)") {
  auto r = run_process({ASTRAL_CLI, "facility", "read", "--mockup", mockup_dir("public-cooling-unit")}, 60);
  CHECK(r.exit_code == 1);  // a critical alarm
  CHECK(r.out.find("Cooling balance") != std::string::npos);
  CHECK(r.out.find("pump_failed") != std::string::npos);
  CHECK(r.out.find("heat_balance") != std::string::npos);
}

TEST_CASE("facility read --redfish over HTTP with credentials from the environment, --json") {
  MockupOptions mo;
  mo.credentials = {"ops", "env-only-secret"};
  MockBmc bmc(mockup_dir("public-power-shelf"), mo);
  auto r = run_process({ASTRAL_CLI, "facility", "read", "--redfish", bmc.url(), "--json"}, 60,
                       {"ASTRAL_REDFISH_USERNAME=ops", "ASTRAL_REDFISH_PASSWORD=env-only-secret"});
  CHECK(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j["snapshot"]["sources"][0]["ok"] == true);
  CHECK(j["snapshot"]["samples"].size() > 50);
  CHECK(j["derived"]["racks"][0]["it_power_watts"] == 6438);
  CHECK(r.out.find("env-only-secret") == std::string::npos);
  CHECK(r.err.find("env-only-secret") == std::string::npos);
  CHECK(bmc.service().open_sessions() == 0);
}

TEST_CASE("facility read: bad input is exit 2 with one line naming it") {
  SECTION("credentials in the URL") {
    auto r = run_process({ASTRAL_CLI, "facility", "read", "--redfish", "https://root:calvin@bmc.example"}, 30);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("ASTRAL_REDFISH_PASSWORD") != std::string::npos);
    CHECK(r.err.find("calvin") == std::string::npos);
  }
  SECTION("no source") {
    auto r = run_process({ASTRAL_CLI, "facility", "read"}, 30);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--redfish") != std::string::npos);
  }
  SECTION("a config with a typo") {
    TempDir dir;
    auto cfg = dir.file("sources.json", R"({"redfsh": []})");
    auto r = run_process({ASTRAL_CLI, "facility", "read", "--config", cfg}, 30);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("unknown key 'redfsh'") != std::string::npos);
  }
}

TEST_CASE("facility read --insecure warns, an unreachable BMC is exit 1") {
  MockBmc bmc(mockup_dir("public-power-shelf"), {}, MockBmc::Tls::valid);
  auto ok = run_process({ASTRAL_CLI, "facility", "read", "--redfish", bmc.url(), "--insecure"}, 60);
  CHECK(ok.exit_code == 0);
  CHECK(ok.err.find("verification is off") != std::string::npos);
  auto refused = run_process({ASTRAL_CLI, "facility", "read", "--redfish", bmc.url()}, 60);
  CHECK(refused.exit_code == 1);
  CHECK(refused.out.find("--ca-file") != std::string::npos);
  auto with_ca = run_process({ASTRAL_CLI, "facility", "read", "--redfish", bmc.url(), "--ca-file", test_pki().ca_cert}, 60);
  CHECK(with_ca.exit_code == 0);
}

TEST_CASE("facility read: IPMI recordings and the fake sysfs") {
  auto dcmi = run_process({ASTRAL_CLI, "facility", "read", "--ipmi-file",
                           astral::test::fixture("astral/facility/ipmitool/dcmi-power-reading-1.8.19.txt")}, 30);
  CHECK(dcmi.exit_code == 0);
  CHECK(dcmi.out.find("power 412 W") != std::string::npos);
  TempDir sys;
  extract_ttar(astral::test::fixture("sysfs/sys.ttar"), sys.path);
  auto hw = run_process({ASTRAL_CLI, "facility", "read", "--hwmon", "--rapl", "--rapl-interval", "0.05",
                         "--sysfs-root", sys.path, "--json"}, 30);
  CHECK(hw.exit_code == 0);
  json j = json::parse(hw.out);
  bool package = false, coretemp = false;
  for (const auto& s : j["snapshot"]["samples"]) {
    package |= s["entity"] == "package-0" && s["quantity"] == "power";
    coretemp |= s["entity"] == "coretemp@coretemp.0/temp1";
  }
  CHECK(package);
  CHECK(coretemp);
}

TEST_CASE("facility events writes .events.jsonl files, serve --once prints the exposition") {
  TempDir dir;
  std::string events = dir.path + "/cdu.events.jsonl";
  auto r = run_process({ASTRAL_CLI, "facility", "events", "--mockup", mockup_dir("public-cooling-unit"), "-o", events}, 30);
  CHECK(r.exit_code == 1);
  std::string text = slurp(events);
  REQUIRE_FALSE(text.empty());
  json e = json::parse(text.substr(0, text.find('\n')));
  CHECK(e["layer"] == "facility");
  CHECK(e["kind"] == "pump_failed");

  MockBmc cdu(mockup_dir("public-cooling-unit"));
  auto cfg = dir.file("sources.json", json{{"redfish", {{{"name", "cdu"}, {"url", cdu.url()}}}}}.dump());
  auto s = run_process({ASTRAL_CLI, "facility", "serve", "--config", cfg, "--once"}, 60);
  CHECK(s.exit_code == 0);
  CHECK(s.out.find("# TYPE astral_facility_heat_removed_watts gauge") != std::string::npos);
  CHECK(s.out.find("astral_facility_source_up{source=\"cdu\",reader=\"redfish\"} 1") != std::string::npos);
}

TEST_CASE("facility serve refuses an unauthenticated non-loopback listener") {
  TempDir dir;
  auto cfg = dir.file("sources.json", "{}");
  auto r = run_process({ASTRAL_CLI, "facility", "serve", "--config", cfg, "--listen", "0.0.0.0:0"}, 30);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--auth-file") != std::string::npos);
}

TEST_CASE("facility mockup + read + pue: a simulated rack over real HTTP, PUE from energy") {
  TempDir dir;
  std::string ports = dir.path + "/urls";
  std::vector<std::string> argv = {ASTRAL_CLI, "facility", "mockup", "--dir", mockup_dir("public-power-shelf"),
                                   "--simulate-energy", "--port-file", ports};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) == 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(ports) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string url = slurp(ports);
  url = url.substr(0, url.find('\n'));
  REQUIRE(url.rfind("http://127.0.0.1:", 0) == 0);
  auto cfg = dir.file("sources.json", json{{"redfish", {{{"name", "shelf"}, {"url", url}}}},
                                           {"pue", {{"it", {"shelf:PowerEquipment/PowerShelves/1/Branches/DC"}},
                                                    {"total", {"shelf:PowerEquipment/PowerShelves/1"}}}}}.dump());
  auto a = run_process({ASTRAL_CLI, "facility", "read", "--config", cfg, "--json"}, 60);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto b = run_process({ASTRAL_CLI, "facility", "read", "--config", cfg, "--json"}, 60);
  std::string fa = dir.file("a.json", a.out), fb = dir.file("b.json", b.out);
  auto pue = run_process({ASTRAL_CLI, "facility", "pue", "--config", cfg, "--from", fa, "--to", fb, "--json"}, 30);
  auto live = run_process({ASTRAL_CLI, "facility", "pue", "--config", cfg, "--interval", "0.3"}, 60);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(pue.exit_code == 0);
  json p = json::parse(pue.out);
  // Both counters advance at their own power: total 6438 W over IT 816.5 W.
  CHECK(p["pue"].get<double>() == Approx(6438.0 / 816.5).epsilon(0.05));
  CHECK(p["total_from_meter"] == true);
  CHECK(live.exit_code == 0);
  auto at = live.out.find("PUE ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(live.out.substr(at + 4)) == Approx(6438.0 / 816.5).epsilon(0.05));
}

TEST_CASE("facility site and --site: a bad layout is one line naming the element (exit 2), events carry site ids") {
  TempDir dir;
  std::string bad = dir.file("bad.json", R"({"components": [{"id": "a", "kind": "cdu", "fed_by": ["b"]},
                                                           {"id": "b", "kind": "cooling_loop", "fed_by": ["a"]}]})");
  auto r = run_process({ASTRAL_CLI, "facility", "site", "--check", bad}, 30);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "astral: error: " + bad + ": components (b): fed_by has a cycle: a -> b -> a\n");
  std::string site = dir.file("site.json", R"({"racks": [{"id": "rack-4", "hosts": ["node4"], "cooled_by": ["cdu"]}],
                                               "components": [{"id": "cdu", "kind": "cdu", "source": "public-cooling-unit"}]})");
  auto ok = run_process({ASTRAL_CLI, "facility", "site", "--check", site, "--hosts", "node4"}, 30);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("rack-4 (1 hosts) <- cdu") != std::string::npos);
  auto unknown = run_process({ASTRAL_CLI, "facility", "site", "--check", site, "--hosts", "node4", "node9"}, 30);
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err == "astral: " + site + ": hosts in no rack: node9\n");
  auto ev = run_process({ASTRAL_CLI, "facility", "events", "--mockup", mockup_dir("public-cooling-unit"), "--site", site}, 60);
  REQUIRE(ev.exit_code == 1);  // the failed pump
  json first = json::parse(ev.out.substr(0, ev.out.find('\n')));
  CHECK(first["component"]["site"] == "cdu");
  CHECK(first["keys"]["racks"] == json::array({"rack-4"}));
  CHECK(first["keys"]["hosts"] == json::array({"node4"}));
}
