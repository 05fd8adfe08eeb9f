// The monitor's fabric graph from cabling CSV, ibnetdiscover output and fabric JSON.
#include <catch2/catch.hpp>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/simulate.hpp"
#include "astral/topo/fabric_generate.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Cabling CSV: header in any order, lookups by either end") {
  auto g = parse_cabling_csv(
      "switch_port,switch,host,nic,port\n"
      "Ethernet32,tor-07,gpu-a.cluster.local,mlx5_4,1\n"
      "swp3,leaf2,gpu-b,mlx5_0,1\n",
      "cabling.csv");
  REQUIRE(g.cables().size() == 2);
  const Cable* c = g.cable_at("tor-07", "Ethernet32");
  REQUIRE(c);
  CHECK(c->nic.host == "gpu-a.cluster.local");
  CHECK(g.cable_of_nic("gpu-a", "mlx5_4") == c);  // host names compared in short form
  CHECK(g.cable_at("leaf2", "3") != nullptr);       // swp3 and a bare index are the same port
  CHECK(g.cable_at("leaf2", "Ethernet3") == nullptr);
  CHECK(g.has_switch("tor-07"));
  CHECK_THROWS_WITH(parse_cabling_csv("host,nic,port,switch,switch_port\nonly-a-host\n", "x.csv"),
                    Catch::Contains("x.csv:2"));
}

TEST_CASE("ibnetdiscover output: switches, CAs and trunks") {
  const char* text = R"(#
# Topology file: generated on Tue Jan 16 10:00:00 2024
#
vendid=0x2c9
devid=0xcf08
switchguid=0x2c903004a97e0(2c903004a97e0)
Switch	40 "S-0002c903004a97e0"		# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 2 lmc 0
[1]	"H-0002c903000e0b72"[1](2c903000e0b73) 		# "node001 mlx5_0" lid 4 4xHDR
[2]	"H-0002c903000e0b80"[1](2c903000e0b81) 		# "node002 mlx5_0" lid 6 4xHDR
[39]	"S-0002c903004a9900"[1]		# "MF0;spine01:MQM8700/U1" lid 9 4xHDR

vendid=0x15b3
devid=0x101b
caguid=0x2c903000e0b72
Ca	1 "H-0002c903000e0b72"		# "node001 mlx5_0"
[1](2c903000e0b73) 	"S-0002c903004a97e0"[1]		# lid 4 lmc 0 "MF0;leaf01:MQM8700/U1" lid 2 4xHDR
)";
  auto g = parse_ibnetdiscover(text, "ibnet.txt");
  REQUIRE(g.cables().size() == 2);
  const Cable* c = g.cable_of_nic("node001", "mlx5_0");
  REQUIRE(c);
  CHECK(c->sw.switch_name == "leaf01");
  CHECK(c->sw.port == "1");
  REQUIRE(g.trunks().size() == 1);
  CHECK(g.trunks()[0].b.switch_name == "spine01");
}

TEST_CASE("Fabric writers round-trip through the loaders") {
  FabricGraph g = make_rail_fabric(20, 4, 8, 2);
  CHECK(g.cables().size() == 80);
  TempDir dir;
  dir.write("f.csv", g.to_cabling_csv());
  dir.write("f.ibnet", fabric_to_ibnetdiscover(g));
  dir.write("f.json", fabric_to_json(g));
  for (const char* name : {"f.csv", "f.ibnet", "f.json"}) {
    FabricGraph back = load_fabric(dir / name);
    INFO(name);
    CHECK(back.cables().size() == g.cables().size());
    for (const Cable& c : g.cables()) {
      const Cable* b = back.cable_at(c.sw.switch_name, c.sw.port);
      REQUIRE(b);
      CHECK(b->nic.host == c.nic.host);
      CHECK(b->nic.nic == c.nic.nic);
    }
  }
  CHECK(load_fabric(dir / "f.json").trunks().size() == g.trunks().size());
  CHECK(load_fabric(dir / "f.csv").host_of_ip(g.cables()[5].nic.ip) == g.cables()[5].nic.host);
}

TEST_CASE("Astral fabric JSON (astral fabric generate) is read exactly: hosts, NICs, rails, roles") {
  astral::topo::GenerateOptions o;
  o.gpus = 256;
  o.radix = 64;
  astral::topo::Fabric fabric = astral::topo::generate_fabric(o);
  TempDir dir;
  dir.write("gen.json", astral::topo::fabric_to_json(fabric).dump());
  FabricGraph g = load_fabric(dir / "gen.json");
  CHECK(g.cables().size() == 256);  // one NIC port per GPU
  const Cable* c = g.cable_of_nic("node0017", "mlx5_3");
  REQUIRE(c);
  CHECK(c->nic.host == "node0017");  // not "node0017:mlx5_3"
  CHECK(c->nic.port == "1");
  CHECK(c->nic.rail == 3);
  astral::topo::Attachment at = fabric.attachment(16, fabric.nic_on_rail(16, 3), 1);
  CHECK(c->sw.switch_name == fabric.switches()[at.sw].name);
  CHECK(g.role(c->sw.switch_name) == "leaf");
  CHECK_FALSE(g.trunks().empty());
  // A broken fabric in our own format names the file and the element.
  dir.write("bad.json", R"({"format": "astral-fabric", "version": 1, "rails": 1, "profiles": [],
                            "hosts": [{"name": "h1", "profile": "nope"}], "switches": [], "links": []})");
  CHECK_THROWS_WITH(load_fabric(dir / "bad.json"), Catch::Contains("bad.json") && Catch::Contains("nope"));
}
