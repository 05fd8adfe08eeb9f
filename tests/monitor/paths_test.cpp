// Paths of connections: trace files' connections mapped to their links on the fabric graph, and
// the link that carried most of the slow transfers named as such.
#include <catch2/catch.hpp>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/paths.hpp"

using namespace astral::monitor;
namespace trace = astral::trace;

namespace {

// Hosts a, b on leaf1; c, d on leaf2; the leaves joined by two spines (ECMP).
FabricGraph two_leaves() {
  FabricGraph g = parse_cabling_csv(
      "host,nic,port,switch,switch_port\n"
      "a,mlx5_0,1,leaf1,Ethernet0\n"
      "b,mlx5_0,1,leaf1,Ethernet4\n"
      "c,mlx5_0,1,leaf2,Ethernet0\n"
      "d,mlx5_0,1,leaf2,Ethernet4\n",
      "test.csv");
  g.add_trunk({{"leaf1", "Ethernet64"}, {"spine1", "Ethernet0"}});
  g.add_trunk({{"leaf1", "Ethernet68"}, {"spine2", "Ethernet0"}});
  g.add_trunk({{"spine1", "Ethernet4"}, {"leaf2", "Ethernet64"}});
  g.add_trunk({{"spine2", "Ethernet4"}, {"leaf2", "Ethernet68"}});
  return g;
}

struct FileBuilder {
  trace::TraceFile file;
  explicit FileBuilder(const std::string& host) {
    file.info.host = host;
    file.info.start_mono_ns = 1000;
    file.info.start_wall_ns = 1764456000000000000ULL;
    file.strings = {"", "mlx5_0", "a", "b", "c", "d"};
  }
  static trace::StringId id_of(const std::string& s) {
    const char* names[] = {"", "mlx5_0", "a", "b", "c", "d"};
    for (trace::StringId i = 0; i < 6; ++i)
      if (s == names[i]) return i;
    return 0;
  }
  void connect(uint64_t conn, const std::string& peer, bool send, double gbps, int transfers = 4) {
    trace::Connection c;
    c.conn_id = conn;
    c.nic = 1;
    c.remote_host = id_of(peer);
    c.is_send = send;
    file.connections.push_back({0x1234, c});
    if (!send) return;
    for (int i = 0; i < transfers; ++i) {
      trace::Event e;
      e.kind = trace::EventKind::NetSendDone;
      e.time_ns = 2000 + uint64_t(i) * 1000000;
      trace::Transfer t;
      t.conn_id = conn;
      t.bytes = 1 << 20;
      t.duration_ns = uint64_t(double(t.bytes) * 8 / gbps);
      e.payload = t;
      file.events.push_back(e);
    }
  }
};

}  // namespace

TEST_CASE("Paths: connections become links on the fabric, the link under most slow transfers is named") {
  const FabricGraph fabric = two_leaves();
  FileBuilder a("a"), b("b"), c("c"), d("d");
  // a's cable is degraded: everything a sends is slow.
  a.connect(1, "b", true, 20);
  b.connect(1, "a", false, 0);
  a.connect(2, "c", true, 25);
  c.connect(2, "a", false, 0);
  a.connect(3, "d", true, 22);
  d.connect(3, "a", false, 0);
  b.connect(4, "c", true, 190);
  c.connect(4, "b", false, 0);
  b.connect(5, "d", true, 200);
  d.connect(5, "b", false, 0);
  c.connect(6, "d", true, 195);
  d.connect(6, "c", false, 0);
  d.connect(7, "b", true, 185);
  b.connect(7, "d", false, 0);
  const std::vector<trace::TraceFile> files = {a.file, b.file, c.file, d.file};
  const auto paths = connection_paths(files, fabric);
  REQUIRE(paths.size() == 7);
  const ConnectionPath* same_leaf = nullptr;
  const ConnectionPath* across = nullptr;
  for (const auto& p : paths) {
    if (p.conn_id == 1) same_leaf = &p;
    if (p.conn_id == 2) across = &p;
  }
  REQUIRE(same_leaf);
  REQUIRE(across);
  CHECK(same_leaf->peer_nic == "mlx5_0");
  REQUIRE(same_leaf->hops.size() == 2);  // a's cable, b's cable
  CHECK(same_leaf->hops[0].host == "a");
  CHECK(same_leaf->hops[0].port == "Ethernet0");
  CHECK(same_leaf->hops[1].host == "b");
  CHECK(!same_leaf->ambiguous);
  CHECK(same_leaf->slow);
  // a -> c crosses the spines: both parallel trunks are possible (ECMP), so the path says so.
  CHECK(across->ambiguous);
  CHECK(across->hops.size() == 6);
  CHECK(across->hops.back().host == "c");

  const auto events = slow_link_events(paths);
  REQUIRE(events.size() == 1);
  const Event& e = events[0];
  CHECK(e.kind == "slow_transfers");
  CHECK(e.component.kind == ComponentKind::link);
  CHECK(e.component.host == "a");
  CHECK(e.component.switch_name == "leaf1");
  CHECK(e.component.port == "Ethernet0");
  CHECK(e.attr("slow_connections") == "3");
  CHECK(e.has_time());
  CHECK_THAT(e.message, Catch::StartsWith("3 of 3 connections across mlx5_0 on a <-> leaf1 Ethernet0"));

  // Without enough connections there is no usual rate: nothing is called slow.
  const auto few = connection_paths({a.file, b.file}, fabric);
  CHECK(slow_link_events(few).empty());
}
