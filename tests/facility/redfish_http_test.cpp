// The Redfish reader against a real HTTP(S) server on loopback serving the DMTF mockups: TLS with a
// test CA, basic and session authentication, malformed JSON, 401/404/500 answers, slow servers,
// retries with backoff, deadlines and bounded concurrency.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "astral/facility/redfish.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
using namespace std::chrono_literals;

namespace {

PollOptions fast_options() {
  PollOptions o;
  o.timeout = 400ms;
  o.connect_timeout = 400ms;
  o.retries = 2;
  o.backoff = 5ms;
  o.deadline = 10s;
  return o;
}

RedfishEndpoint endpoint(const std::string& url) {
  RedfishEndpoint e;
  e.url = url;
  e.name = "bmc";
  return e;
}

// A crawl that asks for each resource (one level of $expand): the tests that fault one resource
// need its own request, which a deep $expand of its parent would not make.
RedfishEndpoint per_resource(const std::string& url) {
  RedfishEndpoint e = endpoint(url);
  e.expand_levels = 1;
  return e;
}

const Sample* find(const Snapshot& s, const std::string& entity, const std::string& quantity) {
  return s.find("", entity, quantity);
}

}  // namespace

TEST_CASE("reads the liquid-cooled server mockup over HTTP, its chassis subtree in one $expand") {
  MockBmc bmc(mockup_dir("public-liquid-cooled-server"));
  Snapshot s = read_redfish(endpoint(bmc.url()), fast_options());
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].ok);
  CHECK_FALSE(s.sources[0].partial);
  const Sample* psu = find(s, "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1", "input_power");
  REQUIRE(psu);
  CHECK(psu->value == Approx(937.4));
  CHECK(psu->kind == EntityKind::psu);
  CHECK(psu->host == "bmc");
  const Sample* chassis = find(s, "Chassis/1U", "power");
  REQUIRE(chassis);
  CHECK(chassis->value == Approx(374));
  // The service expands 6 levels: the chassis collection brings power, cooling and every sensor
  // along, so the whole read is the service root and one request.
  CHECK(bmc.hits("/redfish/v1/Chassis/1U/Sensors/CPU1Temp") == 0);
  CHECK(bmc.hits("/redfish/v1/Chassis/1U/Sensors") == 0);
  CHECK(bmc.hits("/redfish/v1/Chassis") == 1);
  CHECK(s.sources[0].requests == 2);
  CHECK(s.sources[0].requests == static_cast<std::uint64_t>(bmc.total_hits()));
  // The sensor the chassis temperature excerpt names disagrees with it (§1.4): a finding, not a failure.
  CHECK(has_finding(s, "excerpt_mismatch", "CPU1Temp"));
}

TEST_CASE("HTTPS: verified against the test CA, refused without it, --insecure is explicit") {
  MockBmc bmc(mockup_dir("public-cooling-unit"), {}, MockBmc::Tls::valid);
  REQUIRE(bmc.url().rfind("https://", 0) == 0);
  RedfishEndpoint e = endpoint(bmc.url());

  SECTION("the system trust store does not know the test CA: the read fails with a hint") {
    Snapshot s = read_redfish(e, fast_options());
    CHECK_FALSE(s.sources[0].ok);
    CHECK(s.sources[0].error.find("--ca-file") != std::string::npos);
    CHECK(s.samples.empty());
  }
  SECTION("with the CA the read succeeds") {
    e.ca_file = test_pki().ca_cert;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);
    CHECK(find(s, "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1", "heat_removed"));
    CHECK_FALSE(has_finding(s, "insecure"));
  }
  SECTION("verification off: the read succeeds and says so") {
    e.verify_tls = false;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);
    CHECK(has_finding(s, "insecure"));
  }
}

TEST_CASE("HTTPS: a certificate for another host name is refused even with the right CA") {
  MockBmc bmc(mockup_dir("public-cooling-unit"), {}, MockBmc::Tls::wrong_host);
  RedfishEndpoint e = endpoint(bmc.url());
  e.ca_file = test_pki().ca_cert;
  Snapshot s = read_redfish(e, fast_options());
  CHECK_FALSE(s.sources[0].ok);
  CHECK(s.sources[0].error.find("TLS verification failed") != std::string::npos);
}

TEST_CASE("basic authentication: right credentials read, wrong ones fail without leaking them") {
  MockupOptions mo;
  mo.credentials = {"operator", "s3cret-Pa55"};
  mo.allow_sessions = false;
  MockBmc bmc(mockup_dir("public-power-shelf"), mo);
  RedfishEndpoint e = endpoint(bmc.url());
  e.auth = AuthMode::basic;

  SECTION("no credentials: the error says how to give them") {
    e.auth = AuthMode::automatic;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);  // the service root is public; everything below it is not
    CHECK(s.sources[0].partial);
    CHECK(has_finding(s, "http", "ASTRAL_REDFISH_USERNAME"));
    CHECK(s.samples.empty());
  }
  SECTION("right credentials") {
    e.credentials = mo.credentials;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);
    CHECK_FALSE(s.sources[0].partial);
    CHECK(find(s, "PowerEquipment/PowerShelves/1", "power"));
    auto seen = bmc.auth_headers_seen();
    REQUIRE_FALSE(seen.empty());
    CHECK(seen.front().rfind("Basic ", 0) == 0);
  }
  SECTION("wrong password") {
    e.credentials = {"operator", "wrong-Pa55"};
    Snapshot s = read_redfish(e, fast_options());
    CHECK(has_finding(s, "http", "credentials rejected"));
    for (const auto& f : s.findings) CHECK(f.message.find("wrong-Pa55") == std::string::npos);
    CHECK(s.sources[0].error.find("wrong-Pa55") == std::string::npos);
  }
}

TEST_CASE("session authentication: logs in, uses the token, logs out, auto falls back to basic") {
  MockupOptions mo;
  mo.credentials = {"admin", "hunter2-hunter2"};
  SECTION("session") {
    mo.allow_basic = false;
    MockBmc bmc(mockup_dir("public-cooling-unit"), mo);
    RedfishEndpoint e = endpoint(bmc.url());
    e.credentials = mo.credentials;
    e.auth = AuthMode::session;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);
    CHECK_FALSE(s.sources[0].partial);
    CHECK(find(s, "ThermalEquipment/CDUs/1/Pumps/2", "health"));
    CHECK(bmc.hits("/redfish/v1/SessionService/Sessions") == 1);
    CHECK(bmc.service().open_sessions() == 0);  // the session was deleted at the end
    for (const auto& h : bmc.auth_headers_seen()) CHECK(h.rfind("X-Auth-Token ", 0) == 0);
  }
  SECTION("wrong password: login rejected") {
    MockBmc bmc(mockup_dir("public-cooling-unit"), mo);
    RedfishEndpoint e = endpoint(bmc.url());
    e.credentials = {"admin", "not-it"};
    e.auth = AuthMode::session;
    Snapshot s = read_redfish(e, fast_options());
    CHECK_FALSE(s.sources[0].ok);
    CHECK(s.sources[0].error.find("login rejected") != std::string::npos);
    CHECK(s.sources[0].error.find("not-it") == std::string::npos);
  }
  SECTION("a service without sessions: auto falls back to basic") {
    mo.allow_sessions = false;
    MockBmc bmc(mockup_dir("public-cooling-unit"), mo);
    RedfishEndpoint e = endpoint(bmc.url());
    e.credentials = mo.credentials;
    Snapshot s = read_redfish(e, fast_options());
    CHECK(s.sources[0].ok);
    CHECK_FALSE(s.sources[0].partial);
    CHECK(s.quirks.count("no_session_service") == 1);
  }
}

TEST_CASE("an expired session token is renewed once and the crawl continues") {
  MockupOptions mo;
  mo.credentials = {"admin", "hunter2-hunter2"};
  mo.allow_basic = false;
  MockBmc bmc(mockup_dir("public-cooling-unit"), mo);
  // The BMC restarts while the chassis is being read: the token in use becomes void.
  Fault reboot;
  reboot.times = 1;
  reboot.expire_sessions = true;
  bmc.fault("/redfish/v1/Chassis/CDU/EnvironmentMetrics", reboot);
  RedfishEndpoint e = per_resource(bmc.url());
  e.credentials = mo.credentials;
  e.auth = AuthMode::session;
  Snapshot s = read_redfish(e, fast_options());
  CHECK(s.sources[0].ok);
  CHECK_FALSE(s.sources[0].partial);
  CHECK(bmc.hits("/redfish/v1/SessionService/Sessions") == 2);
  CHECK(find(s, "ThermalEquipment/CDUs/1/Pumps/2", "pump_speed"));
}

TEST_CASE("malformed JSON, 404 and 500 on single resources are findings, the rest is read") {
  MockBmc bmc(mockup_dir("public-cooling-unit"));
  bmc.fault("/redfish/v1/ThermalEquipment/CDUs/1/EnvironmentMetrics", Fault{0, "{\"Name\": \"Env\", \"Temper", 0ms, -1});
  bmc.fault("/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection", Fault{404, {}, 0ms, -1});
  bmc.fault("/redfish/v1/ThermalEquipment/CDUs/1/Filters", Fault{500, {}, 0ms, -1});
  Snapshot s = read_redfish(per_resource(bmc.url()), fast_options());
  CHECK(s.sources[0].ok);
  CHECK(s.sources[0].partial);
  CHECK(has_finding(s, "malformed_json", "CDUs/1/EnvironmentMetrics"));
  CHECK(has_finding(s, "http", "HTTP 404"));
  CHECK(has_finding(s, "http", "HTTP 500"));
  CHECK(s.quirks["malformed_json"] == 1);
  // A 500 is retried (2 retries = 3 tries); a 404 is not.
  CHECK(bmc.hits("/redfish/v1/ThermalEquipment/CDUs/1/Filters") == 3);
  CHECK(bmc.hits("/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection") == 1);
  CHECK_FALSE(find(s, "ThermalEquipment/CDUs/1/Filters/1", "service_life_used"));
  // Everything else still arrived, including the failed pump's alarm.
  CHECK(find(s, "ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1", "coolant_flow"));
  CHECK(std::any_of(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.type == "pump_failed"; }));
}

TEST_CASE("a transient 503 is retried with backoff and then succeeds") {
  MockBmc bmc(mockup_dir("public-cooling-unit"));
  bmc.fault("/redfish/v1/ThermalEquipment/CDUs", Fault{503, {}, 0ms, 2});
  Snapshot s = read_redfish(per_resource(bmc.url()), fast_options());
  CHECK(s.sources[0].ok);
  CHECK_FALSE(s.sources[0].partial);
  CHECK(bmc.hits("/redfish/v1/ThermalEquipment/CDUs") == 3);
  CHECK(find(s, "ThermalEquipment/CDUs/1", "coolant_density"));
}

TEST_CASE("without $expand, members are fetched one by one and sensors only as a fallback") {
  TempDir dir;
  std::filesystem::copy(mockup_dir("public-cooling-unit"), dir.path + "/m", std::filesystem::copy_options::recursive);
  auto root = nlohmann::json::parse(std::ifstream(dir.path + "/m/index.json"));
  root.erase("ProtocolFeaturesSupported");
  std::ofstream(dir.path + "/m/index.json") << root.dump();
  MockBmc bmc(dir.path + "/m");
  Snapshot s = read_redfish(endpoint(bmc.url()), fast_options());
  CHECK(s.sources[0].ok);
  CHECK(bmc.hits("/redfish/v1/ThermalEquipment/CDUs/1/Pumps/2") == 1);
  // The CDU chassis reports no power, so its sensors are read (one request each) as the fallback.
  CHECK(bmc.hits("/redfish/v1/Chassis/CDU/Sensors/SystemTemperature") == 1);
  CHECK(find(s, "ThermalEquipment/CDUs/1/Pumps/2", "health"));
}

TEST_CASE("a service root that answers 500 or garbage fails the source with one line") {
  MockBmc bmc(mockup_dir("public-cooling-unit"));
  SECTION("500") {
    bmc.fault("/redfish/v1", Fault{500, {}, 0ms, -1});
    Snapshot s = read_redfish(endpoint(bmc.url()), fast_options());
    CHECK_FALSE(s.sources[0].ok);
    CHECK(s.sources[0].error.find("HTTP 500") != std::string::npos);
    CHECK(bmc.hits("/redfish/v1") == 3);
  }
  SECTION("not JSON") {
    bmc.fault("/redfish/v1", Fault{0, "<html>login</html>", 0ms, -1});
    Snapshot s = read_redfish(endpoint(bmc.url()), fast_options());
    CHECK_FALSE(s.sources[0].ok);
    CHECK(s.sources[0].error.find("malformed JSON") != std::string::npos);
    CHECK(s.sources[0].error.find('\n') == std::string::npos);
  }
}

TEST_CASE("a slow resource times out, is retried, and the rest of the service is still read") {
  MockBmc bmc(mockup_dir("public-cooling-unit"));
  bmc.fault("/redfish/v1/ThermalEquipment/CDUs/1/Pumps", Fault{0, {}, 1500ms, -1});
  PollOptions o = fast_options();
  o.timeout = 150ms;
  o.retries = 1;
  auto t0 = std::chrono::steady_clock::now();
  Snapshot s = read_redfish(per_resource(bmc.url()), o);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s.sources[0].ok);
  CHECK(s.sources[0].partial);
  CHECK(has_finding(s, "http", "CDUs/1/Pumps"));
  CHECK(bmc.hits("/redfish/v1/ThermalEquipment/CDUs/1/Pumps") == 2);
  CHECK_FALSE(find(s, "ThermalEquipment/CDUs/1/Pumps/1", "pump_speed"));
  CHECK(find(s, "ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1", "heat_removed"));
  CHECK(took < 3s);
}

TEST_CASE("the per-endpoint deadline bounds a BMC that answers everything slowly") {
  MockBmc bmc(mockup_dir("public-pdu"));
  for (const char* p : {"/redfish/v1/Chassis", "/redfish/v1/PowerEquipment", "/redfish/v1/PowerEquipment/RackPDUs",
                        "/redfish/v1/PowerEquipment/FloorPDUs", "/redfish/v1/PowerEquipment/TransferSwitches"})
    bmc.fault(p, Fault{0, {}, 120ms, -1});
  PollOptions o = fast_options();
  o.deadline = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  Snapshot s = read_redfish(per_resource(bmc.url()), o);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s.sources[0].partial);
  std::string findings;
  for (const Finding& f : s.findings) findings += f.check + ": " + f.message + "\n";
  INFO(findings);
  CHECK(has_finding(s, "deadline"));
  CHECK(took < 1500ms);
}

TEST_CASE("an endpoint that refuses connections fails fast with the address in the message") {
  int port;
  {
    MockBmc gone(mockup_dir("public-pdu"));
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  PollOptions o = fast_options();
  o.retries = 1;
  Snapshot s = read_redfish(endpoint("http://127.0.0.1:" + std::to_string(port)), o);
  CHECK_FALSE(s.sources[0].ok);
  CHECK(s.sources[0].error.find("127.0.0.1") != std::string::npos);
}

TEST_CASE("many endpoints are polled with bounded concurrency, results in input order") {
  MockBmc bmc(mockup_dir("public-liquid-cooled-server"), {}, MockBmc::Tls::none, 12);
  // Each resource takes a little while, so unbounded polling would pile up requests.
  bmc.fault("/redfish/v1/Chassis", Fault{0, {}, 20ms, -1});
  std::vector<RedfishEndpoint> endpoints;
  for (std::size_t i = 0; i < 12; ++i) {
    RedfishEndpoint e = endpoint(bmc.url(i));
    e.name = "bmc" + std::to_string(i);
    endpoints.push_back(e);
  }
  PollOptions o = fast_options();
  o.concurrency = 3;
  Snapshot s = poll_redfish(endpoints, o);
  REQUIRE(s.sources.size() == 12);
  for (std::size_t i = 0; i < 12; ++i) {
    CHECK(s.sources[i].name == "bmc" + std::to_string(i));
    CHECK(s.sources[i].ok);
  }
  CHECK(bmc.max_in_flight() <= 3);
  CHECK(bmc.max_in_flight() >= 2);
  CHECK(s.find("bmc11", "Chassis/1U", "power"));
}

TEST_CASE("each endpoint's crawl reuses one connection and closes it when the crawl ends") {
  for (PollEngine engine : {PollEngine::event_loop, PollEngine::threads}) {
    INFO((engine == PollEngine::event_loop ? "event loop" : "thread pool"));
    MockBmc bmc(mockup_dir("public-liquid-cooled-server"), {}, MockBmc::Tls::none, 6);
    std::vector<RedfishEndpoint> endpoints;
    for (std::size_t i = 0; i < 6; ++i) endpoints.push_back(per_resource(bmc.url(i)));
    PollOptions o = fast_options();
    o.concurrency = 2;
    o.engine = engine;
    Snapshot s = poll_redfish(endpoints, o);
    REQUIRE(s.sources.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
      CHECK(s.sources[i].ok);
      CHECK(s.sources[i].requests >= 10);
      CHECK(bmc.connections(i) == 1);  // keep-alive: every request of the crawl on one connection
    }
    // Two crawls at a time, one connection each: the finished endpoints' connections are closed,
    // not left idle in a cache shared by every endpoint (with the multi handle's cache there were
    // up to 4). The server samples when it handles a service root, and a server thread can be that
    // late, so one more crawl may have connected meanwhile.
    CHECK(bmc.max_open_connections() >= 1);
    CHECK(bmc.max_open_connections() <= 3);
    CHECK(bmc.open_connections() == 0);  // and none is left when the poll returns
  }
}

namespace {

// What a poll says, without times: the same endpoints must read the same whichever engine waits.
std::vector<std::string> outcome(const Snapshot& s) {
  std::vector<std::string> lines;
  for (const SourceStatus& src : s.sources)
    lines.push_back("source " + src.name + " ok=" + std::to_string(src.ok) + " partial=" + std::to_string(src.partial));
  for (const Sample& m : s.samples) lines.push_back("sample " + m.host + " " + m.entity + " " + m.quantity);
  for (const Finding& f : s.findings) lines.push_back("finding " + f.host + " " + f.check + " " + f.entity);
  for (const Alarm& a : s.alarms) lines.push_back("alarm " + a.host + " " + a.type);
  return lines;
}

// A 503 twice (retried after a pause), a resource slower than the timeout, a refused port, and
// healthy BMCs, all in flight at once.
Snapshot poll_troubled_site(PollEngine engine, std::map<std::string, int>* hits) {
  MockBmc cdu(mockup_dir("public-cooling-unit"));
  cdu.fault("/redfish/v1/ThermalEquipment/CDUs", Fault{503, {}, 0ms, 2});
  MockBmc slow(mockup_dir("public-cooling-unit"));
  slow.fault("/redfish/v1/ThermalEquipment/CDUs/1/Pumps", Fault{0, {}, 1500ms, -1});
  MockBmc servers(mockup_dir("public-liquid-cooled-server"), {}, MockBmc::Tls::none, 4);
  int refused_port;
  {
    MockBmc gone(mockup_dir("public-pdu"));
    refused_port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  std::vector<RedfishEndpoint> endpoints;
  auto add = [&](const std::string& url, const std::string& name) {
    RedfishEndpoint e = per_resource(url);
    e.name = name;
    endpoints.push_back(e);
  };
  add(cdu.url(), "cdu");
  add(slow.url(), "slow");
  add("http://127.0.0.1:" + std::to_string(refused_port), "refused");
  for (std::size_t i = 0; i < 4; ++i) add(servers.url(i), "server" + std::to_string(i));
  PollOptions o = fast_options();
  o.timeout = 150ms;
  o.retries = 2;
  o.concurrency = 7;
  o.engine = engine;
  Snapshot s = poll_redfish(endpoints, o);
  (*hits)["cdu"] = cdu.hits("/redfish/v1/ThermalEquipment/CDUs");
  (*hits)["slow"] = slow.hits("/redfish/v1/ThermalEquipment/CDUs/1/Pumps");
  return s;
}

}  // namespace

TEST_CASE("the event loop reads a troubled site exactly as the thread pool does") {
  std::map<std::string, int> loop_hits, pool_hits;
  auto t0 = std::chrono::steady_clock::now();
  Snapshot loop = poll_troubled_site(PollEngine::event_loop, &loop_hits);
  auto loop_took = std::chrono::steady_clock::now() - t0;
  Snapshot pool = poll_troubled_site(PollEngine::threads, &pool_hits);
  REQUIRE(loop.sources.size() == 7);
  CHECK(loop.sources[0].ok);
  CHECK_FALSE(loop.sources[0].partial);  // the 503s were waited out on the fiber
  CHECK(loop.sources[1].partial);        // the slow pumps timed out three times
  CHECK_FALSE(loop.sources[2].ok);
  CHECK(loop.sources[2].error.find("127.0.0.1") != std::string::npos);
  CHECK(loop.samples.size() > 100);
  CHECK(loop_hits == pool_hits);
  CHECK(loop_hits["cdu"] == 3);
  CHECK(loop_hits["slow"] == 3);
  CHECK(outcome(loop) == outcome(pool));
  // The slow BMC's 3 x 150 ms did not hold up the others: they ran beside it on the one thread.
  CHECK(loop_took < 3s);
}

TEST_CASE("Redfish URLs: credentials and resource paths are refused, roots normalised") {
  CHECK(normalise_base_url("https://bmc1.example") == "https://bmc1.example");
  CHECK(normalise_base_url("bmc1.example:8443") == "https://bmc1.example:8443");
  CHECK(normalise_base_url("http://127.0.0.1:8000/redfish/v1/") == "http://127.0.0.1:8000");
  CHECK(normalise_base_url("https://[::1]:443") == "https://[::1]:443");
  try {
    normalise_base_url("https://root:calvin@bmc1.example");
    FAIL("credentials in a URL must be refused");
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    CHECK(msg.find("calvin") == std::string::npos);
    CHECK(msg.find("ASTRAL_REDFISH_PASSWORD") != std::string::npos);
  }
  CHECK_THROWS_AS(normalise_base_url("ftp://bmc1"), std::invalid_argument);
  CHECK_THROWS_AS(normalise_base_url("https://bmc1/redfish/v1/Chassis"), std::invalid_argument);
  CHECK_THROWS_AS(normalise_base_url(""), std::invalid_argument);
}

TEST_CASE("credentials come from a file (user:password or JSON) or the environment") {
  TempDir dir;
  std::string warning;
  auto plain = dir.file("bmc.cred", "operator:pa:ss\n");
  chmod(plain.c_str(), 0600);
  Credentials c = credentials_from_file(plain, &warning);
  CHECK(c.username == "operator");
  CHECK(c.password == "pa:ss");
  CHECK(warning.empty());
  auto js = dir.file("bmc.json", R"({"username": "u", "password": "p"})");
  chmod(js.c_str(), 0644);
  c = credentials_from_file(js, &warning);
  CHECK(c.username == "u");
  CHECK(warning.find("chmod 600") != std::string::npos);
  CHECK_THROWS(credentials_from_file(dir.file("bad.cred", "no colon here\n")));
  CHECK_THROWS(credentials_from_file(dir.path + "/missing"));
  setenv("ASTRAL_TEST_BMC_USERNAME", "envuser", 1);
  setenv("ASTRAL_TEST_BMC_PASSWORD", "envpass", 1);
  c = credentials_from_env("ASTRAL_TEST_BMC");
  CHECK(c.username == "envuser");
  CHECK(c.password == "envpass");
}
