// The only file that knows NCCL's net plugin versions. It exports ncclNetPlugin_v12 (NCCL 2.30+:
// v11's calls, properties with rail and plane), _v11 (NCCL 2.28-2.29, per-communicator contexts),
// _v10, _v9 and _v8 (NCCL 2.19-2.27, one process-wide context), maps
// each call onto the version-neutral core (core/net.hpp) and converts arguments and properties.
// The core's calls are noexcept (core/guard.hpp), so nothing is thrown across NCCL; the one thing
// this layer owns, the process-wide context of v10 and older, is created under the same guard.
#include <algorithm>
#include <mutex>

#include "abi/net_v10.h"
#include "abi/net_v11.h"
#include "abi/net_v12.h"
#include "abi/net_v8.h"
#include "abi/net_v9.h"
#include "core/guard.hpp"
#include "core/net.hpp"
#include "core/log.hpp"

#define ASTRAL_EXPORT __attribute__((visibility("default")))

namespace {
namespace net = astral::plugin::net;

// ---- calls shared by every version -------------------------------------------------------------

ncclResult_t devices(int* ndev) {
  return net::devices(ndev);
}
ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;  // host plugin: no device offload
  return net::accept(listen_comm, recv_comm);
}
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return net::reg_mr(comm, net::MemoryRegion{data, size, type, false, 0, -1}, mhandle);
}
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  // The transport decides what it can register; TCP refuses DMA-BUF, which it never advertises.
  return net::reg_mr(comm, net::MemoryRegion{data, size, type, true, offset, fd}, mhandle);
}
ncclResult_t dereg_mr(void* comm, void* mhandle) {
  return net::dereg_mr(comm, mhandle);
}
ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
  return net::isend(comm, data, size, tag, mhandle, phandle, request);
}
ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request) {
  return net::irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
}
ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return net::iflush(comm, n, data, sizes, mhandles, request);
}
ncclResult_t test(void* request, int* done, int* sizes) {
  return net::test(request, done, sizes);
}
ncclResult_t close_send(void* comm) {
  return net::close_send(comm);
}
ncclResult_t close_recv(void* comm) {
  return net::close_recv(comm);
}
ncclResult_t close_listen(void* comm) {
  return net::close_listen(comm);
}

// Properties: the v12 layout is the superset; older layouts take a subset (v12 is not v11 plus a
// tail: its vProps is larger, so every later field sits 16 bytes further on).
int16_t as_abi_id(int id) { return id >= 0 && id <= INT16_MAX ? int16_t(id) : int16_t(NCCL_NET_ID_UNDEF); }

ncclResult_t properties_v12(int dev, ncclNetProperties_v12_t* props) {
  net::DeviceProperties p;
  ncclResult_t res = net::get_properties(dev, &p);
  if (res != ncclSuccess) return res;
  *props = ncclNetProperties_v12_t{};
  props->name = const_cast<char*>(p.name);
  props->pciPath = const_cast<char*>(p.pci_path);
  props->guid = p.guid;
  props->ptrSupport = p.ptr_support;
  props->regIsGlobal = p.reg_is_global;
  props->forceFlush = p.force_flush;
  props->speed = p.speed_mbps;
  props->port = p.port;
  props->latency = p.latency_us;
  props->maxComms = p.max_comms;
  props->maxRecvs = p.max_recvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  if (p.fused_count > 0) {  // a virtual device: the physical devices makeVDevice fused
    props->vProps.ndevs = std::min(p.fused_count, NCCL_NET_MAX_DEVS_PER_NIC_V12);
    for (int i = 0; i < props->vProps.ndevs; ++i) props->vProps.devs[i] = p.fused[i];
  } else {  // a physical device is a vNIC of itself
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
  }
  props->maxP2pBytes = p.max_p2p_bytes;
  props->maxCollBytes = p.max_coll_bytes;
  props->maxMultiRequestSize = 1;
  props->railId = as_abi_id(p.rail);
  props->planeId = as_abi_id(p.plane);
  return ncclSuccess;
}

// The v12 vProps in an older layout (4 devices; NCCL fuses no more than that for those versions).
template <typename VProps>
VProps older_vprops(const ncclNetVDeviceProps_v12_t& v) {
  VProps out{};
  out.ndevs = std::min(v.ndevs, int(sizeof out.devs / sizeof out.devs[0]));
  for (int i = 0; i < out.ndevs; ++i) out.devs[i] = v.devs[i];
  return out;
}

ncclResult_t properties_v11(int dev, ncclNetProperties_v11_t* props) {
  ncclNetProperties_v12_t p;
  ncclResult_t res = properties_v12(dev, &p);
  if (res != ncclSuccess) return res;
  *props = ncclNetProperties_v11_t{p.name,     p.pciPath,       p.guid,          p.ptrSupport,
                                   p.regIsGlobal, p.forceFlush, p.speed,         p.port,
                                   p.latency,  p.maxComms,      p.maxRecvs,      p.netDeviceType,
                                   p.netDeviceVersion,
                                   older_vprops<ncclNetVDeviceProps_v11_t>(p.vProps), p.maxP2pBytes,
                                   p.maxCollBytes, p.maxMultiRequestSize};
  return ncclSuccess;
}

template <typename Props>
ncclResult_t properties_v9_v10(int dev, Props* props) {
  ncclNetProperties_v12_t p;
  ncclResult_t res = properties_v12(dev, &p);
  if (res != ncclSuccess) return res;
  *props = Props{p.name,     p.pciPath,       p.guid,          p.ptrSupport,       p.regIsGlobal,
                 p.forceFlush, p.speed,       p.port,          p.latency,          p.maxComms,
                 p.maxRecvs, p.netDeviceType, p.netDeviceVersion,
                 older_vprops<decltype(Props::vProps)>(p.vProps),
                 p.maxP2pBytes, p.maxCollBytes};
  return ncclSuccess;
}

ncclResult_t properties_v8(int dev, ncclNetProperties_v8_t* props) {
  ncclNetProperties_v12_t p;
  ncclResult_t res = properties_v12(dev, &p);
  if (res != ncclSuccess) return res;
  *props = ncclNetProperties_v8_t{p.name,  p.pciPath,  p.guid,     p.ptrSupport,
                                  p.regIsGlobal, p.speed, p.port, p.latency,
                                  p.maxComms, p.maxRecvs, p.netDeviceType, p.netDeviceVersion};
  return ncclSuccess;
}

// makeVDevice: every version hands {ndevs, devs[]} (v12 up to 8 devices, older ones up to 4).
template <typename VProps>
ncclResult_t make_vdevice(int* d, VProps* props) {
  if (!props) return net::make_vdevice(nullptr, 0, d);
  const int capacity = int(sizeof props->devs / sizeof props->devs[0]);
  if (props->ndevs > capacity) {
    ASTRAL_WARN("makeVDevice: {} devices, this interface version holds {}", props->ndevs, capacity);
    return ncclInvalidArgument;
  }
  return net::make_vdevice(props->devs, props->ndevs, d);
}

// ---- v12 and v11: a context per communicator --------------------------------------------------

// v11 and v12 share the config and attribute layouts (reference §1.5, §1.6).
static_assert(sizeof(ncclNetCommConfig_v12_t) == sizeof(ncclNetCommConfig_v11_t));
static_assert(sizeof(ncclNetAttr_v12_t) == sizeof(ncclNetAttr_v11_t));

template <typename Config>
ncclResult_t init_per_comm(void** ctx, uint64_t comm_id, Config* config, ncclDebugLogger_t logger,
                           ncclProfilerCallback_t profiler) {
  int tc = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return net::init(ctx, comm_id, tc, logger, profiler);
}
ncclResult_t init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                      ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  return init_per_comm(ctx, comm_id, config, logger, profiler);
}
ncclResult_t init_v12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                      ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  return init_per_comm(ctx, comm_id, config, logger, profiler);
}
ncclResult_t finalize_v11(void* ctx) {
  return net::finalize(ctx);
}
ncclResult_t listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  return net::listen(ctx, dev, handle, listen_comm);
}
ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v11_t** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;
  return net::connect(ctx, dev, handle, NCCL_NET_TRAFFIC_CLASS_UNDEF, send_comm);
}
template <typename Attr>
ncclResult_t set_net_attr_per_comm(void* ctx, Attr* attr) {
  if (!attr) return ncclSuccess;
  net::NetAttr a;
  a.send_max_peers = attr->sendCommAttr.maxConcurrentPeers;
  a.send_min_peers = attr->sendCommAttr.minConcurrentPeers;
  a.send_max_flows = attr->sendCommAttr.maxFlowsPerPeer;
  a.send_min_flows = attr->sendCommAttr.minFlowsPerPeer;
  a.recv_max_peers = attr->recvCommAttr.maxConcurrentPeers;
  a.recv_min_peers = attr->recvCommAttr.minConcurrentPeers;
  a.recv_max_flows = attr->recvCommAttr.maxFlowsPerPeer;
  a.recv_min_flows = attr->recvCommAttr.minFlowsPerPeer;
  a.op = attr->op;
  a.algo = attr->algo;
  a.proto = attr->proto;
  net::set_net_attr(ctx, a);
  return ncclSuccess;  // NCCL ignores the result; problems were logged
}
ncclResult_t set_net_attr_v11(void* ctx, ncclNetAttr_v11_t* attr) { return set_net_attr_per_comm(ctx, attr); }
ncclResult_t set_net_attr_v12(void* ctx, ncclNetAttr_v12_t* attr) { return set_net_attr_per_comm(ctx, attr); }

// ---- v10 and older: one context for the process, created by the first init ---------------------

constinit std::mutex g_legacy_mutex;
constinit void* g_legacy_ctx = nullptr;

ncclResult_t init_legacy(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  return astral::plugin::guarded("init", [&] {
    std::lock_guard lock(g_legacy_mutex);
    if (g_legacy_ctx) return ncclSuccess;
    return net::init(&g_legacy_ctx, 0, NCCL_NET_TRAFFIC_CLASS_UNDEF, logger, profiler);
  });
}
// NCCL before 2.28 never finalizes: release the process-wide context when the library is
// unloaded (dlclose or exit), without logging, since NCCL may be tearing down too.
__attribute__((destructor)) void release_legacy_context() {
  std::lock_guard lock(g_legacy_mutex);
  if (!g_legacy_ctx) return;
  astral::plugin::set_logger(nullptr);
  net::finalize(g_legacy_ctx);
  g_legacy_ctx = nullptr;
}

void* legacy_ctx() {
  std::lock_guard lock(g_legacy_mutex);
  return g_legacy_ctx;
}
ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler) {
  return init_legacy(logger, profiler);
}
ncclResult_t init_v8_v9(ncclDebugLogger_t logger) { return init_legacy(logger, nullptr); }
ncclResult_t listen_legacy(int dev, void* handle, void** listen_comm) {
  return listen_v11(legacy_ctx(), dev, handle, listen_comm);
}
ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                         void** send_comm, ncclNetDeviceHandle_v10_t** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;
  int tc = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
  return net::connect(legacy_ctx(), dev, handle, tc, send_comm);
}
ncclResult_t connect_v8_v9(int dev, void* handle, void** send_comm,
                           ncclNetDeviceHandle_v9_t** dev_comm) {
  return connect_v11(legacy_ctx(), dev, handle, send_comm, dev_comm);
}
ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle,
                      void** request) {
  return isend(comm, data, size, tag, mhandle, nullptr, request);
}
ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                      void** request) {
  return irecv(comm, n, data, sizes, tags, mhandles, nullptr, request);
}
ncclResult_t isend_v8(void* comm, void* data, int size, int tag, void* mhandle,
                      void** request) {
  if (size < 0) {
    ASTRAL_WARN("isend with negative size {}", size);
    return ncclInternalError;
  }
  return isend(comm, data, static_cast<size_t>(size), tag, mhandle, nullptr, request);
}
ncclResult_t irecv_v8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                      void** request) {
  if (n < 1 || n > NCCL_NET_MAX_REQUESTS) {
    ASTRAL_WARN("irecv with {} buffers", n);
    return ncclInternalError;
  }
  size_t wide[NCCL_NET_MAX_REQUESTS];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) {
      ASTRAL_WARN("irecv slot {} with negative size {}", i, sizes[i]);
      return ncclInternalError;
    }
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return irecv(comm, n, data, wide, tags, mhandles, nullptr, request);
}

}  // namespace

// ---- the exported tables ------------------------------------------------------------------------
// getDeviceMr and irecvConsumed (device offload) stay NULL, which NCCL allows; every other
// member is called unconditionally. makeVDevice fuses ib ports (tcp refuses, and NCCL then uses
// the devices as they are).

extern "C" ASTRAL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = net::kPluginName,
    .init = init_v12,
    .devices = devices,
    .getProperties = properties_v12,
    .listen = listen_v11,
    .connect = connect_v11,
    .accept = accept,
    .regMr = reg_mr,
    .regMrDmaBuf = reg_mr_dmabuf,
    .deregMr = dereg_mr,
    .isend = isend,
    .irecv = irecv,
    .iflush = iflush,
    .test = test,
    .closeSend = close_send,
    .closeRecv = close_recv,
    .closeListen = close_listen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = make_vdevice<ncclNetVDeviceProps_v12_t>,
    .finalize = finalize_v11,
    .setNetAttr = set_net_attr_v12,
};

extern "C" ASTRAL_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = net::kPluginName,
    .init = init_v11,
    .devices = devices,
    .getProperties = properties_v11,
    .listen = listen_v11,
    .connect = connect_v11,
    .accept = accept,
    .regMr = reg_mr,
    .regMrDmaBuf = reg_mr_dmabuf,
    .deregMr = dereg_mr,
    .isend = isend,
    .irecv = irecv,
    .iflush = iflush,
    .test = test,
    .closeSend = close_send,
    .closeRecv = close_recv,
    .closeListen = close_listen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = make_vdevice<ncclNetVDeviceProps_v11_t>,
    .finalize = finalize_v11,
    .setNetAttr = set_net_attr_v11,
};

extern "C" ASTRAL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = net::kPluginName,
    .init = init_v10,
    .devices = devices,
    .getProperties = properties_v9_v10<ncclNetProperties_v10_t>,
    .listen = listen_legacy,
    .connect = connect_v10,
    .accept = accept,
    .regMr = reg_mr,
    .regMrDmaBuf = reg_mr_dmabuf,
    .deregMr = dereg_mr,
    .isend = isend,
    .irecv = irecv,
    .iflush = iflush,
    .test = test,
    .closeSend = close_send,
    .closeRecv = close_recv,
    .closeListen = close_listen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = make_vdevice<ncclNetVDeviceProps_v10_t>,
};

extern "C" ASTRAL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = net::kPluginName,
    .init = init_v8_v9,
    .devices = devices,
    .getProperties = properties_v9_v10<ncclNetProperties_v9_t>,
    .listen = listen_legacy,
    .connect = connect_v8_v9,
    .accept = accept,
    .regMr = reg_mr,
    .regMrDmaBuf = reg_mr_dmabuf,
    .deregMr = dereg_mr,
    .isend = isend_v9,
    .irecv = irecv_v9,
    .iflush = iflush,
    .test = test,
    .closeSend = close_send,
    .closeRecv = close_recv,
    .closeListen = close_listen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = make_vdevice<ncclNetVDeviceProps_v9_t>,
};

extern "C" ASTRAL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = net::kPluginName,
    .init = init_v8_v9,
    .devices = devices,
    .getProperties = properties_v8,
    .listen = listen_legacy,
    .connect = connect_v8_v9,
    .accept = accept,
    .regMr = reg_mr,
    .regMrDmaBuf = reg_mr_dmabuf,
    .deregMr = dereg_mr,
    .isend = isend_v8,
    .irecv = irecv_v8,
    .iflush = iflush,
    .test = test,
    .closeSend = close_send,
    .closeRecv = close_recv,
    .closeListen = close_listen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};
