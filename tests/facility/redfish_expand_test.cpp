// $expand with $levels (DSP0266 §7.3): the mockup expands subordinate resources several levels
// deep, and the reader asks for whole subtrees where the service allows it, reading exactly what
// it reads resource by resource, in far fewer requests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/facility/config.hpp"
#include "astral/facility/mockup.hpp"
#include "astral/facility/redfish.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

json get_expanded(MockupService& service, const std::string& path, const std::string& query = {}) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  r.query = query;
  r.target = query.empty() ? path : path + "?" + query;
  HttpResponse answer = service.handle(r);
  REQUIRE(answer.status == 200);
  return json::parse(answer.body);
}

PollOptions expand_poll_options() {
  PollOptions o;
  o.timeout = 2s;
  o.retries = 0;
  o.deadline = 10s;
  return o;
}

RedfishEndpoint levelled(const std::string& url, int levels) {
  RedfishEndpoint e;
  e.url = url;
  e.name = "bmc";
  e.expand_levels = levels;
  return e;
}

// Everything a read says, values included, in a stable order.
std::vector<std::string> expand_readings(const Snapshot& s) {
  std::vector<std::string> lines;
  for (const Sample& m : s.samples)
    lines.push_back(fmt::format("sample {} {} {} {}", m.entity, m.quantity, m.value, m.kind == EntityKind::psu));
  for (const Alarm& a : s.alarms) lines.push_back(fmt::format("alarm {} {} {}", a.entity, a.type, a.message));
  for (const Finding& f : s.findings) lines.push_back(fmt::format("finding {} {} {}", f.entity, f.check, f.message));
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace

TEST_CASE("mockup $expand: levels reach subordinate resources, never Links or resources above") {
  MockupOptions options;
  options.dir = mockup_dir("public-liquid-cooled-server");
  MockupService service(options);
  json one = get_expanded(service, "/redfish/v1/Chassis", "$expand=.($levels=1)");
  const json& chassis = one["Members"][0];
  CHECK(chassis["Id"] == "1U");                           // level 1: the members
  CHECK(chassis["PowerSubsystem"].size() == 1);           // and no further
  json two = get_expanded(service, "/redfish/v1/Chassis", "$expand=.($levels=2)");
  const json& power = two["Members"][0]["PowerSubsystem"];
  CHECK(power["@odata.type"].get<std::string>().find("PowerSubsystem") != std::string::npos);
  CHECK(power["PowerSupplies"].size() == 1);              // level 3 was not asked for
  CHECK(two["Members"][0]["Sensors"]["Members"][0].size() == 1);
  json three = get_expanded(service, "/redfish/v1/Chassis", "$expand=.($levels=3)");
  const json& supplies = three["Members"][0]["PowerSubsystem"]["PowerSupplies"];
  REQUIRE(supplies.contains("Members"));
  CHECK(supplies["Members"][0].size() == 1);
  CHECK(three["Members"][0]["Sensors"]["Members"][0].contains("Reading"));
  json five = get_expanded(service, "/redfish/v1/Chassis", "%24expand=.(%24levels%3D5)");  // percent-encoded
  const json& sensor = five["Members"][0]["Sensors"]["Members"][0];
  CHECK(sensor.contains("Reading"));
  // The sensor's RelatedItem and the chassis's Links lead elsewhere: left as references.
  if (sensor.contains("RelatedItem"))
    for (const json& item : sensor["RelatedItem"]) CHECK(item.size() == 1);
  if (five["Members"][0].contains("Links"))
    for (const auto& [key, link] : five["Members"][0]["Links"].items())
      if (link.is_object()) CHECK(link.size() == 1);
  // No query, no expansion.
  CHECK(get_expanded(service, "/redfish/v1/Chassis")["Members"][0].size() == 1);
}

TEST_CASE("a deep $expand reads every mockup exactly as resource by resource, in fewer requests") {
  for (const char* name : {"public-liquid-cooled-server", "public-cooling-unit", "public-pdu",
                           "public-power-shelf", "public-rackmount1"}) {
    INFO(name);
    MockBmc deep_bmc(mockup_dir(name));
    MockBmc flat_bmc(mockup_dir(name));
    Snapshot deep = read_redfish(levelled(deep_bmc.url(), 6), expand_poll_options());
    Snapshot flat = read_redfish(levelled(flat_bmc.url(), 1), expand_poll_options());
    REQUIRE(deep.sources.size() == 1);
    CHECK(deep.sources[0].ok);
    CHECK(deep.sources[0].partial == flat.sources[0].partial);
    CHECK_FALSE(deep.samples.empty());
    CHECK(expand_readings(deep) == expand_readings(flat));
    CHECK(deep.sources[0].requests < flat.sources[0].requests);
    CHECK(deep.quirks.count("deep_expand_refused") == 0);
    // Below the deepest level the service expands, a collection is still one request, not one
    // per member (the CDU mockup advertises 3 levels: its pumps are the fourth).
    CHECK(deep_bmc.hits("/redfish/v1/ThermalEquipment/CDUs/1/Pumps/1") == 0);
  }
}

TEST_CASE("a service that refuses a deep $expand is read one level at a time, completely") {
  MockBmc bmc(mockup_dir("public-liquid-cooled-server"));
  bmc.fault("/redfish/v1/Chassis", Fault{400, {}, 0ms, 1});  // the first request there: the deep one
  Snapshot s = read_redfish(levelled(bmc.url(), 6), expand_poll_options());
  CHECK(s.sources[0].ok);
  CHECK_FALSE(s.sources[0].partial);
  CHECK(s.quirks["deep_expand_refused"] == 1);
  CHECK(bmc.hits("/redfish/v1/Chassis/1U/Sensors") == 1);  // read as before
  MockBmc plain(mockup_dir("public-liquid-cooled-server"));
  CHECK(expand_readings(s) == expand_readings(read_redfish(levelled(plain.url(), 1), expand_poll_options())));
}

TEST_CASE("a resource nested 100,000 deep is read without exhausting the stack, expanded or not") {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::map<std::string, std::string> resources{
      {"/redfish/v1", R"({"@odata.id": "/redfish/v1", "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
          "ProtocolFeaturesSupported": {"ExpandQuery": {"Levels": true, "MaxLevels": 6}}})"},
      {"/redfish/v1/Chassis", R"({"@odata.id": "/redfish/v1/Chassis",
          "Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]})"},
      {"/redfish/v1/Chassis/1", R"({"@odata.id": "/redfish/v1/Chassis/1", "Id": "1", "MaxPowerWatts": 700,
          "Oem": {"Deep": )" + deep + "}}"}};
  Snapshot s = read_redfish_resources(resources, "deep");
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].ok);
  CHECK(s.find("deep", "Chassis/1", "power_max"));
}

TEST_CASE("sources.json: expand_levels is 1 to 6, and a bad one names the source") {
  TempDir dir;
  auto config = [](const std::string& levels) {
    return R"({"redfish": [{"url": "http://127.0.0.1:1", "expand_levels": )" + levels + "}]}";
  };
  CHECK(parse_config(config("1"), dir.path, "sources.json").redfish[0].expand_levels == 1);
  for (const char* bad : {"0", "7", "\"deep\"", "4294967297"}) {
    INFO(bad);
    try {
      parse_config(config(bad), dir.path, "sources.json");
      FAIL("accepted");
    } catch (const std::runtime_error& e) {
      std::string message = e.what();
      CHECK(message.find("redfish[0].expand_levels") != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}
