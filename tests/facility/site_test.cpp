// The site layout: parsing and validation naming the element, the joins the monitor needs
// (host -> rack -> CDU -> loop; rack -> shelf -> feed), derivation from Redfish rack chassis, and
// facility events labelled with site ids.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "astral/facility/config.hpp"
#include "astral/facility/events.hpp"
#include "astral/facility/site.hpp"
#include "support.hpp"

using namespace astral::facility;
using json = nlohmann::json;

namespace {

const char* kSite = R"({
  "racks": [
    {"id": "rack-41", "hosts": ["node041a", "node041b"], "cooled_by": ["cdu-1"], "powered_by": ["shelf-41"]},
    {"id": "rack-42", "hosts": ["node042a"], "powered_by": ["shelf-42"]},
    {"id": "rack-43", "hosts": ["node043a"], "cooled_by": ["cdu-2"], "powered_by": ["shelf-42"]}
  ],
  "components": [
    {"id": "loop-a", "kind": "cooling_loop"},
    {"id": "cdu-1", "kind": "cdu", "source": "cdu-1", "entity": "ThermalEquipment/CDUs/1", "fed_by": ["loop-a"], "serves": ["rack-42"]},
    {"id": "cdu-2", "kind": "cdu", "source": "cdu-2", "fed_by": ["loop-a"]},
    {"id": "feed-a", "kind": "feed"},
    {"id": "shelf-41", "kind": "power_shelf", "source": "shelf-41", "entity": "PowerEquipment/PowerShelves/1", "fed_by": ["feed-a"]},
    {"id": "shelf-42", "kind": "power_shelf", "source": "shelf-42", "fed_by": ["feed-a"]}
  ]
})";

std::string error_of(const std::string& text) {
  try {
    parse_site_layout(text, "site.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("site layout: hosts to racks, racks to cooling and power, through fed_by") {
  SiteLayout s = parse_site_layout(kSite, "site.json");
  REQUIRE(s.racks.size() == 3);
  CHECK(s.rack_of_host("node041b")->id == "rack-41");
  CHECK(s.rack_of_host("node999") == nullptr);
  // "serves" on a component is merged into the rack.
  CHECK(s.rack("rack-42")->cooled_by == std::vector<std::string>{"cdu-1"});
  CHECK(s.racks_served_by("cdu-1") == std::vector<std::string>{"rack-41", "rack-42"});
  CHECK(s.racks_served_by("loop-a") == std::vector<std::string>{"rack-41", "rack-42", "rack-43"});
  CHECK(s.racks_served_by("shelf-42") == std::vector<std::string>{"rack-42", "rack-43"});
  CHECK(s.upstream_of("rack-43") == std::vector<std::string>{"cdu-2", "shelf-42", "loop-a", "feed-a"});
  // Readings map to the equipment by source and the longest entity prefix.
  CHECK(s.component_for("cdu-1", "ThermalEquipment/CDUs/1/Pumps/2")->id == "cdu-1");
  CHECK(s.component_for("cdu-1", "ThermalEquipment/CDUs/10") == nullptr);  // a prefix of a path part is not a match
  CHECK(s.component_for("cdu-2", "anything")->id == "cdu-2");
  CHECK(unknown_hosts(s, {"node041a", "node777"}) == std::vector<std::string>{"node777"});
  // Round trip.
  SiteLayout again = parse_site_layout(site_layout_to_json(s), "again");
  CHECK(again.racks_served_by("loop-a") == s.racks_served_by("loop-a"));
}

TEST_CASE("site layout: each mistake is one line naming the element") {
  auto with = [](const std::string& racks, const std::string& comps) {
    return "{\"racks\": [" + racks + "], \"components\": [" + comps + "]}";
  };
  CHECK(error_of("[1]") == "site.json: not a JSON object");
  CHECK(error_of(with(R"({"id": "r1", "cooled_by": ["cdu-9"]})", "")) ==
        "site.json: racks[0] (r1).cooled_by: unknown component 'cdu-9'");
  CHECK(error_of(with(R"({"id": "r1"})", R"({"id": "c1", "kind": "cdu", "serves": ["r9"]})")) ==
        "site.json: components[0] (c1).serves: unknown rack 'r9'");
  CHECK(error_of(with(R"({"id": "r1", "hosts": ["n1"]}, {"id": "r2", "hosts": ["n1"]})", "")) ==
        "site.json: racks[1] (r2): host 'n1' is already in rack 'r1'");
  CHECK(error_of(with(R"({"id": "r1"}, {"id": "r1"})", "")) == "site.json: racks[1] (r1): duplicate id 'r1'");
  CHECK(error_of(with("", R"({"id": "a", "kind": "cdu", "fed_by": ["b"]}, {"id": "b", "kind": "cooling_loop", "fed_by": ["c"]},
                             {"id": "c", "kind": "cooling_loop", "fed_by": ["b"]})")) ==
        "site.json: components (c): fed_by has a cycle: b -> c -> b");
  CHECK(error_of(with("", R"({"id": "a", "kind": "cdu", "fed_by": ["a"]})")) ==
        "site.json: components (a): fed_by has a cycle: a -> a");
  CHECK(error_of(with(R"({"id": "r1", "powered_by": ["cdu"]})", R"({"id": "cdu", "kind": "cdu"})")) ==
        "site.json: racks[0] (r1).powered_by: 'cdu' is cdu equipment");
  CHECK(error_of(with("", R"({"id": "p", "kind": "pdu", "fed_by": ["l"]}, {"id": "l", "kind": "cooling_loop"})")) ==
        "site.json: components[0] (p).fed_by: 'l' is cooling_loop equipment, 'p' is pdu");
  CHECK(error_of(with("", R"({"id": "x", "kind": "chiller"})")).find("components[0] (x).kind: unknown kind 'chiller'") !=
        std::string::npos);
  CHECK(error_of(with(R"({"hosts": []})", "")) == "site.json: racks[0]: \"id\" is required");
  CHECK(error_of(with(R"({"id": "r1", "host": ["n1"]})", "")).find("racks[0]: unknown key 'host'") != std::string::npos);
  CHECK(error_of(with(R"({"id": "r1", "budget_watts": -5})", "")) == "site.json: racks[0].budget_watts: expected a positive number of watts");
}

TEST_CASE("site layout from Redfish rack chassis and in sources.json") {
  std::map<std::string, std::string> r;
  r["/redfish/v1/Chassis/Rack41"] = json{{"Id", "Rack41"}, {"ChassisType", "Rack"},
      {"Links", {{"Contains", {{{"@odata.id", "/redfish/v1/Chassis/Node1"}}, {{"@odata.id", "/redfish/v1/Chassis/Node2"}}}},
                 {"CooledBy", {{{"@odata.id", "/redfish/v1/ThermalEquipment/CDUs/1"}}}},
                 {"ConnectedCoolingLoops", {{{"@odata.id", "https://plant.example/redfish/v1/ThermalEquipment/CoolingLoops/A"}}}},
                 {"PoweredBy", {{{"@odata.id", "https://pdu41.example/redfish/v1/PowerEquipment/RackPDUs/1/Outlets/A4"}}}}}}}.dump();
  r["/redfish/v1/Chassis/Node1"] = json{{"Id", "Node1"}, {"ChassisType", "RackMount"},
      {"Links", {{"ComputerSystems", {{{"@odata.id", "/redfish/v1/Systems/1"}}}}}}}.dump();
  r["/redfish/v1/Systems/1"] = json{{"Id", "1"}, {"HostName", "node041a"}}.dump();
  r["/redfish/v1/Chassis/Node2"] = json{{"Id", "Node2"}, {"ChassisType", "RackMount"}}.dump();
  SiteLayout s = site_from_redfish(r, "rack-bmc");
  REQUIRE(s.racks.size() == 1);
  CHECK(s.racks[0].id == "rack-bmc:Chassis/Rack41");
  CHECK(s.racks[0].hosts == std::vector<std::string>{"node041a", "Node2"});
  CHECK(s.racks[0].cooled_by == std::vector<std::string>{"rack-bmc:ThermalEquipment/CDUs/1", "plant.example:ThermalEquipment/CoolingLoops/A"});
  CHECK(s.racks[0].powered_by == std::vector<std::string>{"pdu41.example:PowerEquipment/RackPDUs/1"});  // the PDU, not its outlet
  CHECK(s.component("pdu41.example:PowerEquipment/RackPDUs/1")->kind == "pdu");
  CHECK(s.component("plant.example:ThermalEquipment/CoolingLoops/A")->kind == "cooling_loop");

  // Inline in sources.json, and a file named from it; a bad layout names the config too.
  astral::facility::test::TempDir dir;
  std::string site = dir.file("site.json", kSite);
  FacilityConfig c = parse_config(R"({"site": "site.json"})", dir.path, "sources.json");
  CHECK(c.site.racks.size() == 3);
  FacilityConfig inline_site = parse_config(json{{"site", json::parse(kSite)}}.dump(), dir.path, "sources.json");
  CHECK(inline_site.site.rack_of_host("node043a")->id == "rack-43");
  CHECK_THROWS_WITH(parse_config(R"({"site": {"racks": [{"id": "r", "cooled_by": ["x"]}]}})", dir.path, "sources.json"),
                    "sources.json: site: racks[0] (r).cooled_by: unknown component 'x'");
}

TEST_CASE("facility events carry the site component, the racks and the hosts it affects") {
  SiteLayout s = parse_site_layout(kSite, "site.json");
  Alarm pump{Clock::now(), "cdu-1", EntityKind::pump, "ThermalEquipment/CDUs/1/Pumps/2", Severity::critical, "pump_failed",
             "Pump 2 has failed", "/redfish/v1/ThermalEquipment/CDUs/1/Pumps/2", "redfish"};
  json e = alarm_to_event(pump, &s);
  CHECK(e["component"]["site"] == "cdu-1");
  CHECK(e["component"]["kind"] == "pump");
  CHECK(e["keys"]["site_kind"] == "cdu");
  CHECK(e["keys"]["racks"] == json::array({"rack-41", "rack-42"}));
  CHECK(e["keys"]["hosts"] == json::array({"node041a", "node041b", "node042a"}));
  // A GPU alarm on a node: the node's rack.
  Alarm gpu{Clock::now(), "node043a", EntityKind::gpu, "GPU-1", Severity::error, "gpu_thermal_throttling", "hot", "nvml:0", "nvml"};
  json g = alarm_to_event(gpu, &s);
  CHECK(g["keys"]["racks"] == json::array({"rack-43"}));
  CHECK_FALSE(g["component"].contains("site"));
  // Without a layout, or outside it, nothing is guessed.
  CHECK(alarm_to_event(pump)["keys"].empty());
  Alarm other = pump;
  other.host = "cdu-9";
  CHECK(alarm_to_event(other, &s)["keys"].empty());
}

TEST_CASE("Fuzz regressions: Redfish chassis fields of another type are not strings (no type_error escapes)") {
  // json::value("ChassisType", "") and value("Id", ...) threw nlohmann's type_error when a
  // service sent a number; the site derivation must skip such a field, not throw out of it.
  std::map<std::string, std::string> r;
  r["/redfish/v1/Chassis/Rack41"] = R"({"ChassisType": "Rack", "Links": {"Contains": [
      {"@odata.id": "/redfish/v1/Chassis/Node1"}, {"@odata.id": "/redfish/v1/Chassis/Node2"}]}})";
  r["/redfish/v1/Chassis/Node1"] = R"({"ChassisType": 4, "Id": 7})";
  r["/redfish/v1/Chassis/Node2"] = R"({"ChassisType": "RackMount", "Id": "node2"})";
  r["/redfish/v1/Chassis/Other"] = R"({"ChassisType": ["Rack"]})";
  const std::string file =
      ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/facility_site/crash-handmade-non-string-chassis-type.json";
  r["/redfish/v1/Chassis/Rack42"] = test::slurp(file);
  SiteLayout s = site_from_redfish(r, "bmc");
  REQUIRE(s.racks.size() == 1);
  CHECK(s.racks[0].hosts == std::vector<std::string>{"Node1", "node2"});  // Node1's Id is no name
}
