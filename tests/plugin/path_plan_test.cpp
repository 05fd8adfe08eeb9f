// The IB transport's path plan (plugin/src/ib/path_plan.hpp): mlx5's flow-label-to-port mapping,
// the spread/pinned/off rules, GID/SL/TC checks, DLID = base + path index on IB, disjoint uplinks
// under the fabric's hash model (checked by routing each planned port through the simulator's own
// PathSelector) and the refusal of a cross-rail connection in a rail-only fabric.
#include <unistd.h>

#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "ib/path_plan.hpp"

// No using-directive and prefixed helper names: the suite is compiled in unity batches.
namespace pp = astral::plugin::ib;
namespace topo = astral::topo;
using pp::LinkLayer;
using pp::PathPlan;
using pp::PathPolicy;
using pp::PathRequest;
using pp::QpPath;

namespace {

pp::PathEndpoint plan_roce(std::string host, int rail = 0, int plane = 0) {
  pp::PathEndpoint e;
  e.host = std::move(host);
  e.rail = rail;
  e.plane = plane;
  e.link_layer = LinkLayer::kRoCE;
  e.gid_index = 3;
  return e;
}

pp::PathEndpoint plan_ib(std::string host, std::uint16_t lid, int lmc) {
  pp::PathEndpoint e;
  e.host = std::move(host);
  e.link_layer = LinkLayer::kInfiniBand;
  e.base_lid = lid;
  e.lmc = lmc;
  return e;
}

PathRequest plan_request(PathPolicy policy, pp::PathEndpoint local, pp::PathEndpoint remote, int nqps,
                    std::uint64_t connection_id = 7) {
  PathRequest r;
  r.policy = policy;
  r.local = std::move(local);
  r.remote = std::move(remote);
  r.nqps = nqps;
  r.connection_id = connection_id;
  return r;
}

std::vector<std::uint16_t> plan_sports(const PathPlan& plan) {
  std::vector<std::uint16_t> out;
  for (const QpPath& q : plan.qps) out.push_back(q.udp_sport);
  return out;
}

std::vector<std::uint32_t> plan_labels(const PathPlan& plan) {
  std::vector<std::uint32_t> out;
  for (const QpPath& q : plan.qps) out.push_back(q.flow_label);
  return out;
}

// A small same-rail-t2 (or rail-only) fabric: 16 hosts of 8 GPUs, radix 8 leaves (4 hosts, 4
// uplinks each), optionally with a hash model.
std::shared_ptr<const pp::FabricModel> plan_fabric(topo::FabricKind kind, bool with_hash) {
  topo::GenerateOptions o;
  o.kind = kind;
  o.gpus = 128;
  o.radix = 8;
  nlohmann::json doc = topo::fabric_to_json(topo::generate_fabric(o));
  if (with_hash) doc["hash_model"] = {{"seed", 11}, {"polarisation", 0.0}};
  std::string error;
  auto model = pp::FabricModel::from_json(doc, "small.json", &error);
  INFO(error);
  REQUIRE(model);
  return model;
}

// Hosts under the leaf of `rail` in `segment`.
std::vector<std::string> plan_segment_hosts(const pp::FabricModel& m, int segment) {
  std::vector<std::string> out;
  for (const topo::Host& h : m.fabric().hosts())
    if (h.segment == segment) out.push_back(h.name);
  return out;
}

// The uplink a QP with this source port takes, routed independently of the plan's search.
int plan_routed_uplink(const pp::FabricModel& m, const std::string& src, const std::string& dst, int rail,
                  std::uint16_t sport) {
  const topo::Fabric& f = m.fabric();
  int sh = *f.find_host(src), dh = *f.find_host(dst);
  int sl = m.router().port_link(sh, f.nic_on_rail(sh, rail), 1);
  int dl = m.router().port_link(dh, f.nic_on_rail(dh, rail), 1);
  std::vector<int> resources;
  REQUIRE(m.selector()->route_links(sl, dl, astral::topo::roce_flow_key(sl, dl, sport), resources));
  REQUIRE(resources.size() >= 3);
  return topo::Router::link_of_resource(resources[1]);  // [0] is the host link up
}

}  // namespace

TEST_CASE("path plan: mlx5's flow label to UDP source port mapping and its inverse", "[plugin][ib][unit]") {
  // low 14 bits XOR bits 14..19, OR 0xC000 (rdma_flow_label_to_udp_sport).
  CHECK(pp::flow_label_to_udp_sport(0x12345) == (0xC000 | (0x2345 ^ 0x4)));
  CHECK(pp::flow_label_to_udp_sport(0xFFFFF) == (0xC000 | (0x3FFF ^ 0x3F)));
  CHECK(pp::flow_label_to_udp_sport(0x00001) == 0xC001);
  CHECK(pp::flow_label_to_udp_sport(0x04001) == 0xC000);
  for (std::uint32_t low = 0; low < 0x4000; ++low) {
    auto sport = std::uint16_t(0xC000 | low);
    std::uint32_t label = pp::flow_label_for_udp_sport(sport);
    REQUIRE(label != 0);
    REQUIRE(label <= pp::kFlowLabelMask);
    REQUIRE(pp::flow_label_to_udp_sport(label) == sport);
  }
}

TEST_CASE("path plan: ASTRAL_IB_PATHS values, default and one warning for a bad value", "[plugin][ib][unit]") {
  std::string error;
  CHECK(pp::parse_path_policy(nullptr, &error) == pp::kDefaultPathPolicy);
  CHECK(pp::parse_path_policy("", &error) == pp::kDefaultPathPolicy);
  CHECK(pp::parse_path_policy("spread", &error) == PathPolicy::kSpread);
  CHECK(pp::parse_path_policy("pinned", &error) == PathPolicy::kPinned);
  CHECK(pp::parse_path_policy("off", &error) == PathPolicy::kOff);
  CHECK(error.empty());
  CHECK_FALSE(pp::parse_path_policy("Pinned ", &error));
  CHECK(error == "ASTRAL_IB_PATHS='Pinned ': expected spread, pinned or off; using spread");
  CHECK(pp::policy_name(PathPolicy::kPinned) == "pinned");
}

TEST_CASE("path plan: pinned without a hash model is fixed per (src, dst, qp) and spread evenly",
          "[plugin][ib][unit]") {
  PathPlan a = pp::plan_paths(plan_request(PathPolicy::kPinned, plan_roce("alpha"), plan_roce("beta"), 4, 1));
  PathPlan b = pp::plan_paths(plan_request(PathPolicy::kPinned, plan_roce("alpha"), plan_roce("beta"), 4, 99));
  REQUIRE(a.ok());
  CHECK(a.source == pp::kSourceDeterministic);
  CHECK(a.note.empty());
  CHECK(plan_labels(a) == plan_labels(b));  // another connection (comm) between the same ends: same labels
  auto s = plan_sports(a);
  REQUIRE(s.size() == 4);
  for (size_t q = 0; q < s.size(); ++q) {
    CHECK(s[q] >= 0xC000);
    CHECK(a.qps[q].flow_label != 0);
    CHECK(pp::flow_label_to_udp_sport(a.qps[q].flow_label) == s[q]);
    // Evenly spread: consecutive QPs a quarter of the 14-bit port space apart.
    CHECK(((s[(q + 1) % 4] - s[q]) & 0x3FFF) == 0x1000);
  }
  PathPlan back = pp::plan_paths(pp::reversed(plan_request(PathPolicy::kPinned, plan_roce("alpha"), plan_roce("beta"), 4)));
  CHECK(plan_labels(back) != plan_labels(a));  // each direction has its own flows
  PathPlan other = pp::plan_paths(plan_request(PathPolicy::kPinned, plan_roce("alpha"), plan_roce("gamma"), 4));
  CHECK(plan_labels(other) != plan_labels(a));
}

TEST_CASE("path plan: spread gives distinct ports per QP, varied per connection", "[plugin][ib][unit]") {
  for (int nqps : {1, 2, 7, 128}) {
    PathPlan p = pp::plan_paths(plan_request(PathPolicy::kSpread, plan_roce("alpha"), plan_roce("beta"), nqps, 5));
    REQUIRE(p.ok());
    CHECK(p.source == pp::kSourceSpread);
    REQUIRE(int(p.qps.size()) == nqps);
    auto s = plan_sports(p);
    CHECK(std::set<std::uint16_t>(s.begin(), s.end()).size() == size_t(nqps));
    for (const QpPath& q : p.qps) CHECK(q.flow_label != 0);
  }
  PathPlan x = pp::plan_paths(plan_request(PathPolicy::kSpread, plan_roce("alpha"), plan_roce("beta"), 2, 5));
  PathPlan y = pp::plan_paths(plan_request(PathPolicy::kSpread, plan_roce("alpha"), plan_roce("beta"), 2, 6));
  CHECK(plan_labels(x) != plan_labels(y));
  CHECK(plan_labels(x) == plan_labels(pp::plan_paths(plan_request(PathPolicy::kSpread, plan_roce("alpha"), plan_roce("beta"), 2, 5))));
}

TEST_CASE("path plan: off is NCCL's flow label 0 and the peer's base LID", "[plugin][ib][unit]") {
  PathPlan r = pp::plan_paths(plan_request(PathPolicy::kOff, plan_roce("alpha"), plan_roce("beta"), 3));
  REQUIRE(r.ok());
  CHECK(r.source == pp::kSourceOff);
  for (const QpPath& q : r.qps) CHECK((q.flow_label == 0 && q.udp_sport == 0));
  PathPlan i = pp::plan_paths(plan_request(PathPolicy::kOff, plan_ib("alpha", 1, 0), plan_ib("beta", 8, 2), 3));
  REQUIRE(i.ok());
  for (const QpPath& q : i.qps) CHECK((q.dlid == 8 && q.path_index == 0 && q.flow_label == 0));
}

TEST_CASE("path plan: IB DLID = base LID + path index within the peer's LMC", "[plugin][ib][unit]") {
  for (PathPolicy policy : {PathPolicy::kSpread, PathPolicy::kPinned}) {
    PathPlan p = pp::plan_paths(plan_request(policy, plan_ib("alpha", 1, 0), plan_ib("beta", 16, 2), 4));
    REQUIRE(p.ok());
    CHECK(p.gid_index == -1);
    std::set<int> indexes;
    for (const QpPath& q : p.qps) {
      CHECK(q.path_index >= 0);
      CHECK(q.path_index < 4);
      CHECK(q.dlid == 16 + q.path_index);
      CHECK(q.flow_label == 0);
      indexes.insert(q.path_index);
    }
    CHECK(indexes.size() == 4);  // 4 QPs over 2^2 paths: each its own
  }
  PathPlan lmc0 = pp::plan_paths(plan_request(PathPolicy::kSpread, plan_ib("alpha", 1, 0), plan_ib("beta", 16, 0), 4));
  for (const QpPath& q : lmc0.qps) CHECK(q.dlid == 16);
  PathPlan pinned1 = pp::plan_paths(plan_request(PathPolicy::kPinned, plan_ib("alpha", 1, 0), plan_ib("beta", 16, 3), 2, 1));
  PathPlan pinned2 = pp::plan_paths(plan_request(PathPolicy::kPinned, plan_ib("alpha", 1, 0), plan_ib("beta", 16, 3), 2, 2));
  CHECK(pinned1.qps[0].dlid == pinned2.qps[0].dlid);
  CHECK(pinned1.qps[1].dlid == pinned2.qps[1].dlid);
}

TEST_CASE("path plan: GID, SL and TC rules, and bad requests refused with one line", "[plugin][ib][unit]") {
  PathRequest r = plan_request(PathPolicy::kPinned, plan_roce("alpha"), plan_roce("beta"), 2);
  r.sl = 3;
  r.tc = 106;  // DSCP 26 << 2
  r.local.gid_index = 5;
  PathPlan p = pp::plan_paths(r);
  REQUIRE(p.ok());
  CHECK((p.sl == 3 && p.tc == 106 && p.gid_index == 5));
  CHECK(p.link_layer == LinkLayer::kRoCE);
  for (const QpPath& q : p.qps) CHECK(q.dlid == 0);

  auto refused = [](PathRequest bad) { return pp::plan_paths(bad).error; };
  PathRequest no_gid = r;
  no_gid.local.gid_index = -1;
  CHECK(refused(no_gid) == "path plan: no GID index chosen for RoCE port alpha rail 0 plane 0 port 1");
  PathRequest sl = r;
  sl.sl = 16;
  CHECK(refused(sl) == "path plan: SL 16 out of range [0, 15] (ASTRAL_IB_SL)");
  PathRequest tc = r;
  tc.tc = 256;
  CHECK(refused(tc) == "path plan: traffic class 256 out of range [0, 255] (ASTRAL_IB_TC)");
  PathRequest qps = r;
  qps.nqps = 0;
  CHECK(refused(qps) == "path plan: 0 QPs per connection out of range [1, 128] (ASTRAL_IB_QPS)");
  PathRequest mixed = plan_request(PathPolicy::kSpread, plan_roce("alpha"), plan_ib("beta", 4, 0), 1);
  CHECK(refused(mixed).find("the link layers differ") != std::string::npos);
  PathRequest no_lid = plan_request(PathPolicy::kSpread, plan_ib("alpha", 1, 0), plan_ib("beta", 0, 0), 1);
  CHECK(refused(no_lid) == "path plan: LID 0 (LMC 0) of beta rail 0 plane 0 port 1 is not a unicast LID range");
  PathRequest lmc = plan_request(PathPolicy::kSpread, plan_ib("alpha", 1, 0), plan_ib("beta", 4, 8), 1);
  CHECK(refused(lmc).find("LMC 8") != std::string::npos);
  CHECK(pp::plan_paths(no_gid).qps.empty());
}

TEST_CASE("path plan: pinned with the hash model puts a rail's flows from one leaf on disjoint uplinks",
          "[plugin][ib][unit]") {
  auto model = plan_fabric(topo::FabricKind::kSameRailT2, true);
  auto sources = plan_segment_hosts(*model, 0);
  auto destinations = plan_segment_hosts(*model, 1);
  REQUIRE(sources.size() == 4);  // radix 8: 4 host ports and 4 uplinks per leaf
  REQUIRE(destinations.size() == 4);
  for (int rail : {0, 5}) {
    for (int nqps : {1, 2}) {
      // Each host of segment 0 sends to a host of segment 1 (a permutation across leaves); with 2
      // QPs only the first two hosts fit the 4 uplinks disjointly.
      std::set<int> uplinks;
      size_t senders = nqps == 1 ? sources.size() : 2;
      for (size_t i = 0; i < senders; ++i) {
        PathRequest r = plan_request(PathPolicy::kPinned, plan_roce(sources[i], rail), plan_roce(destinations[(i + 1) % 4], rail),
                                nqps);
        r.fabric = model.get();
        PathPlan p = pp::plan_paths(r);
        INFO(pp::format_plan(p, r));
        REQUIRE(p.ok());
        CHECK(p.source == pp::kSourceHashModel);
        for (const QpPath& q : p.qps) {
          CHECK(q.flow_label != 0);
          CHECK(plan_routed_uplink(*model, sources[i], destinations[(i + 1) % 4], rail, q.udp_sport) == q.uplink);
          uplinks.insert(q.uplink);
        }
      }
      CHECK(uplinks.size() == senders * size_t(nqps));
    }
  }
  // Fixed: planning again (another comm) gives the same ports.
  PathRequest r = plan_request(PathPolicy::kPinned, plan_roce(sources[0]), plan_roce(destinations[0]), 2, 1);
  r.fabric = model.get();
  PathRequest again = r;
  again.connection_id = 1234;
  CHECK(plan_labels(pp::plan_paths(r)) == plan_labels(pp::plan_paths(again)));
  CHECK(pp::plan_to_json(pp::plan_paths(r))["qps"][0]["uplink"].get<std::string>().find(" -> ") != std::string::npos);
}

TEST_CASE("path plan: pinned falls back to deterministic labels and says why", "[plugin][ib][unit]") {
  auto no_hash = plan_fabric(topo::FabricKind::kSameRailT2, false);
  auto hosts = plan_segment_hosts(*no_hash, 0);
  PathRequest r = plan_request(PathPolicy::kPinned, plan_roce(hosts[0]), plan_roce(plan_segment_hosts(*no_hash, 1)[0]), 2);
  r.fabric = no_hash.get();
  PathPlan p = pp::plan_paths(r);
  CHECK(p.source == pp::kSourceDeterministic);
  CHECK(p.note == "fabric small.json carries no hash_model");

  auto hashed = plan_fabric(topo::FabricKind::kSameRailT2, true);
  r.fabric = hashed.get();
  r.remote = plan_roce(hosts[1]);  // the same leaf: no ECMP stage
  p = pp::plan_paths(r);
  CHECK(p.source == pp::kSourceDeterministic);
  CHECK(p.note.find("no ECMP stage") != std::string::npos);
  r.remote = plan_roce("node9999");
  p = pp::plan_paths(r);
  CHECK(p.source == pp::kSourceDeterministic);
  CHECK(p.note == "host 'node9999' is not in fabric small.json");
  CHECK(pp::format_plan(p, r).find("(host 'node9999' is not in fabric small.json)") != std::string::npos);
}

TEST_CASE("path plan: a cross-rail connection in a rail-only fabric is refused naming both rails",
          "[plugin][ib][unit]") {
  auto model = plan_fabric(topo::FabricKind::kRailOnly, true);
  auto a = plan_segment_hosts(*model, 0), b = plan_segment_hosts(*model, 1);
  for (PathPolicy policy : {PathPolicy::kPinned, PathPolicy::kSpread, PathPolicy::kOff}) {
    PathRequest r = plan_request(policy, plan_roce(a[0], 2), plan_roce(b[0], 3), 1);
    r.fabric = model.get();
    PathPlan p = pp::plan_paths(r);
    CHECK_FALSE(p.ok());
    CHECK(p.error == fmt::format("path plan: cross-rail connection from {} on rail 2 to {} on rail 3 in "
                                 "rail-only fabric small.json: rails meet only over NVLink (PXN); "
                                 "refusing it", a[0], b[0]));
    CHECK(pp::format_plan(p, r) == p.error);
    CHECK(pp::plan_to_json(p)["error"] == p.error);
    r.remote.rail = 2;
    CHECK(pp::plan_paths(r).ok());
  }
  // The same request in a same-rail-t2 fabric (a core joins the rails) is fine.
  auto joined = plan_fabric(topo::FabricKind::kSameRailT2, true);
  PathRequest r = plan_request(PathPolicy::kPinned, plan_roce(a[0], 2), plan_roce(b[0], 3), 1);
  r.fabric = joined.get();
  CHECK(pp::plan_paths(r).ok());
}

TEST_CASE("path plan: the fabric file's errors name the file", "[plugin][ib][unit]") {
  std::string error;
  CHECK_FALSE(pp::FabricModel::load("/nonexistent/fabric.json", &error));
  CHECK(error == "/nonexistent/fabric.json: cannot open the fabric file");
  std::string path = "/tmp/astral-path-plan-" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << "{\"format\": \"astral-fabric\",";
  CHECK_FALSE(pp::FabricModel::load(path, &error));
  CHECK(error == path + ": not valid JSON");
  topo::GenerateOptions o;
  o.gpus = 16;
  o.radix = 8;
  nlohmann::json doc = topo::fabric_to_json(topo::generate_fabric(o));
  doc["hash_model"] = {{"seed", -1}};
  std::ofstream(path) << doc.dump();
  CHECK_FALSE(pp::FabricModel::load(path, &error));
  CHECK(error == path + ": hash_model.seed: expected a non-negative integer");
  doc["hash_model"] = {{"seed", 3}};
  doc["rails"] = "eight";
  std::ofstream(path) << doc.dump();
  CHECK_FALSE(pp::FabricModel::load(path, &error));
  CHECK(error.rfind(path + ": ", 0) == 0);
  doc["rails"] = 8;
  std::ofstream(path) << doc.dump();
  auto model = pp::FabricModel::load(path, &error);
  REQUIRE(model);
  CHECK(model->hash_model()->seed == 3);
  std::remove(path.c_str());
}

TEST_CASE("path plan: the INFO line and the trace JSON carry plane, SL, TC, ports and DLIDs",
          "[plugin][ib][unit]") {
  PathRequest r = plan_request(PathPolicy::kPinned, plan_roce("alpha", 1, 1), plan_roce("beta", 1, 1), 2);
  r.local.port = 2;
  r.tc = 106;
  PathPlan p = pp::plan_paths(r);
  std::string line = pp::format_plan(p, r);
  CHECK(line.rfind("path plan pinned (deterministic per (src,dst,qp)) RoCE alpha rail 1 plane 1 port 2 -> "
                   "beta rail 1 plane 1 port 1: gid 3 sl 0 tc 106; qp0 label ", 0) == 0);
  CHECK(line.find(fmt::format("sport {}", p.qps[1].udp_sport)) != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  nlohmann::json j = pp::plan_to_json(p);
  CHECK(j["policy"] == "pinned");
  CHECK(j["source"] == pp::kSourceDeterministic);
  CHECK((j["plane"] == 1 && j["port"] == 2 && j["rail"] == 1 && j["tc"] == 106 && j["gid_index"] == 3));
  REQUIRE(j["qps"].size() == 2);
  CHECK(j["qps"][1]["udp_sport"] == p.qps[1].udp_sport);
  CHECK(j["qps"][1]["flow_label"] == p.qps[1].flow_label);
  PathPlan i = pp::plan_paths(plan_request(PathPolicy::kSpread, plan_ib("alpha", 1, 0), plan_ib("beta", 20, 1), 2));
  std::string ib_line = pp::format_plan(i, plan_request(PathPolicy::kSpread, plan_ib("alpha", 1, 0), plan_ib("beta", 20, 1), 2));
  CHECK(ib_line.find("IB alpha") != std::string::npos);
  CHECK(ib_line.find(fmt::format("qp0 dlid {} path {}", i.qps[0].dlid, i.qps[0].path_index)) != std::string::npos);
  CHECK(ib_line.find("gid") == std::string::npos);
  CHECK(pp::plan_to_json(i)["qps"][1]["dlid"] == i.qps[1].dlid);
}
