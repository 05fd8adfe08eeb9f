// The version-neutral core: contexts and the process-wide device table, argument checks, and
// dispatch to the transport. Every ABI version's table ends up here (plugin/abi/net_export.cpp).
#include "astral/plugin/net.hpp"

#include <algorithm>
#include <atomic>
#include <fmt/format.h>
#include <mutex>
#include <set>

#include "core/config.hpp"
#include "core/context.hpp"
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
  if (t && (dev < 0 || dev >= static_cast<int>(t->devices().size()))) {
    ASTRAL_WARN("{}: device {} does not exist ({} devices)", call, dev, t->devices().size());
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

ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) {
  *ctx = nullptr;
  std::lock_guard lock(g_mutex);
  if (logger) set_logger(logger);
  if (!g_state) {
    auto state = std::make_unique<ProcessState>();
    state->config = load_config();
    std::string why;
    state->transport = make_transport(state->config, &why);
    if (!state->transport) {
      ASTRAL_WARN("cannot start: {}", why);
      return ncclInvalidUsage;
    }
    const auto& devs = state->transport->devices();
    if (devs.empty()) {
      ASTRAL_WARN("no network device: {}", why);
    } else {
      std::string list;
      for (size_t i = 0; i < devs.size(); ++i) {
        list += fmt::format(" [{}]{}{}", i, devs[i].name,
                            devs[i].rail >= 0 ? fmt::format("(rail {})", devs[i].rail) : "");
      }
      ASTRAL_INFO("transport {}, {} device(s):{}", state->transport->name(), devs.size(), list);
    }
    g_state = state.release();
  }
  auto context = std::make_shared<NetContext>();
  context->comm_id = comm_id;
  context->traffic_class = traffic_class;
  context->profiler = profiler;
  context->observer = make_observer(comm_id);
  g_state->contexts.insert(context);
  *ctx = context.get();
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
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
}

int live_contexts() {
  std::lock_guard lock(g_mutex);
  return g_state ? static_cast<int>(g_state->contexts.size()) : 0;
}

ncclResult_t devices(int* ndev) {
  std::lock_guard lock(g_mutex);
  Transport* t = transport_or_warn("devices");
  if (!t) return ncclInternalError;
  *ndev = static_cast<int>(t->devices().size());
  return ncclSuccess;
}

ncclResult_t get_properties(int dev, DeviceProperties* props) {
  Transport* transport = transport_for_device(dev, "getProperties");
  if (!transport) return ncclInternalError;
  const Transport& t = *transport;
  const NetDevice& d = t.devices()[static_cast<size_t>(dev)];
  *props = DeviceProperties{};
  props->name = d.name.c_str();
  props->pci_path = d.pci_path.empty() ? nullptr : d.pci_path.c_str();
  props->guid = d.guid;
  props->port = d.port;
  props->speed_mbps = d.speed_mbps;
  props->latency_us = 0;
  props->ptr_support = NCCL_PTR_HOST;
  props->reg_is_global = true;
  props->max_comms = 65536;
  props->max_recvs = t.max_recvs();
  props->max_p2p_bytes = t.max_message_bytes();
  props->max_coll_bytes = t.max_message_bytes();
  props->rail = d.rail;
  return ncclSuccess;
}

ncclResult_t set_net_attr(void* ctx, const NetAttr& attr) {
  auto context = find_context(ctx);
  if (!context) return ncclInternalError;
  context->set_attr(attr);
  return ncclSuccess;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) {
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
}

ncclResult_t connect(void* ctx, int dev, void* handle, int traffic_class, void** send_comm) {
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
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  *recv_comm = nullptr;
  std::unique_ptr<RecvComm> comm;
  ncclResult_t res = static_cast<ListenComm*>(listen_comm)->accept(&comm);
  if (res == ncclSuccess) *recv_comm = static_cast<Comm*>(comm.release());
  return res;
}

// Host memory needs no registration for sockets; the handle only lets us reject GPU memory,
// which this transport does not advertise.
namespace {
struct MemoryRegion {
  static constexpr uint32_t kMagic = 0x4d454d52;
  uint32_t magic = kMagic;
  int type = NCCL_PTR_HOST;
};
}  // namespace

ncclResult_t reg_mr(void*, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    ASTRAL_WARN("regMr: memory type {} at {} ({} bytes) is not host memory; this transport "
                "supports NCCL_PTR_HOST only",
                type, data, size);
    return ncclInternalError;
  }
  *mhandle = new MemoryRegion{};
  return ncclSuccess;
}

ncclResult_t dereg_mr(void*, void* mhandle) {
  auto* region = static_cast<MemoryRegion*>(mhandle);
  if (region && region->magic == MemoryRegion::kMagic) {
    region->magic = 0;
    delete region;
  }
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* phandle,
                   void** request) {
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
  ncclResult_t res = static_cast<SendComm*>(comm)->isend(data, size, tag, phandle, &r);
  *request = r;
  return res;
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** phandles, void** request) {
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
  ncclResult_t res = static_cast<RecvComm*>(comm)->irecv(n, data, sizes, tags, phandles, &r);
  *request = r;
  return res;
}

ncclResult_t iflush(void*, int, void**, const int*, void** request) {
  // Only GPU memory ever needs a flush, and this transport moves host memory: nothing to do.
  // A null request tells NCCL the flush is complete.
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  *done = 0;
  if (!request) {
    ASTRAL_WARN("test on a null request");
    return ncclInternalError;
  }
  return static_cast<Request*>(request)->test(done, sizes);
}

ncclResult_t close_send(void* send_comm) {
  auto* comm = static_cast<Comm*>(send_comm);
  if (comm && comm->kind() == Comm::Kind::kSend) delete comm;
  return ncclSuccess;
}

ncclResult_t close_recv(void* recv_comm) {
  auto* comm = static_cast<Comm*>(recv_comm);
  if (comm && comm->kind() == Comm::Kind::kRecv) delete comm;
  return ncclSuccess;
}

ncclResult_t close_listen(void* listen_comm) {
  delete static_cast<ListenComm*>(listen_comm);
  return ncclSuccess;
}

}  // namespace net
}  // namespace astral::plugin
