// Paths of connections: trace files' connections mapped to their links on the fabric graph, and
// the link that carried most of the slow transfers named as such.
#include <cstdio>
#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/paths.hpp"
#include "astral/topo/fabric_generate.hpp"

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

// With the fabric JSON's hash model and the QPs' UDP source ports (the plugin's path note), the
// trunks a connection crossed are the ones the switches' hash chose, and a degraded trunk is
// joined to exactly the transfers that crossed it.
namespace {

struct HashedFabric {
  astral::topo::Fabric topo;
  FabricGraph graph;
};

HashedFabric hashed_fat_tree() {
  astral::topo::GenerateOptions o;
  o.kind = astral::topo::FabricKind::kFatTree;
  o.gpus = 16;
  o.gpus_per_host = 1;
  o.radix = 8;  // 4 hosts and 4 spine uplinks per leaf
  astral::topo::Fabric f = astral::topo::generate_fabric(o);
  nlohmann::json j = astral::topo::fabric_to_json(f);
  j["hash_model"] = {{"seed", 7}, {"polarisation", 0.0}};
  return {std::move(f), parse_fabric_json(j.dump(), "hashed.json")};
}

// One host's trace file with connections to peers, a path note per sending end, and transfers.
struct HashedFile {
  trace::TraceFile file;
  explicit HashedFile(const std::string& host) {
    file.info.host = host;
    file.info.start_mono_ns = 1000;
    file.info.start_wall_ns = 1764456000000000000ULL;
    file.strings = {""};
  }
  trace::StringId intern(const std::string& s) {
    for (trace::StringId i = 0; i < file.strings.size(); ++i)
      if (file.strings[i] == s) return i;
    file.strings.push_back(s);
    return trace::StringId(file.strings.size() - 1);
  }
  void connect(uint64_t conn, const std::string& nic, const std::string& peer, bool send, uint16_t sport = 0,
               double gbps = 200) {
    trace::Connection c;
    c.conn_id = conn;
    c.nic = intern(nic);
    c.remote_host = intern(peer);
    c.is_send = send;
    file.connections.push_back({0x1234, c});
    if (!send) return;
    if (sport) {
      trace::Event note;
      note.kind = trace::EventKind::Note;
      note.time_ns = 1500;
      char text[160];
      std::snprintf(text, sizeof text, "connection %#llx path {\"policy\":\"spread\",\"plane\":0,\"qps\":[{\"qp\":0,"
                    "\"flow_label\":1,\"udp_sport\":%u,\"dlid\":0,\"path_index\":0}]}",
                    static_cast<unsigned long long>(conn), unsigned(sport));
      note.payload = trace::Note{intern(text), 0};
      file.events.push_back(note);
    }
    for (int i = 0; i < 4; ++i) {
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

const Trunk* trunk_with_lower_end(const FabricGraph& g, const Component& hop) {
  for (const Trunk& t : g.trunks())
    if (t.a.switch_name == hop.switch_name && t.a.port == hop.port) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("Paths: with the fabric's hash model, a connection's trunks are the ones its UDP source ports hash to") {
  const HashedFabric hf = hashed_fat_tree();
  const FabricGraph& g = hf.graph;
  REQUIRE(g.hash_routing());
  // Hosts 0-3 under the first leaf, 4-7 under the second.
  auto host = [&](int i) { return hf.topo.hosts()[size_t(i)].name; };
  const std::string nic = hf.topo.profile_of(0).nics[0].name;
  for (int i = 0; i < 8; ++i) REQUIRE(g.cable_of_nic(host(i), nic));
  REQUIRE(g.cable_of_nic(host(0), nic)->sw.switch_name != g.cable_of_nic(host(4), nic)->sw.switch_name);

  // The spine one QP crosses, from the hops its path gets.
  auto spine_of = [&](uint16_t sport, int from = 0, int to = 4) {
    HashedFile a(host(from)), b(host(to));
    a.connect(1, nic, host(to), true, sport);
    b.connect(1, nic, host(from), false);
    const auto paths = connection_paths({a.file, b.file}, g);
    REQUIRE(paths.size() == 1);
    const ConnectionPath& p = paths[0];
    CHECK(p.hashed);
    CHECK(!p.ambiguous);
    REQUIRE(p.hops.size() == 4);  // cable, leaf -> spine, spine -> leaf, cable
    const Trunk* up = trunk_with_lower_end(g, p.hops[1]);
    const Trunk* down = trunk_with_lower_end(g, p.hops[2]);
    REQUIRE(up);
    REQUIRE(down);
    CHECK(up->a.switch_name == g.cable_of_nic(host(from), nic)->sw.switch_name);
    CHECK(down->a.switch_name == g.cable_of_nic(host(to), nic)->sw.switch_name);
    CHECK(up->b.switch_name == down->b.switch_name);  // up and down through the same spine
    return up->b.switch_name;
  };
  std::map<std::string, std::vector<uint16_t>> sports_by_spine;
  for (uint16_t s = 0xC000; s < 0xC000 + 32; ++s) sports_by_spine[spine_of(s)].push_back(s);
  CHECK(sports_by_spine.size() >= 3);  // the hash spreads source ports over the 4 spines
  CHECK(spine_of(0xC005) == spine_of(0xC005));

  // Without the path note the same connection lists every spine.
  {
    HashedFile a(host(0)), b(host(4));
    a.connect(1, nic, host(4), true);
    b.connect(1, nic, host(0), false);
    const auto paths = connection_paths({a.file, b.file}, g);
    REQUIRE(paths.size() == 1);
    CHECK(paths[0].ambiguous);
    CHECK(!paths[0].hashed);
  }

  // A degraded spine: the transfers whose ports hash through it are slow (the spine of a port
  // depends on both ends too: each pair gets a port that reaches the spine wanted). The event
  // names that spine's two trunks and no other.
  const std::string bad = sports_by_spine.begin()->first;
  std::vector<HashedFile> files;
  for (int i = 0; i < 8; ++i) files.emplace_back(host(i));
  for (int k = 0; k < 4; ++k) {
    const bool slow = k < 2;
    uint16_t sport = 0xC000;
    while ((spine_of(sport, k, 4 + k) == bad) != slow) ++sport;
    files[size_t(k)].connect(uint64_t(10 + k), nic, host(4 + k), true, sport, slow ? 20 : 200);
    files[size_t(4 + k)].connect(uint64_t(10 + k), nic, host(k), false);
  }
  std::vector<trace::TraceFile> traces;
  for (auto& f : files) traces.push_back(f.file);
  const auto events = slow_link_events(connection_paths(traces, g));
  REQUIRE(events.size() == 2);
  for (const Event& e : events) {
    const Trunk* t = trunk_with_lower_end(g, e.component);
    REQUIRE(t);
    CHECK(t->b.switch_name == bad);
    CHECK(e.attr("slow_connections") == "2");
    CHECK(e.attr("connections") == "2");
  }
}

TEST_CASE("Paths: a malformed hash model is one error naming the file and the field") {
  astral::topo::GenerateOptions o;
  o.kind = astral::topo::FabricKind::kFatTree;
  o.gpus = 16;
  o.gpus_per_host = 1;
  o.radix = 8;
  nlohmann::json j = astral::topo::fabric_to_json(astral::topo::generate_fabric(o));
  j["hash_model"] = {{"seed", -3}};
  try {
    parse_fabric_json(j.dump(), "bad.json");
    FAIL("accepted a negative seed");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "bad.json: hash_model.seed: expected a non-negative integer");
  }
}
