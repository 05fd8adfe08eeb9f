// The TCP transport's connecting side: the shared handshake on every stream, then a send comm.
#include <algorithm>

#include "core/log.hpp"
#include "tcp/comms.hpp"
#include "tcp/connection.hpp"
#include "tcp/handshake.hpp"

namespace astral::plugin::tcp {

int default_streams(int speed_mbps) {
  return std::clamp((speed_mbps + 49999) / 50000, 1, 8);
}

TcpConnector::TcpConnector(std::shared_ptr<NetContext> ctx, const TcpDevice& device,
                           int device_index, const ListenHandle& handle, int streams,
                           const Config& config, int traffic_class)
    : ctx_(std::move(ctx)),
      device_(device),
      device_index_(device_index),
      timeout_ms_(config.timeout_ms),
      stripe_min_(config.stripe_min),
      traffic_class_(traffic_class),
      handshake_(handle, device.iface.address, streams, TransportKind::kTcp, device.rail,
                 config.timeout_ms) {}

ncclResult_t TcpConnector::poll(std::unique_ptr<SendComm>* send_comm) {
  Established done;
  std::string why;
  int status = handshake_.poll(&done, &why);
  if (status < 0) {
    ASTRAL_WARN("connecting from {} to {} failed: {}{}", device_.name, handshake_.remote(), why,
                why.rfind("no answer", 0) == 0 ? " (ASTRAL_TCP_TIMEOUT_MS)" : "");
    return ncclRemoteError;
  }
  if (status == 0) return ncclSuccess;
  for (auto& s : done.sockets) configure_stream(s.get(), timeout_ms_, traffic_class_);
  auto setup = describe_connection(true, device_, device_index_, done.remote_rail,
                                   done.connection_id, done.peer, timeout_ms_, stripe_min_);
  *send_comm = std::make_unique<TcpSendComm>(ctx_, std::move(done.sockets), setup);
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
