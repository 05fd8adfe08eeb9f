// Drives libnccl-net-astral.so the way NCCL 2.28 drives its profiler and net plugins, for the
// trace suite: two ranks of one communicator in this process (as with ncclCommInitAll), a ring
// all-reduce and a send/recv, each with its group, collective / p2p, proxy ops and proxy steps,
// and every step's bytes moved through the net plugin over loopback with the step as the net
// event's parent (NCCL's profiler callback, emulated as §4.3 of the ABI reference describes).
//
//   profiler_driver PLUGIN.so v6|v5|v4|v3 [ce]   ASTRAL_TRACE_DIR from the environment
// v6 drives ncclProfiler_v6 over ncclNetPlugin_v12 (NCCL 2.30); "ce" adds a copy-engine
// all-gather per rank (CeColl with a CeSync and a CeBatch under it, as NCCL 2.29+ emits them).
// Prints "mask=<activation mask>" and exits 0, or names what failed and exits 1.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi/net_v11.h"
#include "abi/net_v12.h"
#include "abi/profiler_v3.h"
#include "abi/profiler_v4.h"
#include "abi/profiler_v5.h"
#include "abi/profiler_v6.h"

namespace {

constexpr uint64_t kCommHash = 0x7e57c0ffee000001ull;
constexpr int kSteps = 4;
constexpr size_t kChunk = 64 << 10;

int g_mask = 0;  // NCCL's process-wide ncclProfilerEventMask
const ncclProfiler_v6_t* g_v6 = nullptr;
const ncclProfiler_v5_t* g_v5 = nullptr;
const ncclProfiler_v4_t* g_v4 = nullptr;
const ncclProfiler_v3_t* g_v3 = nullptr;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}
void check(ncclResult_t r, const char* what) { check(r == ncclSuccess, what); }

// The profiler through whichever table was chosen; descriptors are built as v5 and copied
// member by member into v4's or v3's layout (v3: the commHash in collectives and p2p).
ncclProfilerEventDescr_v4_t to_v4(const ncclProfilerEventDescr_v5_t& d) {
  ncclProfilerEventDescr_v4_t o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  switch (d.type) {
    case ncclProfileColl:
      o.coll = {d.coll.seqNumber, d.coll.func,  d.coll.sendBuff, d.coll.recvBuff,  d.coll.count, d.coll.root,
                d.coll.datatype,  d.coll.nChannels, d.coll.nWarps, d.coll.algo, d.coll.proto};
      break;
    case ncclProfileP2p:
      o.p2p = {d.p2p.func, d.p2p.buff, d.p2p.datatype, d.p2p.count, d.p2p.peer, d.p2p.nChannels};
      break;
    case ncclProfileProxyOp: std::memcpy(&o.proxyOp, &d.proxyOp, sizeof o.proxyOp); break;
    case ncclProfileProxyStep: o.proxyStep.step = d.proxyStep.step; break;
    case ncclProfileNetPlugin: o.netPlugin = {d.netPlugin.id, d.netPlugin.data}; break;
    default: break;
  }
  return o;
}
ncclProfilerEventDescr_v3_t to_v3(const ncclProfilerEventDescr_v5_t& d) {
  ncclProfilerEventDescr_v3_t o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  switch (d.type) {
    case ncclProfileColl:
      o.coll = {nullptr,        kCommHash,          d.coll.seqNumber, d.coll.func, d.coll.sendBuff,
                d.coll.recvBuff, d.coll.count,      d.coll.root,      d.coll.datatype, d.coll.nChannels,
                d.coll.nWarps,  d.coll.algo,        d.coll.proto};
      break;
    case ncclProfileP2p:
      o.p2p = {nullptr, kCommHash, d.p2p.func, d.p2p.buff, d.p2p.datatype, d.p2p.count, d.p2p.peer};
      break;
    case ncclProfileProxyOp: std::memcpy(&o.proxyOp, &d.proxyOp, sizeof o.proxyOp); break;
    case ncclProfileProxyStep: o.proxyStep.step = d.proxyStep.step; break;
    case ncclProfileNetPlugin: o.netPlugin = {d.netPlugin.id, d.netPlugin.data}; break;
    default: break;
  }
  return o;
}
void* start(void* ctx, ncclProfilerEventDescr_v5_t d) {
  void* handle = nullptr;
  if (!(g_mask & static_cast<int>(d.type))) return nullptr;  // NCCL asks only for masked-in types
  if (g_v6) {
    static_assert(sizeof(ncclProfilerEventDescr_v6_t) >= sizeof(ncclProfilerEventDescr_v5_t));
    ncclProfilerEventDescr_v6_t o{};
    std::memcpy(&o, &d, sizeof d);
    check(g_v6->startEvent(ctx, &handle, &o), "startEvent v6");
  } else if (g_v5) {
    check(g_v5->startEvent(ctx, &handle, &d), "startEvent");
  } else if (g_v3) {
    ncclProfilerEventDescr_v3_t o = to_v3(d);
    check(g_v3->startEvent(ctx, &handle, &o), "startEvent v3");
  } else {
    ncclProfilerEventDescr_v4_t o = to_v4(d);
    check(g_v4->startEvent(ctx, &handle, &o), "startEvent v4");
  }
  return handle;
}
void stop(void* handle) {
  check(g_v5 ? g_v5->stopEvent(handle) : g_v3 ? g_v3->stopEvent(handle) : g_v4->stopEvent(handle), "stopEvent");
}
void state(void* handle, ncclProfilerEventState_t s, uint64_t word) {
  ncclProfilerEventStateArgs_v5_t a{};
  std::memcpy(&a, &word, sizeof word);
  if (g_v3) {  // v3's union is 16 bytes: transSize first, as in every version
    ncclProfilerEventStateArgs_v3_t a3{};
    std::memcpy(&a3, &word, sizeof word);
    check(g_v3->recordEventState(handle, s, &a3), "recordEventState v3");
    return;
  }
  if (g_v6) {
    static_assert(sizeof(ncclProfilerEventStateArgs_v6_t) >= sizeof word);
    ncclProfilerEventStateArgs_v6_t a6{};
    std::memcpy(&a6, &word, sizeof word);
    check(g_v6->recordEventState(handle, static_cast<ncclProfilerEventState_v6_t>(s), &a6),
          "recordEventState v6");
    return;
  }
  check(g_v5 ? g_v5->recordEventState(handle, s, &a)
             : g_v4->recordEventState(handle, s, reinterpret_cast<ncclProfilerEventStateArgs_v4_t*>(&a)),
        "recordEventState");
}

// What NCCL's phandle points to: the proxy step's profiler handle and the rank's context.
struct StepEventRef {
  void* step_handle = nullptr;
  void* context = nullptr;
  int rank = 0;
};

// NCCL's ncclProfilerCallback for net plugin events.
ncclResult_t profiler_callback(void** event, int type, void* phandle, int64_t plugin_id, void* ext) {
  if (type == ncclProfilerNetEventStart) {
    auto* ref = static_cast<StepEventRef*>(phandle);
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileNetPlugin;
    d.parentObj = ref->step_handle;
    d.rank = ref->rank;
    d.netPlugin.id = plugin_id;
    d.netPlugin.data = ext;
    if (g_mask & ncclProfileNetPlugin) *event = start(ref->context, d);  // else left untouched
    return ncclSuccess;
  }
  if (type == ncclProfilerNetEventUpdate || type == ncclProfilerNetEventUpdateAndStop) {
    state(*event, ncclProfilerNetPluginUpdate, reinterpret_cast<uintptr_t>(ext));
  }
  if (type == ncclProfilerNetEventStop || type == ncclProfilerNetEventUpdateAndStop) stop(*event);
  return ncclSuccess;
}

struct Rank {
  int rank = 0;
  void* prof = nullptr;
  void* send = nullptr;  // to the other rank
  void* recv = nullptr;  // from the other rank
  std::vector<char> out = std::vector<char>(kChunk, 'a'), in = std::vector<char>(kChunk);
};

void wait_all(const ncclNet_v11_t& net, std::vector<void*>& requests) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (bool pending = true; pending;) {
    pending = false;
    for (void*& r : requests) {
      if (!r) continue;
      int done = 0, size = 0;
      check(net.test(r, &done, &size), "test");
      if (done) r = nullptr;
      else pending = true;
    }
    check(std::chrono::steady_clock::now() < deadline, "transfers did not complete in 30 s");
  }
}

// One proxy op pair per rank on channel 0 (rank r sends to the other and receives from it),
// kSteps steps each, every step one net transfer; `parents` are the ranks' collective / p2p
// handles, `sends` / `recvs` say which directions this operation has on each rank.
void run_proxy(const ncclNet_v11_t& net, Rank* ranks, void* const* parents, const bool* sends,
               const bool* recvs) {
  void* ops[2][2] = {};
  for (int r = 0; r < 2; ++r) {
    for (int dir = 0; dir < 2; ++dir) {
      if (!(dir ? sends[r] : recvs[r])) continue;
      ncclProfilerEventDescr_v5_t d{};
      d.type = ncclProfileProxyOp;
      d.parentObj = parents[r];
      d.rank = r;
      d.proxyOp = {getpid(), 0, 1 - r, kSteps, int(kChunk), dir};
      ops[r][dir] = start(ranks[r].prof, d);
    }
  }
  for (int s = 0; s < kSteps; ++s) {
    StepEventRef refs[2][2];
    std::vector<void*> requests;
    void* steps[2][2] = {};
    for (int r = 0; r < 2; ++r) {
      for (int dir = 0; dir < 2; ++dir) {
        if (!(dir ? sends[r] : recvs[r])) continue;
        ncclProfilerEventDescr_v5_t d{};
        d.type = ncclProfileProxyStep;
        d.parentObj = ops[r][dir];
        d.rank = r;
        d.proxyStep.step = s;
        steps[r][dir] = start(ranks[r].prof, d);
        refs[r][dir] = {steps[r][dir], ranks[r].prof, r};
        state(steps[r][dir], dir ? ncclProfilerProxyStepSendGPUWait : ncclProfilerProxyStepRecvWait, 0);
        void* request = nullptr;
        if (dir) {
          state(steps[r][dir], ncclProfilerProxyStepSendWait, kChunk);  // transSize
          check(net.isend(ranks[r].send, ranks[r].out.data(), kChunk, r, nullptr, &refs[r][dir], &request), "isend");
        } else {
          void* data = ranks[r].in.data();
          size_t size = kChunk;
          int tag = 1 - r;
          void* phandle = &refs[r][dir];
          check(net.irecv(ranks[r].recv, 1, &data, &size, &tag, nullptr, &phandle, &request), "irecv");
        }
        check(request != nullptr, "the plugin did not accept the transfer");
        requests.push_back(request);
      }
    }
    wait_all(net, requests);
    for (int r = 0; r < 2; ++r) {
      for (int dir = 0; dir < 2; ++dir) {
        if (!steps[r][dir]) continue;
        if (!dir) state(steps[r][dir], ncclProfilerProxyStepRecvGPUWait, kChunk);
        stop(steps[r][dir]);
      }
    }
  }
  for (auto& rank_ops : ops)
    for (void* op : rank_ops)
      if (op) stop(op);
}

// A copy-engine all-gather per rank, from the launching thread: CeColl without a CollApi parent,
// then a sync and a batch under it; NCCL records no states for CE events.
void run_ce_collective(Rank* ranks) {
  check(g_v6 != nullptr, "ce needs v6");
  check((g_mask & ncclProfileCeColl) != 0, "the v6 mask does not ask for CE collectives");
  for (int r = 0; r < 2; ++r) {
    ncclProfilerEventDescr_v6_t c{};
    c.type = ncclProfileCeColl;
    c.parentObj = nullptr;
    c.rank = r;
    c.ceColl.seqNumber = 7;
    c.ceColl.func = "AllGather";
    c.ceColl.count = 4096;
    c.ceColl.root = 0;
    c.ceColl.datatype = "ncclInt8";
    c.ceColl.syncStrategy = "UC";
    c.ceColl.ceSeqNum = 7;
    void* coll = nullptr;
    check(g_v6->startEvent(ranks[r].prof, &coll, &c), "startEvent CeColl");
    check(coll != nullptr, "no handle for a CE collective");
    ncclProfilerEventDescr_v6_t s{};
    s.type = ncclProfileCeSync;
    s.parentObj = coll;
    s.rank = r;
    s.ceCollSync.isComplete = false;
    s.ceCollSync.nRanks = 2;
    void* sync = reinterpret_cast<void*>(1);
    check(g_v6->startEvent(ranks[r].prof, &sync, &s), "startEvent CeSync");
    check(g_v6->stopEvent(sync), "stopEvent CeSync");
    ncclProfilerEventDescr_v6_t b{};
    b.type = ncclProfileCeBatch;
    b.parentObj = coll;
    b.rank = r;
    b.ceCollBatch.numOps = 2;
    b.ceCollBatch.totalBytes = 8192;
    void* batch = reinterpret_cast<void*>(1);
    check(g_v6->startEvent(ranks[r].prof, &batch, &b), "startEvent CeBatch");
    check(g_v6->stopEvent(batch), "stopEvent CeBatch");
    check(g_v6->stopEvent(coll), "stopEvent CeColl");
  }
}

int run(const char* path, const std::string& version, bool with_ce) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  check(lib != nullptr, "dlopen failed");
  auto* net = static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  check(net != nullptr, "no ncclNetPlugin_v11");
  const ncclNet_v12_t* net12 = nullptr;
  if (version == "v6") {
    // NCCL 2.30: the v12 net table and the v6 profiler. v12's calls have v11's types except init
    // (its config type), which is called through net12 below. The v6 profiler's descriptor and
    // state arguments keep every v5 member at its v5 offset: the v5 code path drives it, and
    // start()/state() call v6's own typed entries, since clang's UBSan checks the type of every
    // call through a function pointer (init, stopEvent and finalize have the same types).
    net12 = static_cast<const ncclNet_v12_t*>(dlsym(lib, "ncclNetPlugin_v12"));
    check(net12 != nullptr, "no ncclNetPlugin_v12");
    net = reinterpret_cast<const ncclNet_v11_t*>(net12);
    g_v6 = static_cast<const ncclProfiler_v6_t*>(dlsym(lib, "ncclProfiler_v6"));
    g_v5 = reinterpret_cast<const ncclProfiler_v5_t*>(g_v6);
  }
  if (version == "v5") g_v5 = static_cast<const ncclProfiler_v5_t*>(dlsym(lib, "ncclProfiler_v5"));
  if (version == "v4") g_v4 = static_cast<const ncclProfiler_v4_t*>(dlsym(lib, "ncclProfiler_v4"));
  if (version == "v3") g_v3 = static_cast<const ncclProfiler_v3_t*>(dlsym(lib, "ncclProfiler_v3"));
  check(g_v5 || g_v4 || g_v3, "no profiler table of that version");

  // NCCL: profiler init per communicator (here: per rank), then net init with its callback.
  Rank ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    check(g_v5   ? g_v5->init(&ranks[r].prof, kCommHash, &g_mask, "driver", 1, 2, r, nullptr)
          : g_v3 ? g_v3->init(&ranks[r].prof, &g_mask)  // v3 learns the communicator later
                 : g_v4->init(&ranks[r].prof, &g_mask, "driver", kCommHash, 1, 2, r, nullptr),
          "profiler init");
  }
  std::printf("mask=%d\n", g_mask);
  void* net_ctx[2] = {};
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclNetCommConfig_v12_t config12{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  for (void*& ctx : net_ctx) {
    check(net12 ? net12->init(&ctx, kCommHash, &config12, nullptr, profiler_callback)
                : net->init(&ctx, kCommHash, &config, nullptr, profiler_callback),
          "net init");
  }

  // Connections both ways: rank r listens for the other rank's sends.
  char handles[2][NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listens[2] = {};
  for (int r = 0; r < 2; ++r) check(net->listen(net_ctx[r], 0, handles[r], &listens[r]), "listen");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ranks[0].send || !ranks[1].send || !ranks[0].recv || !ranks[1].recv) {
    for (int r = 0; r < 2; ++r) {
      if (!ranks[r].send) check(net->connect(net_ctx[r], 0, handles[1 - r], &ranks[r].send, nullptr), "connect");
      if (!ranks[r].recv) check(net->accept(listens[r], &ranks[r].recv, nullptr), "accept");
    }
    check(std::chrono::steady_clock::now() < deadline, "could not connect in 30 s");
  }
  for (void* l : listens) net->closeListen(l);

  // An all-reduce (ring, one channel): group -> collective (stopped when enqueued) -> proxy.
  void* groups[2];
  void* colls[2];
  for (int r = 0; r < 2; ++r) {
    ncclProfilerEventDescr_v5_t g{};
    g.type = ncclProfileGroup;
    g.rank = r;
    groups[r] = start(ranks[r].prof, g);
    ncclProfilerEventDescr_v5_t c{};
    c.type = ncclProfileColl;
    c.parentObj = groups[r];
    c.rank = r;
    c.coll.seqNumber = 0;
    c.coll.func = "AllReduce";
    c.coll.count = kSteps * kChunk / 4;
    c.coll.root = 0;
    c.coll.datatype = "ncclFloat32";
    c.coll.nChannels = 1;
    c.coll.nWarps = 16;
    c.coll.algo = "RING";
    c.coll.proto = "SIMPLE";
    c.coll.parentGroup = groups[r];
    colls[r] = start(ranks[r].prof, c);
    stop(colls[r]);
    stop(groups[r]);
  }
  const bool both[2] = {true, true};
  run_proxy(*net, ranks, colls, both, both);

  // A send from rank 0 to rank 1.
  void* p2ps[2];
  for (int r = 0; r < 2; ++r) {
    ncclProfilerEventDescr_v5_t p{};
    p.type = ncclProfileP2p;
    p.rank = r;
    p.p2p.func = r == 0 ? "Send" : "Recv";
    p.p2p.buff = ranks[r].out.data();
    p.p2p.datatype = "ncclInt8";
    p.p2p.count = kSteps * kChunk;
    p.p2p.peer = 1 - r;
    p.p2p.nChannels = 1;
    p2ps[r] = start(ranks[r].prof, p);
    stop(p2ps[r]);
  }
  const bool sends[2] = {true, false}, recvs[2] = {false, true};
  run_proxy(*net, ranks, p2ps, sends, recvs);
  if (with_ce) run_ce_collective(ranks);

  for (Rank& r : ranks) {
    net->closeSend(r.send);
    net->closeRecv(r.recv);
    check(g_v5 ? g_v5->finalize(r.prof) : g_v3 ? g_v3->finalize(r.prof) : g_v4->finalize(r.prof),
          "profiler finalize");
  }
  for (void* ctx : net_ctx) net->finalize(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string(argv[3]) != "ce")) {
    std::fprintf(stderr, "usage: profiler_driver PLUGIN.so v6|v5|v4|v3 [ce]\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], argc == 4);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profiler_driver: %s\n", e.what());
    return 1;
  }
}
