#pragma once
// The version-neutral core of the NCCL net plugin. plugin/abi/net_export.cpp maps every exported
// ncclNet_vN_t onto these calls; tests and tools may call them directly. Semantics follow NCCL's
// contract (reference: nccl-plugin-abi.md §1.5): nothing blocks, connect/accept are polled, test
// reports completion. Handles are opaque pointers owned by the plugin until closed/finalized.
// Every call is noexcept and returns ncclResult_t (core/guard.hpp: the convention the tuner and
// profiler cores follow too).
#include <cstddef>
#include <cstdint>

#include "abi/nccl_common.h"

namespace astral::plugin::net {

// The `name` of every exported table: what NCCL_NET selects (case-insensitive).
inline constexpr const char* kPluginName = "Astral";

// What a transport tells NCCL about one device. The transport fills every field; the core and the
// ABI layer decide none of them. Strings stay valid until the last finalize.
struct DeviceProperties {
  const char* name = nullptr;
  const char* pci_path = nullptr;  // null when the device is not on PCI
  uint64_t guid = 0;
  int port = 1;
  int speed_mbps = 0;
  float latency_us = 0;
  int ptr_support = NCCL_PTR_HOST;
  bool reg_is_global = true;
  bool force_flush = false;
  int max_comms = 0;
  int max_recvs = 1;
  size_t max_p2p_bytes = 0;
  size_t max_coll_bytes = 0;
  int rail = -1;   // topo's rail, the same on identical nodes; -1 when unknown
  int plane = -1;  // the fabric plane where planes are really separate; -1 when unknown
  // A virtual device (makeVDevice): the physical devices it fuses. 0 for a physical device,
  // which NCCL is told is a virtual device of itself.
  int fused_count = 0;
  int fused[8] = {};
};

// One memory registration as NCCL asks for it: host or CUDA memory, or a DMA-BUF (offset, fd).
struct MemoryRegion {
  void* data = nullptr;
  size_t size = 0;
  int type = NCCL_PTR_HOST;  // NCCL_PTR_HOST, NCCL_PTR_CUDA or NCCL_PTR_DMABUF
  bool dmabuf = false;       // came through regMrDmaBuf
  uint64_t dmabuf_offset = 0;
  int dmabuf_fd = -1;
};

// Application hints (ncclNetAttr_v11_t/_v12_t) remembered per context; -1 = unset. `algo` and
// `proto` are kept only when `op` names a collective (NCCL leaves them stale on p2p ops).
struct NetAttr {
  int32_t send_max_peers = -1, send_min_peers = -1, send_max_flows = -1, send_min_flows = -1;
  int32_t recv_max_peers = -1, recv_min_peers = -1, recv_max_flows = -1, recv_min_flows = -1;
  uint32_t op = UINT32_MAX, algo = UINT32_MAX, proto = UINT32_MAX;
};

// One context per communicator (net v11) or one per process (older versions). The first init of
// the process reads the configuration and builds the device table; the last finalize releases it,
// after which nothing of the plugin runs (NCCL may dlclose the library).
ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) noexcept;
ncclResult_t finalize(void* ctx) noexcept;
ncclResult_t devices(int* ndev) noexcept;
ncclResult_t get_properties(int dev, DeviceProperties* props) noexcept;
ncclResult_t set_net_attr(void* ctx, const NetAttr& attr) noexcept;
// makeVDevice: fuses physical devices `devs[0..n)` into a new virtual device, whose index
// (after every physical one) is *dev; devices() counts it from then on. A transport that cannot
// fuse them returns an error, and NCCL uses them as they are.
ncclResult_t make_vdevice(const int* devs, int n, int* dev) noexcept;

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) noexcept;
// traffic_class overrides the context's (net v10 passes it per connect); -1 = the context's.
ncclResult_t connect(void* ctx, int dev, void* handle, int traffic_class, void** send_comm) noexcept;
ncclResult_t accept(void* listen_comm, void** recv_comm) noexcept;

// Registration belongs to the comm (send or receive) NCCL names; the transport decides what it
// can register.
ncclResult_t reg_mr(void* comm, const MemoryRegion& region, void** mhandle) noexcept;
ncclResult_t dereg_mr(void* comm, void* mhandle) noexcept;

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void* phandle, void** request) noexcept;
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** phandles, void** request) noexcept;
ncclResult_t iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles,
                    void** request) noexcept;
ncclResult_t test(void* request, int* done, int* sizes) noexcept;

ncclResult_t close_send(void* send_comm) noexcept;
ncclResult_t close_recv(void* recv_comm) noexcept;
ncclResult_t close_listen(void* listen_comm) noexcept;

// Contexts alive in this process (for tests and diagnostics).
int live_contexts() noexcept;

}  // namespace astral::plugin::net
