#pragma once
// What both directions of an established TCP connection share: the streams, the context, the
// description reported to observers and logs, and the failure state. A failed connection stays
// failed: every later call on it returns the same error.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/nccl_common.h"
#include "astral/plugin/observer.hpp"
#include "core/context.hpp"
#include "tcp/devices.hpp"
#include "oob/socket.hpp"
#include "tcp/wire.hpp"  // the handshake names (Fd, ...) in this namespace

namespace astral::plugin::tcp {

struct ConnectionSetup {
  bool sender = false;
  int device = -1;
  std::string device_name;
  int local_rail = -1;
  int remote_rail = -1;
  uint64_t connection_id = 0;
  int timeout_ms = 30000;
  uint64_t stripe_min = 1 << 20;
};

// The setup of a connection on local `device` to a peer on `remote_rail`; says once, at INFO,
// when the connection crosses rails (NCCL should keep each rail to itself).
ConnectionSetup describe_connection(bool sender, const TcpDevice& device, int device_index,
                                    int remote_rail, uint64_t connection_id,
                                    const std::string& peer, int timeout_ms, uint64_t stripe_min);

class Connection {
 public:
  Connection(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams, const ConnectionSetup& setup);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::mutex& mutex() { return mutex_; }
  int stream_count() const { return static_cast<int>(streams_.size()); }
  int fd(int stream) const { return streams_[stream].get(); }
  int timeout_ms() const { return timeout_ms_; }
  uint64_t stripe_min() const { return stripe_min_; }
  const ConnectionInfo& info() const { return info_; }
  NetObserver* observer() const { return ctx_->observer.get(); }
  // The communicator's hints as NCCL last set them (setNetAttr may run on another thread).
  net::NetAttr hints() const { return ctx_->attr(); }
  ncclProfilerCallback_t profiler() const { return ctx_->profiler; }

  bool failed() const { return failure_ != ncclSuccess; }
  ncclResult_t failure() const { return failure_; }
  // Marks the connection failed (first call only): one WARN, observer told. Returns the result.
  ncclResult_t fail(ncclResult_t result, bool peer_lost, const std::string& what);
  // errno of a failed send/recv as a connection failure.
  ncclResult_t fail_errno(int err, const char* op);

 private:
  std::mutex mutex_;
  std::shared_ptr<NetContext> ctx_;
  std::vector<Fd> streams_;
  int timeout_ms_;
  uint64_t stripe_min_;
  std::string device_name_, local_address_, remote_address_;
  ConnectionInfo info_;
  ncclResult_t failure_ = ncclSuccess;
};

}  // namespace astral::plugin::tcp
