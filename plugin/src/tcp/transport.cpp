// The TCP transport: devices are IP interfaces (chosen like NCCL's socket transport), each
// described by the NIC behind it; connections are one or more TCP streams.
#include <netinet/in.h>

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/transport.hpp"
#include "tcp/handshake.hpp"

namespace astral::plugin {
namespace tcp {
namespace {

struct HostRegion {
  static constexpr uint32_t kMagic = 0x4d454d52;
  uint32_t magic = kMagic;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const Config& config, std::vector<TcpDevice> devices)
      : config_(config), devices_(std::move(devices)) {}

  const char* name() const override { return "tcp"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  const NicPort& device(int dev) const override { return devices_.at(static_cast<size_t>(dev)); }

  // Sockets move host memory with the CPU: no GPU pointers, nothing to flush, no registration
  // cost, and NCCL's default latency.
  net::DeviceProperties properties(int dev) const override {
    net::DeviceProperties p = identity_properties(devices_.at(static_cast<size_t>(dev)));
    p.latency_us = 0;
    p.ptr_support = NCCL_PTR_HOST;
    p.reg_is_global = true;
    p.force_flush = false;
    p.max_comms = 65536;
    p.max_recvs = config_.max_recvs;
    p.max_p2p_bytes = NCCL_NET_MAX_SIZE_P2P;
    p.max_coll_bytes = NCCL_NET_MAX_SIZE_P2P;
    return p;
  }

  // The handle only lets deregistration tell ours from garbage; host memory needs nothing.
  ncclResult_t reg_mr(Comm&, const net::MemoryRegion& region, void** mhandle) override {
    *mhandle = nullptr;
    if (region.type != NCCL_PTR_HOST || region.dmabuf) {
      ASTRAL_WARN("regMr{}: memory type {} at {} ({} bytes) is not host memory; the tcp transport "
                  "supports NCCL_PTR_HOST only (it does not advertise CUDA or DMA-BUF pointers)",
                  region.dmabuf ? "DmaBuf" : "", region.type, region.data, region.size);
      return ncclInternalError;
    }
    *mhandle = new HostRegion{};
    return ncclSuccess;
  }
  ncclResult_t dereg_mr(Comm&, void* mhandle) override {
    auto* region = static_cast<HostRegion*>(mhandle);
    if (region && region->magic == HostRegion::kMagic) {
      region->magic = 0;
      delete region;
    }
    return ncclSuccess;
  }

  ncclResult_t listen(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                      std::unique_ptr<ListenComm>* listen_comm) override {
    const TcpDevice& device = devices_.at(static_cast<size_t>(dev));
    std::string why;
    Secret secret{};
    Fd fd = open_listener(device.iface.address, device.iface.address_len, device.rail, handle,
                          &secret, &why);
    if (!fd) {
      ASTRAL_WARN("cannot listen on {} ({})", device.name, why);
      return ncclSystemError;
    }
    *listen_comm = std::make_unique<TcpListenComm>(ctx, std::move(fd), secret, device, dev,
                                                   config_);
    return ncclSuccess;
  }

  ncclResult_t connect(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                       int traffic_class, std::unique_ptr<SendComm>* send_comm) override {
    ListenHandle h;
    std::memcpy(&h, handle, sizeof h);
    std::string why;
    if (!check_handle(h, &why)) {
      ASTRAL_WARN("connect on {}: {}", devices_.at(size_t(dev)).name, why);
      return ncclInternalError;
    }
    TcpConnector* connector = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (h.connect_stage == 0) {
        const TcpDevice& device = devices_.at(static_cast<size_t>(dev));
        int streams = config_.streams > 0 ? config_.streams : default_streams(device.speed_mbps);
        auto owned = std::make_unique<TcpConnector>(ctx, device, dev, h, streams, config_,
                                                    traffic_class);
        connector = owned.get();
        connecting_[connector] = std::move(owned);
        h.connect_stage = reinterpret_cast<uint64_t>(connector);
        h.connect_check = h.connect_stage ^ kStageCheck;
        std::memcpy(handle, &h, sizeof h);
      } else {
        auto it = connecting_.find(reinterpret_cast<TcpConnector*>(h.connect_stage));
        if ((h.connect_stage ^ kStageCheck) != h.connect_check || it == connecting_.end()) {
          ASTRAL_WARN("connect called with a handle whose connection state is not ours");
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

  void release_abandoned() override {
    std::lock_guard lock(mutex_);
    if (!connecting_.empty()) {
      ASTRAL_INFO("releasing {} connection(s) NCCL stopped polling", connecting_.size());
    }
    connecting_.clear();
  }

 private:
  Config config_;
  std::vector<TcpDevice> devices_;
  std::mutex mutex_;
  std::map<TcpConnector*, std::unique_ptr<TcpConnector>> connecting_;
};

}  // namespace
}  // namespace tcp

namespace tcp {

std::unique_ptr<Transport> make_tcp_transport(const Config& config, const HostView& host,
                                              std::string* why) {
  IfnameFilter filter = IfnameFilter::parse(config.socket_ifname);
  if (!host.why_no_rails().empty()) {
    ASTRAL_INFO("RDMA NICs found but no node model ({}); devices get no rails", host.why_no_rails());
  }
  auto devices = select_devices(list_interfaces(config.address_family), host.rdma_ports(), filter, why);
  return std::make_unique<TcpTransport>(config, std::move(devices));
}

}  // namespace tcp

}  // namespace astral::plugin
