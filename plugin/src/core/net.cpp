// The version-neutral core: contexts, the process's transport (chosen by the factory on the
// shared host view), argument checks, and dispatch to the transport, which decides everything
// about devices, memory and flushes. Every ABI version's table ends up here (plugin/abi/net_export.cpp).
#include "core/net.hpp"

#include <algorithm>
#include <atomic>
#include <fmt/format.h>
#include <mutex>
#include <set>

#include "core/config.hpp"
#include "core/context.hpp"
#include "core/guard.hpp"
#include "core/log.hpp"
#include "core/net_trace.hpp"
#include "core/transport.hpp"

namespace astral::plugin {
namespace {

constinit std::atomic<NetObserverFactory> g_observer_factory{nullptr};

// Lives from the first init to the last finalize (net v11); with older NCCLs, which never call
// finalize, until the process exits. Plain pointers: nothing runs at library load or unload.
struct ProcessState {
  Config config;
  std::shared_ptr<const HostView> host;
  std::unique_ptr<Transport> transport;
  std::set<std::shared_ptr<NetContext>> contexts;
};
constinit std::mutex g_mutex;
constinit ProcessState* g_state = nullptr;

Transport* transport_or_warn(const char* call) {
  if (g_state && g_state->transport) return g_state->transport.get();
  ASTRAL_WARN("{} called before init", call);
  return nullptr;
}

std::shared_ptr<NetContext> find_context(void* ctx) {
  std::lock_guard lock(g_mutex);
  if (!g_state) return nullptr;
  for (const auto& c : g_state->contexts) {
    if (c.get() == ctx) return c;
  }
  return nullptr;
}

// The transport when `dev` is one of its devices, else null after one WARN.
Transport* transport_for_device(int dev, const char* call) {
  std::lock_guard lock(g_mutex);
  Transport* t = transport_or_warn(call);
  if (t && (dev < 0 || dev >= t->device_count())) {
    ASTRAL_WARN("{}: device {} does not exist ({} devices)", call, dev, t->device_count());
    return nullptr;
  }
  return t;
}

}  // namespace

void set_net_observer_factory(NetObserverFactory factory) { g_observer_factory.store(factory); }

std::shared_ptr<NetObserver> make_observer(uint64_t comm_id) {
  // An installed factory (tests, tools) wins; otherwise the trace file when ASTRAL_TRACE_DIR is set.
  NetObserverFactory factory = g_observer_factory.load();
  return factory ? factory(comm_id) : make_trace_observer(comm_id);
}

namespace net {
namespace {

// NCCL's undefined value is -1; anything below it is not a hint. algo/proto describe the last
// collective and are stale on p2p ops: keep them only when op names a collective (bits 0..4).
NetAttr sanitized(const NetAttr& in) {
  NetAttr a = in;
  struct Field {
    const char* name;
    int32_t* value;
  } fields[] = {{"sendCommAttr.maxConcurrentPeers", &a.send_max_peers},
                {"sendCommAttr.minConcurrentPeers", &a.send_min_peers},
                {"sendCommAttr.maxFlowsPerPeer", &a.send_max_flows},
                {"sendCommAttr.minFlowsPerPeer", &a.send_min_flows},
                {"recvCommAttr.maxConcurrentPeers", &a.recv_max_peers},
                {"recvCommAttr.minConcurrentPeers", &a.recv_min_peers},
                {"recvCommAttr.maxFlowsPerPeer", &a.recv_max_flows},
                {"recvCommAttr.minFlowsPerPeer", &a.recv_min_flows}};
  for (auto& f : fields) {
    if (*f.value < NCCL_NET_ATTR_UNDEF) {
      ASTRAL_WARN("setNetAttr: {} = {} is not a count or NCCL_NET_ATTR_UNDEF; ignored", f.name, *f.value);
      *f.value = NCCL_NET_ATTR_UNDEF;
    }
  }
  constexpr uint32_t kCollectiveOps = (1u << 5) - 1;  // Broadcast .. AllReduce
  if (a.op == UINT32_MAX || (a.op & kCollectiveOps) == 0) a.algo = a.proto = UINT32_MAX;
  return a;
}

}  // namespace

ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) noexcept {
  return guarded("init", [&]() -> ncclResult_t {
    *ctx = nullptr;
    std::lock_guard lock(g_mutex);
    if (logger) set_logger(logger);
    if (!g_state) {
      auto state = std::make_unique<ProcessState>();
      state->config = load_config();
      state->host = host_view();
      std::string why;
      state->transport = make_transport(state->config, *state->host, &why);
      if (!state->transport) {
        ASTRAL_WARN("cannot start: {}", why);
        return ncclInvalidUsage;
      }
      const Transport& t = *state->transport;
      if (t.device_count() == 0) {
        // A transport that has said why itself (ib: one INFO line) leaves `why` empty.
        if (!why.empty()) ASTRAL_WARN("no network device: {}", why);
      } else {
        std::string list;
        for (int i = 0; i < t.device_count(); ++i) {
          const NicPort& d = t.device(i);
          list += fmt::format(" [{}]{}{}", i, d.name, d.rail >= 0 ? fmt::format("(rail {})", d.rail) : "");
        }
        ASTRAL_INFO("transport {}, {} device(s):{}", t.name(), t.device_count(), list);
      }
      g_state = state.release();
    }
    if (traffic_class < NCCL_NET_TRAFFIC_CLASS_UNDEF) {
      ASTRAL_WARN("init: traffic class {} is negative and not NCCL_NET_TRAFFIC_CLASS_UNDEF (-1); "
                  "using the transport's default", traffic_class);
      traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
    }
    auto context = std::make_shared<NetContext>();
    context->comm_id = comm_id;
    context->traffic_class = traffic_class;
    context->profiler = profiler;
    context->observer = make_observer(comm_id);
    g_state->contexts.insert(context);
    *ctx = context.get();
    return ncclSuccess;
  });
}

ncclResult_t finalize(void* ctx) noexcept {
  return guarded("finalize", [&]() -> ncclResult_t {
    std::lock_guard lock(g_mutex);
    if (!g_state) return ncclSuccess;  // init failed before creating anything
    auto it = std::find_if(g_state->contexts.begin(), g_state->contexts.end(),
                           [&](const auto& c) { return c.get() == ctx; });
    if (it != g_state->contexts.end()) g_state->contexts.erase(it);
    if (g_state->contexts.empty()) {
      // The last finalize: NCCL may dlclose us next. We own no threads, timers or atexit hooks;
      // release what is left so nothing of ours stays registered or open.
      g_state->transport->release_abandoned();
      delete g_state;
      g_state = nullptr;
      set_logger(nullptr);
    }
    return ncclSuccess;
  });
}

int live_contexts() noexcept {
  std::lock_guard lock(g_mutex);  // std::mutex::lock throws only on a broken mutex
  return g_state ? static_cast<int>(g_state->contexts.size()) : 0;
}

ncclResult_t devices(int* ndev) noexcept {
  return guarded("devices", [&]() -> ncclResult_t {
    std::lock_guard lock(g_mutex);
    Transport* t = transport_or_warn("devices");
    if (!t) return ncclInternalError;
    *ndev = t->device_count();
    return ncclSuccess;
  });
}

ncclResult_t get_properties(int dev, DeviceProperties* props) noexcept {
  return guarded("getProperties", [&]() -> ncclResult_t {
    Transport* transport = transport_for_device(dev, "getProperties");
    if (!transport) return ncclInternalError;
    *props = transport->properties(dev);
    return ncclSuccess;
  });
}

ncclResult_t make_vdevice(const int* devs, int n, int* dev) noexcept {
  return guarded("makeVDevice", [&]() -> ncclResult_t {
    std::lock_guard lock(g_mutex);
    Transport* t = transport_or_warn("makeVDevice");
    if (!t) return ncclInternalError;
    if (!devs || !dev || n < 1) {
      ASTRAL_WARN("makeVDevice: {} devices{}", n, devs && dev ? "" : " (null argument)");
      return ncclInvalidArgument;
    }
    ncclResult_t res = t->make_vdevice(devs, n, dev);
    if (res != ncclSuccess) {
      ASTRAL_INFO("makeVDevice: the {} transport does not fuse these {} devices; NCCL uses them as "
                  "they are", t->name(), n);
    }
    return res;
  });
}

ncclResult_t set_net_attr(void* ctx, const NetAttr& attr) noexcept {
  return guarded("setNetAttr", [&]() -> ncclResult_t {
    auto context = find_context(ctx);
    if (!context) {
      ASTRAL_WARN("setNetAttr: unknown net context {}", ctx);
      return ncclInternalError;
    }
    context->set_attr(sanitized(attr));
    return ncclSuccess;
  });
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) noexcept {
  return guarded("listen", [&]() -> ncclResult_t {
    *listen_comm = nullptr;
    auto context = find_context(ctx);
    if (!context) {
      ASTRAL_WARN("listen: unknown net context");
      return ncclInternalError;
    }
    Transport* transport = transport_for_device(dev, "listen");
    if (!transport) return ncclInternalError;
    std::unique_ptr<ListenComm> comm;
    ncclResult_t res = transport->listen(context, dev, handle, &comm);
    if (res == ncclSuccess) *listen_comm = comm.release();
    return res;
  });
}

ncclResult_t connect(void* ctx, int dev, void* handle, int traffic_class, void** send_comm) noexcept {
  return guarded("connect", [&]() -> ncclResult_t {
    *send_comm = nullptr;
    auto context = find_context(ctx);
    if (!context) {
      ASTRAL_WARN("connect: unknown net context");
      return ncclInternalError;
    }
    Transport* transport = transport_for_device(dev, "connect");
    if (!transport) return ncclInternalError;
    if (traffic_class < 0) traffic_class = context->traffic_class;
    std::unique_ptr<SendComm> comm;
    ncclResult_t res = transport->connect(context, dev, handle, traffic_class, &comm);
    if (res == ncclSuccess) *send_comm = static_cast<Comm*>(comm.release());
    return res;
  });
}

ncclResult_t accept(void* listen_comm, void** recv_comm) noexcept {
  return guarded("accept", [&]() -> ncclResult_t {
    *recv_comm = nullptr;
    std::unique_ptr<RecvComm> comm;
    ncclResult_t res = static_cast<ListenComm*>(listen_comm)->accept(&comm);
    if (res == ncclSuccess) *recv_comm = static_cast<Comm*>(comm.release());
    return res;
  });
}

namespace {
// The process transport and the comm NCCL named, or null after one WARN.
Transport* transport_for_comm(void* comm, const char* call) {
  std::lock_guard lock(g_mutex);
  Transport* t = transport_or_warn(call);
  auto* c = static_cast<Comm*>(comm);
  if (t && (!c || (c->kind() != Comm::Kind::kSend && c->kind() != Comm::Kind::kRecv))) {
    ASTRAL_WARN("{} on something that is not a send or receive comm", call);
    return nullptr;
  }
  return t;
}
}  // namespace

ncclResult_t reg_mr(void* comm, const MemoryRegion& region, void** mhandle) noexcept {
  return guarded("regMr", [&]() -> ncclResult_t {
    *mhandle = nullptr;
    Transport* t = transport_for_comm(comm, region.dmabuf ? "regMrDmaBuf" : "regMr");
    if (!t) return ncclInternalError;
    return t->reg_mr(*static_cast<Comm*>(comm), region, mhandle);
  });
}

ncclResult_t dereg_mr(void* comm, void* mhandle) noexcept {
  return guarded("deregMr", [&]() -> ncclResult_t {
    Transport* t = transport_for_comm(comm, "deregMr");
    if (!t) return ncclInternalError;
    return t->dereg_mr(*static_cast<Comm*>(comm), mhandle);
  });
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void* phandle, void** request) noexcept {
  return guarded("isend", [&]() -> ncclResult_t {
    *request = nullptr;
    auto* comm = static_cast<Comm*>(send_comm);
    if (!comm || comm->kind() != Comm::Kind::kSend) {
      ASTRAL_WARN("isend on something that is not a send comm");
      return ncclInternalError;
    }
    if (size > NCCL_NET_MAX_SIZE_P2P || (size > 0 && !data)) {
      ASTRAL_WARN("isend of {} bytes from {}: larger than maxP2pBytes or no buffer", size, data);
      return ncclInternalError;
    }
    Request* r = nullptr;
    ncclResult_t res = static_cast<SendComm*>(comm)->isend(data, size, tag, mhandle, phandle, &r);
    *request = r;
    return res;
  });
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** phandles, void** request) noexcept {
  return guarded("irecv", [&]() -> ncclResult_t {
    // NCCL may pre-set *request to NCCL_NET_OPTIONAL_RECV_COMPLETION as a hint; TCP completes a
    // receive only once its bytes are in the buffer, so the hint changes nothing. Always overwrite.
    *request = nullptr;
    auto* comm = static_cast<Comm*>(recv_comm);
    if (!comm || comm->kind() != Comm::Kind::kRecv) {
      ASTRAL_WARN("irecv on something that is not a receive comm");
      return ncclInternalError;
    }
    if (n < 1 || n > kMaxGroupedRecvs) {
      ASTRAL_WARN("irecv with {} buffers; at most {} are supported", n, kMaxGroupedRecvs);
      return ncclInternalError;
    }
    for (int i = 0; i < n; ++i) {
      if (sizes[i] > 0 && !data[i]) {
        ASTRAL_WARN("irecv slot {}: {} bytes into a null buffer", i, sizes[i]);
        return ncclInternalError;
      }
    }
    Request* r = nullptr;
    ncclResult_t res = static_cast<RecvComm*>(comm)->irecv(n, data, sizes, tags, mhandles, phandles, &r);
    *request = r;
    return res;
  });
}

ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                    void** request) noexcept {
  return guarded("iflush", [&]() -> ncclResult_t {
    // The transport decides whether received data needs a flush; a null request means "complete".
    *request = nullptr;
    auto* comm = static_cast<Comm*>(recv_comm);
    if (!comm || comm->kind() != Comm::Kind::kRecv) {
      ASTRAL_WARN("iflush on something that is not a receive comm");
      return ncclInternalError;
    }
    if (n < 1 || n > kMaxGroupedRecvs) {
      ASTRAL_WARN("iflush with {} buffers; at most {} are supported", n, kMaxGroupedRecvs);
      return ncclInternalError;
    }
    Request* r = nullptr;
    ncclResult_t res = static_cast<RecvComm*>(comm)->iflush(n, data, sizes, mhandles, &r);
    *request = r;
    return res;
  });
}

ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  return guarded("test", [&]() -> ncclResult_t {
    *done = 0;
    if (!request) {
      ASTRAL_WARN("test on a null request");
      return ncclInternalError;
    }
    return static_cast<Request*>(request)->test(done, sizes);
  });
}

ncclResult_t close_send(void* send_comm) noexcept {
  return guarded("closeSend", [&]() -> ncclResult_t {
    auto* comm = static_cast<Comm*>(send_comm);
    if (comm && comm->kind() == Comm::Kind::kSend) delete comm;
    return ncclSuccess;
  });
}

ncclResult_t close_recv(void* recv_comm) noexcept {
  return guarded("closeRecv", [&]() -> ncclResult_t {
    auto* comm = static_cast<Comm*>(recv_comm);
    if (comm && comm->kind() == Comm::Kind::kRecv) delete comm;
    return ncclSuccess;
  });
}

ncclResult_t close_listen(void* listen_comm) noexcept {
  return guarded("closeListen", [&]() -> ncclResult_t {
    delete static_cast<ListenComm*>(listen_comm);
    return ncclSuccess;
  });
}

}  // namespace net
}  // namespace astral::plugin
