#pragma once
// The interface every transport implements (tcp now; ib later, loaded with dlopen). The core
// (net.cpp) validates NCCL's arguments and owns contexts; a transport owns sockets or queue pairs
// and moves bytes. Objects handed to NCCL are these classes' instances, cast to void*.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/nccl_common.h"
#include "astral/plugin/net.hpp"
#include "core/context.hpp"
#include "core/device_table.hpp"

namespace astral::plugin {

class Request {
 public:
  virtual ~Request() = default;
  // Makes progress on the request's connection; sets *done and, once done, the sizes (one for a
  // send, one per slot for a receive; `sizes` may be NULL). A done request returns to the plugin.
  virtual ncclResult_t test(int* done, int* sizes) = 0;
};

// Base of send and receive comms, so that regMr can tell which one NCCL passed.
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
  // *request = nullptr means "not now, retry".
  virtual ncclResult_t isend(const void* data, size_t size, int tag, void* phandle,
                             Request** request) = 0;
};

class RecvComm : public Comm {
 public:
  RecvComm() : Comm(Kind::kRecv) {}
  virtual ncclResult_t irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                             void* const* phandles, Request** request) = 0;
};

class ListenComm {
 public:
  virtual ~ListenComm() = default;
  // Polled: *recv_comm stays null until a connection is complete.
  virtual ncclResult_t accept(std::unique_ptr<RecvComm>* recv_comm) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual const std::vector<NetDevice>& devices() const = 0;
  virtual int max_recvs() const = 0;
  virtual size_t max_message_bytes() const = 0;
  virtual ncclResult_t listen(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                              std::unique_ptr<ListenComm>* listen_comm) = 0;
  // Polled with the same handle until *send_comm is set; in-progress state lives in the handle.
  virtual ncclResult_t connect(const std::shared_ptr<NetContext>& ctx, int dev, void* handle,
                               int traffic_class, std::unique_ptr<SendComm>* send_comm) = 0;
  // Releases connections NCCL abandoned mid-connect (called by the last finalize).
  virtual void release_abandoned() = 0;
};

// Creates the transport chosen by the configuration; nullptr with `why` set on failure.
std::unique_ptr<Transport> make_transport(const struct Config& config, std::string* why);

}  // namespace astral::plugin
