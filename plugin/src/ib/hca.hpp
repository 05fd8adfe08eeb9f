#pragma once
// The ib transport's devices: every ACTIVE port (IB or RoCE) of every HCA libibverbs lists,
// selected by ASTRAL_IB_HCA, joined to the host view's NIC port (PCI path, rail, plane), with the
// addressing a connection needs (LID, GID and its index, MTU). An Hca is one opened device: its
// context and protection domain, its registration cache and the thread that reads its async
// events. Comms hold it by shared_ptr, so it outlives finalize until their last close.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/host_view.hpp"
#include "ib/verbs.hpp"

namespace astral::plugin::ib {

// A registered range, shared by every regMr that falls inside it (NCCL registers the same
// buffers on many comms).
struct MrEntry {
  ibv_mr* mr = nullptr;
  uintptr_t begin = 0, end = 0;  // page-aligned
  int refs = 0;
  bool dmabuf = false;
};

class Hca : public std::enable_shared_from_this<Hca> {
 public:
  Hca(std::shared_ptr<const Verbs> verbs, ibv_context* context, ibv_pd* pd, std::string name);
  ~Hca();
  Hca(const Hca&) = delete;
  Hca& operator=(const Hca&) = delete;

  const Verbs& verbs() const { return *verbs_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }

  // The cached registration covering [data, data+size), registered on a miss; null with `why`.
  MrEntry* acquire(void* data, size_t size, std::string* why);
  MrEntry* acquire_dmabuf(void* data, size_t size, uint64_t offset, int fd, std::string* why);
  void release(MrEntry* entry);

  // Set by the async-event thread; comms on this device check them on every call.
  bool fatal() const { return fatal_.load(std::memory_order_relaxed); }
  bool port_down(int port) const { return (port_down_.load(std::memory_order_relaxed) >> port) & 1; }
  std::string fatal_reason() const;

  // The async-event thread: started with the transport; stopped (joined) when the transport is
  // destroyed at the last finalize, so that a dlclose after it finds no thread of ours (comms
  // still open then lose async reporting, not their CQ errors or liveness checks).
  void start_events();
  void stop_events();

 private:
  void event_loop();
  void handle_event(const ibv_async_event& event);

  std::shared_ptr<const Verbs> verbs_;
  ibv_context* context_;
  ibv_pd* pd_;
  std::string name_;
  std::mutex mr_mutex_;
  // Few entries (NCCL registers a handful of large buffers), so a list searched in order.
  std::vector<std::unique_ptr<MrEntry>> mrs_;
  std::atomic<bool> fatal_{false};
  std::atomic<uint32_t> port_down_{0};
  mutable std::mutex reason_mutex_;
  std::string reason_;
  std::thread events_;
  int stop_fd_ = -1;
};

// QPs report fatal events to the comm owning them through this, set as qp_context/cq_context.
struct FatalFlag {
  std::atomic<int> event{-1};  // ibv_event_type, -1 while healthy
};

struct IbPort : NicPort {  // NicPort::port is the verbs port number
  std::shared_ptr<Hca> hca;
  bool ethernet = false;  // RoCE
  uint16_t lid = 0;
  uint8_t lmc = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int gid_index = 0;
  ibv_gid gid{};
  int gid_type = -1;  // IBV_GID_TYPE_*, -1 unknown
  bool gdr = false;     // a GPUDirect RDMA path exists (peer memory module)
  bool dmabuf = false;  // the provider registers DMA-BUF memory
};

// Every usable port. `why` is one line when there are none (no library, ENOSYS: no RDMA in the
// kernel, no device, no ACTIVE port, all filtered).
std::vector<IbPort> discover_ports(const IbConfig& config, const HostView& host, std::string* why);

// The GID index NCCL's rules choose on a RoCE port: ASTRAL_IB_GID_INDEX when set, else the first
// entry of the wanted RoCE version and address family, else the first of that version, else 0.
struct GidCandidate {
  ibv_gid gid{};
  int type = -1;  // IBV_GID_TYPE_*, -1 unknown
};
int choose_gid_index(const std::vector<GidCandidate>& table, const IbConfig& config);

// Whether a peer-memory module for GPUDirect RDMA is loaded, probed where NCCL probes it
// (nv_mem / nvidia-peermem under /sys/kernel/mm/memory_peers, or /sys/module/nvidia_peermem).
bool peer_memory_loaded();

// Link speed in Mb/s from verbs' width and speed encodings (0 when unknown).
int port_speed_mbps(uint8_t active_width, uint8_t active_speed);

}  // namespace astral::plugin::ib
