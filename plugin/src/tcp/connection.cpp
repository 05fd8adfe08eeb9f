#include "tcp/connection.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fmt/format.h>

#include "core/log.hpp"
#include "tcp/wire.hpp"

namespace astral::plugin::tcp {

ConnectionSetup describe_connection(bool sender, const TcpDevice& device, int device_index,
                                    int remote_rail, uint64_t connection_id,
                                    const std::string& peer, int timeout_ms, uint64_t stripe_min) {
  ConnectionSetup setup;
  setup.sender = sender;
  setup.device = device_index;
  setup.device_name = device.name;
  setup.local_rail = device.rail;
  setup.remote_rail = remote_rail;
  setup.connection_id = connection_id;
  setup.timeout_ms = timeout_ms;
  setup.stripe_min = stripe_min;
  if (device.rail >= 0 && remote_rail >= 0 && device.rail != remote_rail) {
    ASTRAL_INFO("{} {} crosses rails: rail {} on {} here, rail {} there",
                sender ? "connection to" : "connection from", peer, device.rail, device.name,
                remote_rail);
  }
  return setup;
}

Connection::Connection(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams,
                       const ConnectionSetup& setup)
    : ctx_(std::move(ctx)),
      streams_(std::move(streams)),
      timeout_ms_(setup.timeout_ms),
      stripe_min_(setup.stripe_min),
      device_name_(setup.device_name),
      local_address_(format_address(local_address(streams_.at(0).get()))),
      remote_address_(format_address(peer_address(streams_.at(0).get()))) {
  info_.comm_id = ctx_->comm_id;
  info_.connection_id = setup.connection_id;
  info_.sender = setup.sender;
  info_.device = setup.device;
  info_.device_name = device_name_;
  info_.local_rail = setup.local_rail;
  info_.remote_rail = setup.remote_rail;
  info_.local_address = local_address_;
  info_.remote_address = remote_address_;
  info_.streams = stream_count();
  const net::NetAttr hints = ctx_->attr();  // as NCCL set them before this connect/accept poll
  info_.hint_max_flows = setup.sender ? hints.send_max_flows : hints.recv_max_flows;
  if (auto* obs = observer()) obs->on_connected(info_);
}

Connection::~Connection() {
  if (auto* obs = observer()) obs->on_closed(info_);
}

ncclResult_t Connection::fail(ncclResult_t result, bool peer_lost, const std::string& what) {
  if (failure_ != ncclSuccess) return failure_;
  failure_ = result;
  ASTRAL_WARN("{} connection {} -> {} on {} ({} stream{}) failed: {}",
              info_.sender ? "send" : "receive", local_address_, remote_address_, device_name_,
              stream_count(), stream_count() == 1 ? "" : "s", what);
  if (auto* obs = observer()) obs->on_failed(info_, peer_lost, result, what);
  return failure_;
}

ncclResult_t Connection::fail_errno(int err, const char* op) {
  bool peer = err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH ||
              err == ENETUNREACH || err == ECONNABORTED;
  return fail(peer ? ncclRemoteError : ncclSystemError, peer,
              fmt::format("{}: {}{}", op, std::strerror(err),
                          peer ? " (peer lost or unreachable)" : ""));
}

}  // namespace astral::plugin::tcp
