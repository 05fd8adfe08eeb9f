// ASTRAL_IB_PATHS=pinned through the whole ib transport: two processes on two softhca hosts of a
// fabric that `astral fabric generate` describes (ASTRAL_FABRIC), placed on a rail by
// ASTRAL_IB_HCA's dev:port:rail:plane. The QPs softhca saw reach RTR carry exactly the labels the
// planner gives for (source, destination, QP) -- so they are fixed, not per run -- the trace's
// connection record holds the same path, and the connection stays on its rail; with the fabric's
// hash model the QPs take disjoint uplinks. A cross-rail connection in a rail-only fabric fails
// with one WARN naming both rails.
#include <unistd.h>

#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "astral/trace/reader.hpp"
#include "child.hpp"
#include "harness.hpp"
#include "ib/path_plan.hpp"
#include "softhca_env.hpp"
#include "temp_dir.hpp"

using namespace astral::test;
namespace pp = astral::plugin::ib;
namespace topo = astral::topo;

namespace {

constexpr int kPinnedRail = 2;
constexpr int kPinnedQps = 4;

// A generated fabric (16 hosts of 8 GPUs, 4 per leaf) and two hosts under different leaves.
struct PinnedFabric {
  std::string file;
  std::string a, b;
  std::shared_ptr<const pp::FabricModel> model;
};

PinnedFabric pinned_fabric(const TempDir& dir, topo::FabricKind kind, bool hash) {
  topo::GenerateOptions o;
  o.kind = kind;
  o.gpus = 128;
  o.radix = 8;
  nlohmann::json doc = topo::fabric_to_json(topo::generate_fabric(o));
  if (hash) doc["hash_model"] = {{"seed", 5}, {"polarisation", 0.0}};
  PinnedFabric f;
  f.file = dir / "fabric.json";
  std::ofstream(f.file) << doc.dump();
  std::string error;
  f.model = pp::FabricModel::load(f.file, &error);
  INFO(error);
  REQUIRE(f.model);
  for (const topo::Host& h : f.model->fabric().hosts()) {
    if (h.segment == 0 && f.a.empty()) f.a = h.name;
    if (h.segment == 1 && f.b.empty()) f.b = h.name;
  }
  REQUIRE(!f.a.empty());
  REQUIRE(!f.b.empty());
  return f;
}

// softhca's view of the same two hosts: one RoCE NIC each, cabled to rail_a / rail_b.
std::string pinned_softhca_fabric(const TempDir& dir, const PinnedFabric& f, const std::string& reach,
                                  int rail_a, int rail_b) {
  nlohmann::json hosts = nlohmann::json::array();
  int n = 0;
  for (const std::string& host : {f.a, f.b}) {
    const int rail = n++ == 0 ? rail_a : rail_b;
    nlohmann::json gid = {{"gid", "::ffff:10.9.0." + std::to_string(n)}, {"type", "RoCEv2"}};
    nlohmann::json port = {{"port", 1}, {"link_layer", "Ethernet"}, {"mtu", 4096}, {"gids", {gid}}};
    nlohmann::json dev = {{"name", "mlx5_0"}, {"pci", "0000:17:00.0"}, {"board_id", "SOFTHCA_ROCE"},
                          {"rail", rail}, {"ports", {port}}};
    hosts.push_back({{"name", host}, {"devices", {dev}}});
  }
  const std::string path = dir / "softhca.json";
  std::ofstream(path) << nlohmann::json{{"reachability", reach}, {"hosts", hosts}}.dump();
  return path;
}

struct PinnedRun {
  std::string sent, received;
  int send_exit = -1;
  std::vector<nlohmann::json> rtr;  // softhca's path log
  std::vector<astral::trace::TraceFile> traces;
};

std::vector<std::string> pinned_env(const TempDir& dir, const std::string& shca, const std::string& fabric,
                                    const std::string& softhca, const std::string& host, int rail) {
  return {"ASTRAL_TRANSPORT=ib", "ASTRAL_IBVERBS_LIB=" + softhca_library(), "SOFTHCA_FABRIC=" + softhca,
          "SOFTHCA_DIR=" + shca, "SOFTHCA_HOST=" + host, "SOFTHCA_PATH_LOG=" + (dir / "path.jsonl"),
          "ASTRAL_HOSTNAME=" + host, "ASTRAL_IB_HCA==mlx5_0:1:" + std::to_string(rail) + ":0",
          "ASTRAL_IB_PATHS=pinned", "ASTRAL_FABRIC=" + fabric, "ASTRAL_IB_QPS=" + std::to_string(kPinnedQps),
          "ASTRAL_TRACE_DIR=" + (dir / host), "ASTRAL_IB_TIMEOUT=16", "ASTRAL_SOCKET_IFNAME=lo",
          "ASAN_OPTIONS=detect_leaks=0"};
}

// rail_peer recv on host b, rail_peer send on host a: 4 messages of 64 KiB, verified.
PinnedRun pinned_run(const TempDir& dir, const PinnedFabric& f, const std::string& softhca, int rail_a,
                     int rail_b) {
  const std::string shca = "/tmp/shca-pin-" + std::to_string(getpid());  // socket paths stay short
  std::filesystem::create_directories(shca);
  std::filesystem::create_directories(dir / f.a);
  std::filesystem::create_directories(dir / f.b);
  PinnedRun run;
  {
    Child recv({ASTRAL_RAIL_PEER, "recv", "65536", "4"}, pinned_env(dir, shca, f.file, softhca, f.b, rail_b));
    Child send({ASTRAL_RAIL_PEER, "send", "65536", "4"}, pinned_env(dir, shca, f.file, softhca, f.a, rail_a));
    for (std::string line = recv.read_line(); line != "ready"; line = recv.read_line()) send.write_line(line);
    std::string first = send.read_line(60);
    if (first == "streaming") {
      send.write_line("go");
      run.sent = send.read_rest(60);
      run.received = recv.read_rest(60);
    } else {
      run.sent = first + "\n" + send.read_rest(60);
    }
    run.send_exit = send.wait(30);
  }  // the receiver, if still waiting for a connection that failed, is killed here
  std::error_code ec;
  std::filesystem::remove_all(shca, ec);
  std::ifstream log(dir / "path.jsonl");
  for (std::string line; std::getline(log, line);) run.rtr.push_back(nlohmann::json::parse(line));
  for (const auto& file : astral::trace::find_trace_files({dir / f.a, dir / f.b}))
    run.traces.push_back(astral::trace::read_trace_file(file));
  return run;
}

// The labels the planner gives one direction of the connection, independent of the run.
std::vector<uint32_t> pinned_expected(const PinnedFabric& f, const std::string& from, const std::string& to,
                                      std::string* source) {
  pp::PathRequest r;
  r.policy = pp::PathPolicy::kPinned;
  r.local.host = from;
  r.remote.host = to;
  r.local.rail = r.remote.rail = kPinnedRail;
  r.local.plane = r.remote.plane = 0;
  r.local.gid_index = r.remote.gid_index = 0;
  r.nqps = kPinnedQps;
  r.fabric = f.model.get();
  pp::PathPlan plan = pp::plan_paths(r);
  REQUIRE(plan.ok());
  *source = plan.source;
  std::vector<uint32_t> labels;
  for (const pp::QpPath& q : plan.qps) labels.push_back(q.flow_label);
  return labels;
}

// The flow labels softhca saw at RTR on `host`, in QP creation order.
std::vector<uint32_t> pinned_rtr_labels(const PinnedRun& run, const std::string& host) {
  std::vector<std::pair<int, uint32_t>> qps;
  for (const auto& l : run.rtr) {
    if (l["host"] != host) continue;
    CHECK(l["rail"] == kPinnedRail);
    CHECK(l["peer"]["device"] == "mlx5_0");
    CHECK(l["udp_sport_from"] == "flow_label");
    CHECK(l["udp_sport"] == pp::flow_label_to_udp_sport(l["flow_label"].get<uint32_t>()));
    qps.emplace_back(l["qpn"].get<int>(), l["flow_label"].get<uint32_t>());
  }
  std::sort(qps.begin(), qps.end());
  std::vector<uint32_t> labels;
  for (auto& q : qps) labels.push_back(q.second);
  return labels;
}

void pinned_check(bool hash) {
  TempDir dir;
  PinnedFabric f = pinned_fabric(dir, topo::FabricKind::kSameRailT2, hash);
  PinnedRun run = pinned_run(dir, f, pinned_softhca_fabric(dir, f, "rail", kPinnedRail, kPinnedRail), kPinnedRail,
                               kPinnedRail);
  INFO(run.sent << run.received);
  REQUIRE(run.send_exit == 0);
  CHECK(run.sent.find("ok 4") != std::string::npos);
  CHECK(run.received.find("ok 4") != std::string::npos);
  std::string source, back_source;
  const auto forward = pinned_expected(f, f.a, f.b, &source);
  const auto back = pinned_expected(f, f.b, f.a, &back_source);
  CHECK(source == (hash ? pp::kSourceHashModel : pp::kSourceDeterministic));
  CHECK(pinned_rtr_labels(run, f.a) == forward);  // the sender's QPs carry the data direction
  CHECK(pinned_rtr_labels(run, f.b) == back);
  CHECK(std::set<uint32_t>(forward.begin(), forward.end()).size() == kPinnedQps);
  REQUIRE(run.traces.size() == 2);
  for (const auto& t : run.traces) {
    REQUIRE(t.connections.size() == 1);
    const auto& c = t.connections[0];
    REQUIRE(c.path);
    const auto& expected = c.connection.is_send ? forward : back;
    std::vector<uint32_t> recorded;
    std::set<int> uplinks;
    for (const auto& q : c.path->qps) {
      recorded.push_back(q.flow_label);
      CHECK(q.udp_sport == pp::flow_label_to_udp_sport(q.flow_label));
      uplinks.insert(q.uplink_link);
    }
    CHECK(recorded == expected);
    CHECK(c.path->transport == "ib");
    CHECK(c.path->policy == "pinned");
    CHECK(c.path->rail == kPinnedRail);
    CHECK(c.path->plane == 0);
    CHECK(c.path->link_layer == "RoCE");
    if (c.connection.is_send) {
      CHECK(c.path->source == source);
      // Hash model: each QP's first ECMP stage is a different uplink of the leaf.
      if (hash) CHECK(uplinks.size() == kPinnedQps);
      if (!hash) CHECK(uplinks == std::set<int>{-1});
    }
  }
}

}  // namespace

TEST_CASE("pinned over softhca with a hash model: QPs at RTR and the trace carry the planned labels",
          "[plugin][ib][pinned]") {
  pinned_check(true);
}

TEST_CASE("pinned over softhca without a hash model: labels fixed per (src, dst, QP), in the trace too",
          "[plugin][ib][pinned]") {
  pinned_check(false);
}

TEST_CASE("pinned over softhca: a cross-rail connection in a rail-only fabric fails with one WARN",
          "[plugin][ib][pinned]") {
  TempDir dir;
  PinnedFabric f = pinned_fabric(dir, topo::FabricKind::kRailOnly, true);
  PinnedRun run = pinned_run(dir, f, pinned_softhca_fabric(dir, f, "any", kPinnedRail, kPinnedRail + 1),
                             kPinnedRail, kPinnedRail + 1);
  INFO(run.sent);
  CHECK(run.send_exit == 1);
  CHECK(run.sent.rfind("error connect rail 0", 0) == 0);
  const std::string line = fmt::format("cross-rail connection from {} on rail {} to {} on rail {}", f.a,
                                       kPinnedRail, f.b, kPinnedRail + 1);
  size_t warns = 0;
  for (size_t at = run.sent.find(line); at != std::string::npos; at = run.sent.find(line, at + 1)) ++warns;
  CHECK(warns == 1);
  CHECK(run.rtr.empty());  // no QP reached RTR
}
