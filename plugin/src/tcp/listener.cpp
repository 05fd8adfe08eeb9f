// The TCP transport's accepting side: the shared handshake on every stream, then a receive comm.
#include "core/log.hpp"
#include "tcp/comms.hpp"
#include "tcp/connection.hpp"
#include "tcp/handshake.hpp"

namespace astral::plugin::tcp {

TcpListenComm::TcpListenComm(std::shared_ptr<NetContext> ctx, Fd fd, const Secret& secret,
                             const TcpDevice& device, int device_index, const Config& config)
    : ctx_(std::move(ctx)),
      device_(device),
      device_index_(device_index),
      timeout_ms_(config.timeout_ms),
      stripe_min_(config.stripe_min),
      handshake_(std::move(fd), secret, TransportKind::kTcp, device.name, device.rail,
                 config.timeout_ms) {}

ncclResult_t TcpListenComm::accept(std::unique_ptr<RecvComm>* recv_comm) {
  Established done;
  if (!handshake_.poll(&done)) return ncclSuccess;
  for (auto& s : done.sockets) configure_stream(s.get(), timeout_ms_, ctx_->traffic_class);
  auto setup = describe_connection(false, device_, device_index_, done.remote_rail,
                                   done.connection_id, done.peer, timeout_ms_, stripe_min_);
  *recv_comm = std::make_unique<TcpRecvComm>(ctx_, std::move(done.sockets), setup);
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
