// The ib transport: RDMA over libibverbs (dlopened), InfiniBand and RoCE, behind the transport
// interface. Devices are ACTIVE verbs ports; the out-of-band channel uses an IP interface chosen
// like the tcp transport's (ASTRAL_SOCKET_IFNAME).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/transport.hpp"
#include "ib/connect.hpp"
#include "tcp/devices.hpp"

namespace astral::plugin::ib {
namespace {

// Virtual devices one process may make (NCCL makes one per group of fused ports).
constexpr int kMaxVirtualDevices = 32;

class IbTransport final : public Transport {
 public:
  IbTransport(const Config& config, std::vector<IbPort> ports, const NetInterface& oob)
      : config_(config), ports_(std::move(ports)), oob_(oob), host_(local_host_name()) {
    for (auto& p : ports_) {
      p.hca->start_events();
      physical_.push_back(single_device(p));
    }
    std::string why;
    policy_ = parse_path_policy(config_.ib.paths.c_str(), &why).value_or(kDefaultPathPolicy);
    if (!config_.ib.fabric.empty() && !ports_.empty()) {
      fabric_ = FabricModel::load(config_.ib.fabric, &why);
      if (!fabric_) ASTRAL_WARN("NET/IB : ASTRAL_FABRIC={}: {}; paths are planned without it", config_.ib.fabric, why);
    }
  }
  // The last finalize: no async-event thread of ours survives it (NCCL may dlclose next).
  ~IbTransport() override {
    for (auto& p : ports_) p.hca->stop_events();
  }

  const char* name() const override { return "ib"; }
  int device_count() const override {
    return static_cast<int>(physical_.size()) + virtual_count_.load(std::memory_order_acquire);
  }
  const NicPort& device(int dev) const override { return device_at(dev).identity; }

  net::DeviceProperties properties(int dev) const override {
    const IbDevice& d = device_at(dev);
    net::DeviceProperties p = identity_properties(d.identity);
    p.latency_us = 0;
    // GPU memory as NCCL's IB transport offers it: CUDA pointers through a peer-memory module,
    // DMA-BUF where the provider registers it. Flushes are iflush's, when NCCL asks for them.
    p.ptr_support = NCCL_PTR_HOST | (d.gdr ? NCCL_PTR_CUDA : 0) | (d.dmabuf ? NCCL_PTR_DMABUF : 0);
    p.reg_is_global = true;
    p.force_flush = false;
    p.max_comms = 65536;
    p.max_recvs = config_.max_recvs;
    p.max_p2p_bytes = NCCL_NET_MAX_SIZE_P2P;
    p.max_coll_bytes = NCCL_NET_MAX_SIZE_P2P;
    if (dev >= static_cast<int>(physical_.size())) {
      const std::vector<int>& members = virtual_members_[size_t(dev) - physical_.size()];
      p.fused_count = static_cast<int>(members.size());
      std::copy(members.begin(), members.end(), p.fused);
    }
    return p;
  }

  ncclResult_t make_vdevice(const int* devs, int n, int* dev) override;

  ncclResult_t reg_mr(Comm& comm, const net::MemoryRegion& region, void** mhandle) override {
    *mhandle = nullptr;
    const Queues& queues = connection_of(comm).queues();
    if (std::string refused = refusal(queues.device(), region); !refused.empty()) {
      ASTRAL_WARN("NET/IB : regMr{}: {} at {} ({} bytes): {}", region.dmabuf ? "DmaBuf" : "",
                  region.type == NCCL_PTR_HOST ? "host memory" : "GPU memory", region.data,
                  region.size, refused);
      return ncclInternalError;
    }
    auto mr = std::make_unique<IbMr>();
    std::string why;
    if (!mr->mrs.acquire(queues, region, &why)) {
      ASTRAL_WARN("NET/IB : regMr{}: {}", region.dmabuf ? "DmaBuf" : "", why);
      return ncclSystemError;
    }
    mr->device_memory = region.dmabuf || region.type != NCCL_PTR_HOST;
    *mhandle = mr.release();
    return ncclSuccess;
  }

  ncclResult_t dereg_mr(Comm&, void* mhandle) override {
    auto* mr = static_cast<IbMr*>(mhandle);
    if (!mr || mr->magic != IbMr::kMagic) return ncclSuccess;
    mr->magic = 0;
    delete mr;  // releases its registration on every member
    return ncclSuccess;
  }

  ncclResult_t listen(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                      std::unique_ptr<ListenComm>* listen_comm) override {
    std::string why;
    oob::Secret secret{};
    oob::Fd fd = oob::open_listener(oob_.address, oob_.address_len, device_at(dev).identity.rail,
                                    handle, &secret, &why);
    if (!fd) {
      ASTRAL_WARN("NET/IB : cannot listen on {} ({})", oob_.name, why);
      return ncclSystemError;
    }
    *listen_comm = std::make_unique<IbListenComm>(setup(ctx, dev, ctx->traffic_class), std::move(fd),
                                                  secret);
    return ncclSuccess;
  }

  ncclResult_t connect(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                       int traffic_class, std::unique_ptr<SendComm>* send_comm) override;

  void release_abandoned() override {
    std::lock_guard lock(mutex_);
    if (!connecting_.empty()) {
      ASTRAL_INFO("NET/IB : releasing {} connection(s) NCCL stopped polling", connecting_.size());
    }
    connecting_.clear();
  }

 private:
  // Physical devices first, then the virtual ones (NCCL's numbering); dev is checked by the core.
  const IbDevice& device_at(int dev) const {
    size_t d = size_t(dev);
    return d < physical_.size() ? physical_[d] : virtual_[d - physical_.size()];
  }
  EndpointSetup setup(const std::shared_ptr<NetContext>& ctx, int dev, int traffic_class) const {
    EndpointSetup s{ctx, device_at(dev), dev, config_.ib, config_.timeout_ms, {}};
    s.plan = plan_inputs(*ctx, traffic_class, int(s.device.members.size()));
    return s;
  }
  static Connection& connection_of(Comm& comm) {
    return comm.kind() == Comm::Kind::kSend ? static_cast<IbSendComm&>(comm).connection()
                                            : static_cast<IbRecvComm&>(comm).connection();
  }
  // Why `device` cannot register `region` ("" when it can): memory the properties did not offer
  // is NCCL misled or a caller's bug.
  static std::string refusal(const IbDevice& device, const net::MemoryRegion& region) {
    if (region.dmabuf && !device.dmabuf) {
      return "this device does not offer DMA-BUF (provider or kernel without it, or ASTRAL_DMABUF_ENABLE=0)";
    }
    if (!region.dmabuf && region.type != NCCL_PTR_HOST && !device.gdr) {
      return fmt::format("memory type {} needs GPUDirect RDMA, and no peer-memory module is loaded "
                         "(nvidia_peermem; ASTRAL_IB_GDR)", region.type);
    }
    return "";
  }
  PlanInputs plan_inputs(const NetContext& ctx, int traffic_class, int members) const;

  Config config_;
  std::vector<IbPort> ports_;
  std::vector<IbDevice> physical_;  // a device of one member per port
  // Written under mutex_ before virtual_count_ is published: readers index below the count
  // without the lock (getProperties runs outside NCCL's net lock), and an array never moves.
  std::array<IbDevice, kMaxVirtualDevices> virtual_;
  std::array<std::vector<int>, kMaxVirtualDevices> virtual_members_;
  std::atomic<int> virtual_count_{0};
  NetInterface oob_;
  std::string host_;
  PathPolicy policy_ = kDefaultPathPolicy;
  std::shared_ptr<const FabricModel> fabric_;
  std::mutex mutex_;
  std::map<IbConnector*, std::unique_ptr<IbConnector>> connecting_;
};

// What a new connection is planned from, on the connecting side (the plan itself is made once
// the peer's metadata is in: planning.hpp).
PlanInputs IbTransport::plan_inputs(const NetContext& ctx, int traffic_class, int members) const {
  PlanInputs in;
  in.policy = policy_;
  in.fabric = fabric_;
  in.host = host_;
  // As NCCL: ASTRAL_IB_QPS per member port, so that a fused device uses every member.
  in.qps = std::min(config_.ib.qps * members, kMaxQps);
  // setNetAttr's flow hint (all-to-all asking for more flows) overrides the QP count.
  if (int flows = ctx.attr().send_max_flows; flows > 0) in.qps = std::min(flows, kMaxQps);
  in.split = config_.ib.split_data;
  in.sl = config_.ib.service_level;
  in.tc = config_.ib.traffic_class >= 0 ? config_.ib.traffic_class
          : traffic_class >= 0         ? traffic_class
                                       : 0;
  return in;
}

ncclResult_t IbTransport::connect(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                                  int traffic_class, std::unique_ptr<SendComm>* send_comm) {
  oob::ListenHandle h;
  std::memcpy(&h, handle, sizeof h);
  std::string why;
  if (!oob::check_handle(h, &why)) {
    ASTRAL_WARN("NET/IB : connect on {}: {}", device_at(dev).identity.name, why);
    return ncclInternalError;
  }
  IbConnector* connector = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (h.connect_stage == 0) {
      int tc = traffic_class >= 0 ? traffic_class : ctx->traffic_class;
      auto owned = std::make_unique<IbConnector>(setup(ctx, dev, tc), h, oob_.address);
      connector = owned.get();
      connecting_[connector] = std::move(owned);
      h.connect_stage = reinterpret_cast<uint64_t>(connector);
      h.connect_check = h.connect_stage ^ oob::kStageCheck;
      std::memcpy(handle, &h, sizeof h);
    } else {
      auto it = connecting_.find(reinterpret_cast<IbConnector*>(h.connect_stage));
      if ((h.connect_stage ^ oob::kStageCheck) != h.connect_check || it == connecting_.end()) {
        ASTRAL_WARN("NET/IB : connect called with a handle whose connection state is not ours");
        return ncclInternalError;
      }
      connector = it->first;
    }
  }
  ncclResult_t result = connector->poll(send_comm);
  if (result != ncclSuccess || *send_comm) {
    std::lock_guard lock(mutex_);
    connecting_.erase(connector);
    h.connect_stage = h.connect_check = 0;
    std::memcpy(handle, &h, sizeof h);
  }
  return result;
}

ncclResult_t IbTransport::make_vdevice(const int* devs, int n, int* dev) {
  std::lock_guard lock(mutex_);
  if (!config_.ib.merge_nics) {
    ASTRAL_INFO("NET/IB : Skipping makeVDevice: ASTRAL_IB_MERGE_NICS=0");
    return ncclInvalidUsage;
  }
  std::vector<int> members(devs, devs + n);
  int count = virtual_count_.load(std::memory_order_relaxed);
  for (int v = 0; v < count; ++v) {  // the same fusion again: the same device
    if (virtual_members_[size_t(v)] == members) {
      *dev = int(physical_.size()) + v;
      return ncclSuccess;
    }
  }
  IbDevice fused;
  std::string why;
  if (!fuse_ports(ports_, devs, n, &fused, &why)) {
    ASTRAL_INFO("NET/IB : makeVDevice refused: {}", why);
    return ncclInvalidUsage;
  }
  if (count == kMaxVirtualDevices) {
    ASTRAL_WARN("NET/IB : makeVDevice: {} virtual devices exist already, the most one process "
                "keeps", count);
    return ncclInternalError;
  }
  virtual_[size_t(count)] = std::move(fused);
  virtual_members_[size_t(count)] = std::move(members);
  virtual_count_.store(count + 1, std::memory_order_release);
  *dev = int(physical_.size()) + count;
  const NicPort& id = virtual_[size_t(count)].identity;
  ASTRAL_INFO("NET/IB : virtual device {} = {}: {} ports, {} Mb/s, rail {}, plane {}", *dev,
              id.name, n, id.speed_mbps, id.rail, id.plane);
  return ncclSuccess;
}

}  // namespace

std::unique_ptr<Transport> make_ib_transport(const Config& config, const HostView& host,
                                             std::string* why) {
  std::string none;
  auto ports = discover_ports(config.ib, host, &none);
  if (ports.empty()) {
    // Not an error: a host without RDMA has 0 ib devices, said once.
    ASTRAL_INFO("NET/IB : no device: {}", none);
    return std::make_unique<IbTransport>(config, std::move(ports), NetInterface{});
  }
  IfnameFilter filter = IfnameFilter::parse(config.socket_ifname);
  std::string no_interface;
  auto interfaces = select_devices(list_interfaces(config.address_family), host.rdma_ports(),
                                   filter, &no_interface);
  if (interfaces.empty()) {
    *why = fmt::format("NET/IB : no IP interface for the out-of-band channel: {}", no_interface);
    return nullptr;
  }
  return std::make_unique<IbTransport>(config, std::move(ports), interfaces.front().iface);
}

}  // namespace astral::plugin::ib
