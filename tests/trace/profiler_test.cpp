// The profiler plugin in libnccl-net-astral.so, driven as NCCL drives it (helper/profiler_driver:
// dlopen, ncclProfiler_v5 / _v4, a ring all-reduce and a send/recv whose steps move their bytes
// through the net plugin), then the trace file it wrote: every event carries the join keys, both
// ranks compute the same step ids, and every net transfer leads back to its collective.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "abi/profiler_common.h"
#include "abi/profiler_v3.h"
#include "abi/profiler_v6.h"
#include "astral/trace/cluster.hpp"
#include "astral/trace/reader.hpp"
#include "run_process.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::test::run_process;
using astral::trace::test::TempDir;

namespace {

constexpr uint64_t kCommHash = 0x7e57c0ffee000001ull;
constexpr int kSteps = 4;  // per proxy op, as in the driver

TraceFile drive(const std::string& version, const std::string& dir, bool with_ce = false) {
  std::vector<std::string> args = {PROFILER_DRIVER, ASTRAL_NET_PLUGIN_SO, version};
  if (with_ce) args.push_back("ce");
  auto r = run_process(args, 60, {"ASTRAL_TRACE_DIR=" + dir});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  int want = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
             ncclProfileKernelCh | ncclProfileNetPlugin;
  if (version == "v6") want |= ncclProfileCeColl;  // CE collectives with the kernel ones
  CHECK(r.out.find("mask=" + std::to_string(want)) != std::string::npos);
  auto paths = find_trace_files({dir});
  REQUIRE(paths.size() == 1);
  return read_trace_file(paths[0]);
}

template <class T>
std::vector<const Event*> of_kind(const TraceFile& f, EventKind kind) {
  std::vector<const Event*> out;
  for (const Event& e : f.events)
    if (e.kind == kind && e.as<T>()) out.push_back(&e);
  return out;
}

// v3 learns the communicator from the first collective: its hash and rank, not its size.
void check_trace(const TraceFile& f, bool comm_size_known = true) {
  CHECK_FALSE(f.damage.corrupt());
  CHECK(f.info.closed);
  CHECK(f.info.rank == 0);
  CHECK(f.info.comm_hash == kCommHash);
  REQUIRE(f.comm(kCommHash) != nullptr);
  if (comm_size_known) CHECK(f.comm(kCommHash)->nranks == 2);

  // The all-reduce, once per rank, with NCCL's description.
  auto colls = of_kind<Collective>(f, EventKind::CollBegin);
  REQUIRE(colls.size() == 2);
  std::map<uint64_t, std::string> task_func;  // span -> func
  for (const Event* e : colls) {
    const Collective& c = *e->as<Collective>();
    CHECK(e->comm_hash == kCommHash);
    CHECK(f.str(c.func) == "AllReduce");
    CHECK(f.str(c.datatype) == "ncclFloat32");
    CHECK(f.str(c.algo) == "RING");
    CHECK(f.str(c.proto) == "SIMPLE");
    CHECK(c.seq == 0);
    CHECK(c.n_channels == 1);
    CHECK(c.count == kSteps * (64u << 10) / 4);
    task_func[c.span_id] = "AllReduce";
  }
  CHECK(of_kind<SpanEnd>(f, EventKind::CollEnd).size() == 2);
  CHECK(of_kind<Group>(f, EventKind::GroupBegin).size() == 2);
  CHECK(of_kind<SpanEnd>(f, EventKind::GroupEnd).size() == 2);
  auto p2ps = of_kind<P2p>(f, EventKind::P2pBegin);
  REQUIRE(p2ps.size() == 2);
  std::set<std::string> p2p_funcs;
  for (const Event* e : p2ps) {
    const P2p& p = *e->as<P2p>();
    CHECK(p.seq == 0);  // the first p2p between the two ranks, on both ends
    p2p_funcs.insert(std::string(f.str(p.func)));
    task_func[p.span_id] = "P2p";
  }
  CHECK(p2p_funcs == std::set<std::string>{"Send", "Recv"});

  // Proxy ops: 2 ranks x 2 directions for the all-reduce, 1 + 1 for the send/recv.
  std::map<uint64_t, uint64_t> op_parent;  // op span -> task span
  for (const Event* e : of_kind<ProxyOp>(f, EventKind::ProxyOpBegin)) {
    const ProxyOp& op = *e->as<ProxyOp>();
    CHECK(e->channel == 0);
    CHECK(op.n_steps == kSteps);
    REQUIRE(task_func.count(op.parent_id) == 1);
    op_parent[op.span_id] = op.parent_id;
  }
  CHECK(op_parent.size() == 6);
  CHECK(of_kind<SpanEnd>(f, EventKind::ProxyOpEnd).size() == 6);

  // Steps: each send step's id equals the matching receive step's id (computed on the other rank).
  std::map<uint64_t, uint64_t> step_op;  // step request id -> op span (either side)
  size_t step_ends = 0;
  for (const Event& e : f.events) {
    const ProxyStep* s = e.as<ProxyStep>();
    if (!s) continue;
    if (e.kind == EventKind::ProxyStepBegin) {
      REQUIRE(op_parent.count(s->parent_id) == 1);
      step_op[s->request_id] = s->parent_id;
    }
    if (e.kind == EventKind::ProxyStepEnd) {
      ++step_ends;
      CHECK(s->bytes == 64u << 10);
    }
  }
  CHECK(step_ends == 6 * kSteps);  // all-reduce: 2 ranks x 2 directions; send/recv: 1 + 1
  const Matching m = match_transfers({f});
  size_t step_pairs = 0, message_pairs = 0;
  for (const MatchedTransfer& t : m.transfers) {
    const bool both = t.send.present() && t.recv.present();
    CHECK(both);
    (t.level == TransferLevel::Step ? step_pairs : message_pairs) += both;
  }
  CHECK(step_pairs == 3 * kSteps);  // 2 directions of the all-reduce + the send, kSteps each
  CHECK(message_pairs == 3 * kSteps);
  CHECK(m.unmatched_sends == 0);
  CHECK(m.unmatched_recvs == 0);

  // Every net transfer, sent or received, is linked to its step, its op and its operation.
  std::map<uint64_t, uint64_t> message_step;
  for (const Event* e : of_kind<NetPluginLink>(f, EventKind::NetPluginEnd)) {
    const NetPluginLink& l = *e->as<NetPluginLink>();
    CHECK(l.conn_id != 0);
    CHECK(l.net_request_id != 0);
    message_step[l.net_request_id] = l.request_id;
  }
  size_t linked = 0;
  std::map<std::string, size_t> per_func;
  for (const Event& e : f.events) {
    if (e.kind != EventKind::NetSendDone && e.kind != EventKind::NetRecvDone) continue;
    const Transfer& t = *e.as<Transfer>();
    auto step = message_step.find(t.request_id);
    REQUIRE(step != message_step.end());
    REQUIRE(step_op.count(step->second) == 1);
    ++per_func[task_func.at(op_parent.at(step_op.at(step->second)))];
    ++linked;
  }
  CHECK(linked == 2 * 3 * kSteps);
  CHECK(per_func["AllReduce"] == 4 * kSteps);
  CHECK(per_func["P2p"] == 2 * kSteps);
}

}  // namespace

TEST_CASE("the profiler v6 table over net v12 (NCCL 2.30) records the same") {
  TempDir dir;
  check_trace(drive("v6", dir.path));
}

TEST_CASE("the profiler v6 table records copy-engine collectives and accepts their syncs and batches") {
  TempDir dir;
  TraceFile f = drive("v6", dir.path, true);
  CHECK_FALSE(f.damage.corrupt());
  int ce = 0;
  for (const Event* e : of_kind<Collective>(f, EventKind::CollBegin)) {
    const Collective& c = *e->as<Collective>();
    if (f.str(c.algo) != "CE") continue;
    ++ce;
    CHECK(f.str(c.func) == "AllGather");
    CHECK(f.str(c.proto) == "UC");
    CHECK(c.seq == 7);
    CHECK(c.count == 4096);
    CHECK(e->comm_hash == kCommHash);
  }
  CHECK(ce == 2);  // one per rank; CeSync and CeBatch are accepted and not recorded
}

TEST_CASE("the profiler v5 entry points driven as NCCL drives them record an all-reduce and a send/recv") {
  TempDir dir;
  check_trace(drive("v5", dir.path));
}

TEST_CASE("the profiler v4 table records the same") {
  TempDir dir;
  check_trace(drive("v4", dir.path));
}

TEST_CASE("the profiler v3 table (NCCL 2.24: commHash in the descriptors) records the same") {
  TempDir dir;
  check_trace(drive("v3", dir.path), false);
}

TEST_CASE("the profiler asks NCCL for nothing when tracing is off, and every table is exported") {
  // Not driven in this process: the library reads ASTRAL_TRACE_DIR once, when it first traces.
  auto r = run_process({PROFILER_DRIVER, ASTRAL_NET_PLUGIN_SO, "v5"}, 60, {"ASTRAL_TRACE_DIR="});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("mask=0") != std::string::npos);

  void* lib = dlopen(ASTRAL_NET_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib);
  for (const char* name : {"ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4", "ncclProfiler_v3", "ncclProfiler_v2",
                           "ncclProfiler_v1"}) {
    INFO(name);
    const auto* table = static_cast<const ncclProfiler_v3_t*>(dlsym(lib, name));
    REQUIRE(table);
    CHECK(std::string(table->name) == "Astral");
    CHECK(table->startEvent != nullptr);
    CHECK(table->stopEvent != nullptr);
    CHECK(table->recordEventState != nullptr);
    CHECK(table->finalize != nullptr);
    // NCCL passes back whatever startEvent returned, including null.
    CHECK(table->stopEvent(nullptr) == ncclSuccess);
    CHECK(table->recordEventState(nullptr, ncclProfilerProxyStepSendWait, nullptr) == ncclSuccess);
  }
  dlclose(lib);
}
