// Fabric model: names and lookups operators use, the JSON contract, and rejection of bad input.
#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace astral::topo;
using nlohmann::json;

namespace {

Fabric same_rail_1k(bool dual = false) {
  GenerateOptions o;
  o.kind = FabricKind::kSameRailT2;
  o.gpus = 1024;
  o.radix = 128;
  o.dual_plane = dual;
  return generate_fabric(o);
}

// A two-host, one-leaf fabric written by hand, as an operator's tool would.
json tiny_fabric() {
  return json::parse(R"({
    "format": "astral-fabric", "version": 1, "name": "tiny", "rails": 2,
    "profiles": [{"name": "2gpu", "gpus": 2, "nics": [
        {"name": "mlx5_0", "rail": 0, "gpus": [0], "port_gbps": 400},
        {"name": "mlx5_1", "rail": 1, "gpus": [1], "port_gbps": 400}]}],
    "hosts": [{"name": "a1", "profile": "2gpu"}, {"name": "a2", "profile": "2gpu"}],
    "switches": [{"name": "r0-00", "tier": 1, "radix": 8, "port_gbps": 400, "rail": 0},
                 {"name": "r1-00", "tier": 1, "radix": 8, "port_gbps": 400, "rail": 1}],
    "links": [{"a": "a1:mlx5_0:1", "b": "r0-00:1", "gbps": 400},
              {"a": "a2:mlx5_0:1", "b": "r0-00:2", "gbps": 400},
              {"a": "a1:mlx5_1:1", "b": "r1-00:1", "gbps": 400},
              {"a": "r1-00:2", "b": "a2:mlx5_1:1", "gbps": 400, "state": "down"}]
  })");
}

std::string error_of(const json& doc) {
  try {
    fabric_from_json(doc);
  } catch (const FabricError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("generated hosts, GPUs and rails are numbered the way operators see them") {
  Fabric f = same_rail_1k();
  REQUIRE(f.hosts().size() == 128);
  CHECK(f.gpu_count() == 1024);
  CHECK(f.rails() == 8);
  CHECK(f.hosts()[0].name == "node0001");
  CHECK(f.hosts()[127].name == "node0128");
  auto g = f.gpu(517);
  CHECK(g.host == 64);
  CHECK(g.gpu == 5);
  CHECK(f.global_gpu(64, 5) == 517);
  CHECK(f.nic_of_gpu(64, 5) == 5);
  CHECK(f.rail_of_gpu(64, 5) == 5);
  CHECK(f.gpu(1024).host == -1);
}

TEST_CASE("a NIC port maps to its leaf switch port and link, and back") {
  Fabric f = same_rail_1k();
  // Host 65 is the first host of segment 1: rail 3's leaf of segment 1, port 1.
  auto host = f.find_host("node0065");
  REQUIRE(host);
  Attachment a = f.attachment(*host, 3, 1);
  REQUIRE(a.link >= 0);
  CHECK(f.switches()[a.sw].name == "r3-01");
  CHECK(a.port == 1);
  CHECK(a.lane == 0);
  CHECK(f.link_at_switch_port(a.sw, 1) == a.link);
  CHECK(f.link_label(a.link) == "node0065:mlx5_3:1 <-> r3-01:1");
  CHECK(f.find_link("r3-01:1") == a.link);
  CHECK(f.find_link("node0065:mlx5_3:1") == a.link);
  CHECK(f.find_link("node0065:3:1") == a.link);  // NIC by index
  CHECK(f.find_link("#" + std::to_string(a.link)) == a.link);
  CHECK_FALSE(f.find_link("r3-01:200"));
  CHECK(f.switches()[*f.find_switch("s3-34")].rail == 3);
  CHECK(f.link_label(*f.find_link("r3-01:99")) == "r3-01:99 <-> s3-34:2");
  CHECK_FALSE(f.find_link("nosuch:1"));
  CHECK(f.attachment(*host, 3, 2).link == -1);  // single plane: no second port
}

TEST_CASE("dual-plane hosts put the two ports of a NIC on different leaves, as breakout lanes") {
  Fabric f = same_rail_1k(/*dual=*/true);
  CHECK(f.planes() == 2);
  Attachment p1 = f.attachment(0, 2, 1), p2 = f.attachment(0, 2, 2);
  REQUIRE(p1.link >= 0);
  REQUIRE(p2.link >= 0);
  CHECK(f.switches()[p1.sw].name == "r2-00a");
  CHECK(f.switches()[p2.sw].name == "r2-00b");
  CHECK(f.switches()[p1.sw].plane == 0);
  CHECK(f.switches()[p2.sw].plane == 1);
  CHECK(f.links()[p1.link].gbps == 200);
  // Hosts 1 and 2 share front-panel port 1 of the 400G leaf as lanes 1 and 2.
  CHECK(f.endpoint_label(f.links()[p1.link].b) == "r2-00a:1/1");
  CHECK(f.endpoint_label(f.links()[f.attachment(1, 2, 1).link].b) == "r2-00a:1/2");
  CHECK(f.find_link("r2-00a:1/2") == f.attachment(1, 2, 1).link);
}

TEST_CASE("fabric JSON round-trips through text and a file") {
  Fabric f = same_rail_1k(true);
  f.set_link_state(7, LinkState::kDown);
  json doc = fabric_to_json(f);
  CHECK(doc["format"] == "astral-fabric");
  Fabric back = fabric_from_json(json::parse(doc.dump()));
  REQUIRE(back.links().size() == f.links().size());
  REQUIRE(back.switches().size() == f.switches().size());
  for (size_t i = 0; i < f.links().size(); i += 97) CHECK(back.link_label(int(i)) == f.link_label(int(i)));
  CHECK(back.links()[7].state == LinkState::kDown);
  auto sorted = [](auto v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(sorted(back.generator()) == sorted(f.generator()));

  std::string path = "fabric_roundtrip_test.json";
  save_fabric(f, path);
  Fabric loaded = load_fabric(path);
  CHECK(loaded.links().size() == f.links().size());
  CHECK(loaded.name() == f.name());
  std::remove(path.c_str());
}

TEST_CASE("a hand-written fabric loads, either end order and link state are kept") {
  Fabric f = fabric_from_json(tiny_fabric());
  CHECK(f.hosts().size() == 2);
  CHECK(f.links()[3].a.is_host());  // written switch-first, stored host-first
  CHECK(f.links()[3].state == LinkState::kDown);
  CHECK(f.link_label(3) == "a2:mlx5_1:1 <-> r1-00:2");
}

TEST_CASE("invalid fabrics are rejected naming the offending element") {
  SECTION("dangling link end") {
    json doc = tiny_fabric();
    doc["links"][1]["b"] = "r9-99:3";
    std::string e = error_of(doc);
    CHECK(e.find("link 1") != std::string::npos);
    CHECK(e.find("r9-99") != std::string::npos);
  }
  SECTION("a NIC the host's profile lacks") {
    json doc = tiny_fabric();
    doc["links"][0]["a"] = "a1:mlx5_7:1";
    CHECK(error_of(doc).find("no NIC 'mlx5_7'") != std::string::npos);
  }
  SECTION("port beyond the radix") {
    json doc = tiny_fabric();
    doc["links"][1]["b"] = "r0-00:9";
    std::string e = error_of(doc);
    CHECK(e.find("impossible radix") != std::string::npos);
    CHECK(e.find("r0-00") != std::string::npos);
  }
  SECTION("impossible radix on a switch") {
    json doc = tiny_fabric();
    doc["switches"][0]["radix"] = 0;
    CHECK(error_of(doc).find("switch 'r0-00': impossible radix 0") != std::string::npos);
  }
  SECTION("a rail with no switch") {
    json doc = tiny_fabric();
    doc["links"].erase(2);
    doc["links"].erase(2);
    CHECK(error_of(doc).find("rail 1 has no switch") != std::string::npos);
  }
  SECTION("a port cabled twice") {
    json doc = tiny_fabric();
    doc["links"][1]["b"] = "r0-00:1";
    CHECK(error_of(doc).find("r0-00:1 is cabled twice") != std::string::npos);
  }
  SECTION("a host cabled above the leaves") {
    json doc = tiny_fabric();
    doc["switches"][1]["tier"] = 2;
    CHECK(error_of(doc).find("hosts attach to leaves") != std::string::npos);
  }
  SECTION("lanes that add up to more than their port") {
    json doc = tiny_fabric();
    doc["links"][0]["b"] = "r0-00:1/1";
    doc["links"][1]["b"] = "r0-00:1/2";
    CHECK(error_of(doc).find("lanes add up to 800") != std::string::npos);
  }
  SECTION("wrong format and version") {
    json doc = tiny_fabric();
    doc["version"] = 9;
    CHECK(error_of(doc).find("version 9") != std::string::npos);
    doc["format"] = "other";
    CHECK(error_of(doc).find("format") != std::string::npos);
  }
  SECTION("missing field") {
    json doc = tiny_fabric();
    doc["switches"][0].erase("radix");
    CHECK(error_of(doc).find("switch 'r0-00': missing \"radix\"") != std::string::npos);
  }
}

TEST_CASE("loading a missing or malformed file names the file") {
  CHECK_THROWS_WITH(load_fabric("/nonexistent/f.json"), Catch::Contains("/nonexistent/f.json"));
  std::string path = "fabric_bad_test.json";
  std::ofstream(path) << "{not json";
  CHECK_THROWS_WITH(load_fabric(path), Catch::Contains("not valid JSON"));
  std::remove(path.c_str());
}
