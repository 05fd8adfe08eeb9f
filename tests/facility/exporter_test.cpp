// Prometheus exposition (naming conventions checked line by line), the exporter over real HTTP
// with authentication, config parsing, and alarms as monitor events (docs/event-model.md).
#include <catch2/catch.hpp>

#include <curl/curl.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "astral/facility/config.hpp"
#include "astral/facility/events.hpp"
#include "astral/facility/exporter.hpp"
#include "astral/facility/prometheus.hpp"
#include "astral/facility/redfish.hpp"
#include "run_process.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
using json = nlohmann::json;

namespace {

// Checks an exposition against the text format and Prometheus naming; returns the problems.
std::vector<std::string> exposition_problems(const std::string& text) {
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|\+Inf|-Inf)$)");
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  static const std::vector<std::string> kUnitSuffixes = {
      "_watts", "_joules", "_celsius", "_pascals", "_liters_per_minute", "_volts", "_amperes", "_hertz", "_ratio", "_rpm",
      "_volt_amperes", "_kilograms_per_cubic_meter", "_joules_per_kilogram_kelvin", "_cubic_meters_per_second", "_seconds"};
  static const std::set<std::string> kUnitless = {"astral_facility_health", "astral_facility_leak_state", "astral_facility_alarm",
                                                  "astral_facility_findings", "astral_facility_source_up",
                                                  "astral_facility_source_partial", "astral_facility_clock_event_reasons"};
  std::vector<std::string> problems;
  std::map<std::string, std::string> types;
  std::set<std::string> series;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream l(line.substr(7));
      std::string name, type;
      l >> name >> type;
      if (types.count(name)) problems.push_back("TYPE twice: " + name);
      types[name] = type;
      if (type == "counter" && name.size() > 6 && name.compare(name.size() - 6, 6, "_total") != 0)
        problems.push_back("counter without _total: " + name);
      if (type == "gauge" && name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0)
        problems.push_back("gauge named like a counter: " + name);
      std::string base = type == "counter" ? name.substr(0, name.size() - 6) : name;
      bool has_unit = std::any_of(kUnitSuffixes.begin(), kUnitSuffixes.end(), [&](const std::string& u) {
        return base.size() > u.size() && base.compare(base.size() - u.size(), u.size(), u) == 0;
      });
      bool ok_unitless = kUnitless.count(base) || base.find("polls") != std::string::npos || base.find("scrapes") != std::string::npos ||
                         base.find("quirks") != std::string::npos || base.find("requests") != std::string::npos ||
                         base.find("failures") != std::string::npos || base.find("_pue") != std::string::npos ||
                         base.find("event_stream") != std::string::npos || base.find("pushed_alarms") != std::string::npos;
      if (!has_unit && !ok_unitless) problems.push_back("no base unit in name: " + name);
      for (const char* bad : {"_percent", "_kw", "_kwh", "_micro", "_milli", "_kilopascals"})
        if (name.find(bad) != std::string::npos) problems.push_back("non-base unit in name: " + name);
      continue;
    }
    if (line.rfind("#", 0) == 0 || line.empty()) continue;
    std::smatch m;
    if (!std::regex_match(line, m, kSample)) {
      problems.push_back("not a sample line: " + line);
      continue;
    }
    std::string name = m[1];
    if (!types.count(name)) problems.push_back("sample before its TYPE: " + name);
    if (name.rfind("astral_facility_", 0) != 0) problems.push_back("no astral_facility_ prefix: " + name);
    if (!series.insert(name + "{" + std::string(m[3]) + "}").second) problems.push_back("duplicate series: " + line);
  }
  return problems;
}

std::size_t on_body(char* d, std::size_t s, std::size_t n, void* u) {
  static_cast<std::string*>(u)->append(d, s * n);
  return s * n;
}

std::pair<long, std::string> http_get(const std::string& url, const std::string& userpwd = "") {
  CURL* c = curl_easy_init();
  std::string body;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  if (!userpwd.empty()) curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
  curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  return {status, body};
}

std::string rack_config(const MockBmc& shelf, const MockBmc& cdu) {
  json j = {
      {"interval_s", 60},
      {"poll", {{"timeout_s", 2}, {"retries", 1}, {"concurrency", 4}}},
      {"redfish", {{{"name", "shelf"}, {"url", shelf.url()}}, {{"name", "cdu"}, {"url", cdu.url()}}}},
      {"racks", {{{"name", "rack42"}, {"budget_watts", 8000}, {"it_power", {"shelf:PowerEquipment/PowerShelves/1"}},
                  {"cooling", {"cdu:*SecondaryCoolantConnectors/*"}}}}},
      {"pue", {{"it", {"shelf:PowerEquipment/PowerShelves/1/Branches/DC"}}, {"total", {"shelf:PowerEquipment/PowerShelves/1"}}}},
      {"chains", {{"ac", {{{"stage", "UPS"}, {"efficiency", 0.95}}, {{"stage", "PSU"}, {"efficiency", 0.94}}}},
                  {"hvdc", {{{"stage", "rectifier"}, {"efficiency", 0.975}}}}}}};
  return j.dump();
}

}  // namespace

TEST_CASE("exposition of every mockup follows the text format and Prometheus naming") {
  Snapshot s;
  for (const char* m : {"public-cooling-unit", "public-liquid-cooled-server", "public-power-shelf", "public-pdu", "public-rackmount1"})
    s.merge(read_redfish_mockup(mockup_dir(m), m));
  s.merge(read_redfish_mockup(quirky_dir(), "quirky"));
  DeriveConfig cfg;
  cfg.ac_chain = {{"UPS", 0.95}};
  cfg.hvdc_chain = {{"rectifier", 0.97}};
  Derived d = derive(s, cfg);
  ExporterCounters counters;
  counters.polls = 3;
  counters.quirks = s.quirks;
  std::string text = render_prometheus(s, &d, &counters);
  auto problems = exposition_problems(text);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
  CHECK(text.find("astral_facility_energy_joules_total{host=\"public-pdu\"") != std::string::npos);
  CHECK(text.find("# TYPE astral_facility_energy_joules_total counter") != std::string::npos);
  CHECK(text.find("astral_facility_coolant_flow_liters_per_minute{") != std::string::npos);
  CHECK(text.find("astral_facility_coolant_supply_pressure_pascals{") != std::string::npos);
  CHECK(text.find("astral_facility_humidity_ratio{") != std::string::npos);
  CHECK(text.find("astral_facility_alarm{host=\"public-cooling-unit\",kind=\"pump\"") != std::string::npos);
  CHECK(text.find("astral_facility_chain_efficiency_ratio{chain=\"hvdc\"} 0.97") != std::string::npos);
  CHECK(text.find("astral_facility_quirks_total{quirk=\"nan_string\"}") != std::string::npos);
}

TEST_CASE("label values are escaped, NaN values produce no series") {
  Snapshot s;
  Sample x;
  x.host = "h";
  x.entity = "a \"quoted\" \\ path\nline";
  x.quantity = "power";
  x.unit = Unit::watts;
  x.value = 5;
  s.samples.push_back(x);
  x.entity = "nan";
  x.value = std::nan("");
  s.samples.push_back(x);
  std::string text = render_prometheus(s);
  CHECK(text.find(R"(entity="a \"quoted\" \\ path\nline")") != std::string::npos);
  CHECK(text.find("entity=\"nan\"") == std::string::npos);
  CHECK(exposition_problems(text).empty());
  CHECK(escape_label_value("a\"b") == "a\\\"b");
}

TEST_CASE("sources.json: parsed with paths relative to the file, mistakes are one clear line") {
  TempDir dir;
  auto cred = dir.file("bmc.cred", "operator:secret\n");
  chmod(cred.c_str(), 0600);
  std::string good = R"({
    "interval_s": 30,
    "redfish": [{"name": "cdu", "url": "https://10.0.0.5", "credentials_file": "bmc.cred", "ca_file": "ca.pem"}],
    "hwmon": true,
    "ipmi": {"files": ["dcmi.txt"]},
    "racks": [{"name": "r1", "budget_watts": 120000, "it_power": ["shelf:PowerEquipment/PowerShelves/*"]}],
    "chains": {"ac": [{"stage": "UPS", "efficiency": 0.95}], "hvdc": [{"stage": "rectifier", "efficiency": 0.975}]},
    "pue": {"it": ["shelf:*"], "facility": ["cdu:*"]}
  })";
  FacilityConfig c = parse_config(good, dir.path, "sources.json");
  CHECK(c.interval == std::chrono::seconds(30));
  REQUIRE(c.redfish.size() == 1);
  CHECK(c.redfish[0].credentials.username == "operator");
  CHECK(c.redfish[0].ca_file == dir.path + "/ca.pem");
  CHECK(c.hwmon_root == "/");
  CHECK(c.ipmi_files == std::vector<std::string>{dir.path + "/dcmi.txt"});
  CHECK(c.derive.racks[0].budget_w == 120000);
  CHECK(c.derive.hvdc_chain[0].efficiency == 0.975);
  auto error_of = [&](const std::string& text) {
    try {
      parse_config(text, dir.path, "sources.json");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(R"({"redfsh": []})").find("unknown key 'redfsh'") != std::string::npos);
  CHECK(error_of(R"({"redfish": [{"url": "https://b", "password": "x"}]})").find("credentials do not belong") != std::string::npos);
  CHECK(error_of(R"({"redfish": [{"url": "https://u:p@b"}]})").find("argv and logs") != std::string::npos);
  CHECK(error_of(R"({"chains": {"ac": [{"stage": "UPS", "efficiency": 95}]}})").find("(0, 1]") != std::string::npos);
  CHECK(error_of(R"({"redfish": [{"name": "a", "url": "https://b"}, {"name": "a", "url": "https://c"}]})").find("duplicate") != std::string::npos);
  CHECK(error_of("not json").find("sources.json") == 0);
}

TEST_CASE("exporter: polls on its own, serves /metrics over HTTP with basic auth, derives rack figures") {
  MockBmc shelf(mockup_dir("public-power-shelf"));
  MockBmc cdu(mockup_dir("public-cooling-unit"));
  TempDir dir;
  FacilityConfig c = parse_config(rack_config(shelf, cdu), dir.path, "sources.json");
  ExporterOptions eo;
  eo.scrape_credentials = Credentials{"prom", "scrape-secret"};
  eo.events_path = dir.path + "/facility.events.jsonl";
  Exporter ex(c, eo);
  HttpServer server(HttpServerOptions{}, [&](const HttpRequest& r) { return ex.handle(r); });
  CHECK(http_get(server.url() + "/healthz").first == 503);  // nothing polled yet
  ex.poll_once();
  CHECK(http_get(server.url() + "/healthz").first == 200);
  CHECK(http_get(server.url() + "/metrics").first == 401);
  CHECK(http_get(server.url() + "/metrics", "prom:wrong").first == 401);
  auto [status, text] = http_get(server.url() + "/metrics", "prom:scrape-secret");
  CHECK(status == 200);
  CHECK(exposition_problems(text).empty());
  CHECK(text.find("astral_facility_rack_power_watts{rack=\"rack42\"} 6438") != std::string::npos);
  CHECK(text.find("astral_facility_rack_power_budget_ratio{rack=\"rack42\"}") != std::string::npos);
  CHECK(text.find("astral_facility_source_up{source=\"cdu\",reader=\"redfish\"} 1") != std::string::npos);
  CHECK(text.find("astral_facility_polls_total 1") != std::string::npos);
  CHECK(text.find("astral_facility_liquid_heat_capture_ratio{rack=\"rack42\"}") != std::string::npos);
  CHECK(text.find("astral_facility_chain_input_power_watts{chain=\"ac\"}") != std::string::npos);
  // The failed pump went to the events file once; a second poll with nothing new adds nothing.
  std::ifstream events(eo.events_path);
  std::string first_poll((std::istreambuf_iterator<char>(events)), std::istreambuf_iterator<char>());
  CHECK(first_poll.find("\"kind\":\"pump_failed\"") != std::string::npos);
  ex.poll_once();
  std::ifstream again(eo.events_path);
  std::string both((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  CHECK(both == first_poll);
  CHECK(ex.counters().polls == 2);
}

TEST_CASE("exporter: a BMC that stops answering becomes source_up 0 and a counted failure") {
  auto shelf = std::make_unique<MockBmc>(mockup_dir("public-power-shelf"));
  MockBmc cdu(mockup_dir("public-cooling-unit"));
  TempDir dir;
  FacilityConfig c = parse_config(rack_config(*shelf, cdu), dir.path, "sources.json");
  c.poll.timeout = std::chrono::milliseconds(300);
  Exporter ex(c);
  ex.poll_once();
  shelf.reset();  // the shelf's BMC goes away
  ex.poll_once();
  std::string text = ex.scrape();
  CHECK(text.find("astral_facility_source_up{source=\"shelf\",reader=\"redfish\"} 0") != std::string::npos);
  CHECK(text.find("astral_facility_source_failures_total{source=\"shelf\"} 1") != std::string::npos);
  CHECK(text.find("astral_facility_source_up{source=\"cdu\",reader=\"redfish\"} 1") != std::string::npos);
}

TEST_CASE("alarms become normalised monitor events, changes are tracked between polls") {
  Snapshot s = read_redfish_mockup(mockup_dir("public-cooling-unit"), "cdu-bmc");
  s.merge(read_redfish_mockup(quirky_dir(), "tray7"));
  std::ostringstream out;
  write_events(out, s.alarms);
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  static const std::regex kTime(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$)");
  std::set<std::string> layers, kinds;
  while (std::getline(lines, line)) {
    ++n;
    json e = json::parse(line);
    CHECK(std::regex_match(e.at("time").get<std::string>(), kTime));
    CHECK(e.at("time_confidence_s").is_number());
    CHECK(e.at("host").is_string());
    CHECK(e.at("component").at("kind").is_string());
    CHECK(e.at("component").at("host") == e.at("host"));
    CHECK(e.at("keys").is_object());
    CHECK(e.at("source").is_object());
    std::string sev = e.at("severity");
    CHECK((sev == "warning" || sev == "error" || sev == "critical" || sev == "info"));
    layers.insert(e.at("layer").get<std::string>());
    kinds.insert(e.at("component").at("kind").get<std::string>() + ":" + e.at("kind").get<std::string>());
  }
  CHECK(n == static_cast<int>(s.alarms.size()));
  CHECK(kinds.count("pump:pump_failed"));
  CHECK(kinds.count("psu:psu_fault"));
  CHECK(kinds.count("host:leak_detected"));  // a leak in a server tray belongs to that host
  CHECK(layers.count("facility"));
  CHECK(layers.count("bmc"));

  AlarmTracker tracker;
  auto first = tracker.update(s.alarms);
  CHECK(first.size() == s.alarms.size());
  CHECK(tracker.update(s.alarms).empty());
  std::vector<Alarm> fewer(s.alarms.begin() + 1, s.alarms.end());
  auto cleared = tracker.update(fewer);
  REQUIRE(cleared.size() == 1);
  CHECK(cleared[0].type == s.alarms[0].type + "_cleared");
  CHECK(cleared[0].severity == Severity::info);
}
