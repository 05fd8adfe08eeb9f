#pragma once
// The interface every transport implements (tcp now; ib next, loaded with dlopen). The core
// (net.cpp) validates NCCL's arguments and owns contexts; a transport owns everything about
// moving bytes: its devices and what they support (properties), memory registration, sockets or
// queue pairs, flushes. Objects handed to NCCL are these classes' instances, cast to void*.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/nccl_common.h"
#include "core/net.hpp"
#include "core/context.hpp"
#include "core/host_view.hpp"

namespace astral::plugin {

class Request {
 public:
  virtual ~Request() = default;
  // Makes progress on the request's connection; sets *done and, once done, the sizes (one for a
  // send, one per slot for a receive; `sizes` may be NULL). A done request returns to the plugin.
  virtual ncclResult_t test(int* done, int* sizes) = 0;
};

// Base of send and receive comms, so that regMr can tell which one NCCL passed. One transport
// runs per process, so a comm is always the process transport's.
class Comm {
 public:
  enum class Kind : uint32_t { kSend = 0x53454e44, kRecv = 0x52454356 };
  explicit Comm(Kind kind) : kind_(kind) {}
  virtual ~Comm() = default;
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class SendComm : public Comm {
 public:
  SendComm() : Comm(Kind::kSend) {}
  // `mhandle` is what this transport's reg_mr returned for the buffer (null if NCCL registered
  // nothing). *request = nullptr means "not now, retry".
  virtual ncclResult_t isend(const void* data, size_t size, int tag, void* mhandle,
                             void* phandle, Request** request) = 0;
};

class RecvComm : public Comm {
 public:
  RecvComm() : Comm(Kind::kRecv) {}
  virtual ncclResult_t irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                             void* const* mhandles, void* const* phandles, Request** request) = 0;
  // Makes received data visible to the GPU; *request = nullptr when nothing needs doing.
  virtual ncclResult_t iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                              Request** request) = 0;
};

class ListenComm {
 public:
  virtual ~ListenComm() = default;
  // Polled: *recv_comm stays null until a connection is complete.
  virtual ncclResult_t accept(std::unique_ptr<RecvComm>* recv_comm) = 0;
};

// The part of a device's properties that is the port's identity (name, PCI path, guid, port,
// speed, rail, plane). What the device supports (pointers, flush, limits) stays each transport's
// decision.
inline net::DeviceProperties identity_properties(const NicPort& port) {
  net::DeviceProperties p;
  p.name = port.name.c_str();
  p.pci_path = port.pci_path.empty() ? nullptr : port.pci_path.c_str();
  p.guid = port.guid;
  p.port = port.port;
  p.speed_mbps = port.speed_mbps;
  p.rail = port.rail;
  p.plane = port.plane;
  return p;
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int device_count() const = 0;
  // The NIC port behind device `dev` (0 <= dev < device_count(), checked by the core).
  virtual const NicPort& device(int dev) const = 0;
  // Everything NCCL is told about `dev`: pointer support, flush, latency, limits, rail, plane.
  virtual net::DeviceProperties properties(int dev) const = 0;
  // makeVDevice (core/net.hpp): tcp has no virtual devices; ib fuses the ports of one rail.
  virtual ncclResult_t make_vdevice(const int* devs, int n, int* dev) {
    (void)devs, (void)n, (void)dev;
    return ncclInvalidUsage;
  }
  virtual ncclResult_t listen(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                              std::unique_ptr<ListenComm>* listen_comm) = 0;
  // Polled with the same handle until *send_comm is set; in-progress state lives in the handle.
  // The context's hints (ctx->attr()) as NCCL set them before this poll are visible here.
  virtual ncclResult_t connect(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                               int traffic_class, std::unique_ptr<SendComm>* send_comm) = 0;
  // Registration for one of this transport's comms; a type the transport cannot register is an
  // error with one WARN naming it, never a crash.
  virtual ncclResult_t reg_mr(Comm& comm, const net::MemoryRegion& region, void** mhandle) = 0;
  virtual ncclResult_t dereg_mr(Comm& comm, void* mhandle) = 0;
  // Releases connections NCCL abandoned mid-connect (called by the last finalize).
  virtual void release_abandoned() = 0;
};

// The transport ASTRAL_TRANSPORT chose (config.transport: tcp, ib or auto) on `host`; nullptr with
// `why` set when it cannot run here.
std::unique_ptr<Transport> make_transport(const struct Config& config, const HostView& host,
                                          std::string* why);

}  // namespace astral::plugin

namespace astral::plugin::tcp {
// The TCP transport (tcp/transport.cpp): devices chosen by ASTRAL_SOCKET_IFNAME on `host`.
std::unique_ptr<Transport> make_tcp_transport(const Config& config, const HostView& host,
                                              std::string* why);
}  // namespace astral::plugin::tcp

namespace astral::plugin::ib {
// The ib transport (ib/transport.cpp): every ACTIVE verbs port that ASTRAL_IB_HCA selects. With
// no libibverbs, no RDMA in the kernel or no usable port it has 0 devices (one INFO line).
std::unique_ptr<Transport> make_ib_transport(const Config& config, const HostView& host,
                                             std::string* why);
}  // namespace astral::plugin::ib
