#pragma once
// Connection establishment for the TCP transport: the shared out-of-band handshake
// (oob/handshake.hpp) on every stream, then the streams become a TCP connection.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/transport.hpp"
#include "oob/handshake.hpp"
#include "tcp/devices.hpp"
#include "tcp/wire.hpp"

namespace astral::plugin::tcp {

class TcpListenComm final : public ListenComm {
 public:
  TcpListenComm(std::shared_ptr<NetContext> ctx, Fd fd, const Secret& secret,
                const TcpDevice& device, int device_index, const Config& config);
  ncclResult_t accept(std::unique_ptr<RecvComm>* recv_comm) override;

 private:
  std::shared_ptr<NetContext> ctx_;
  TcpDevice device_;
  int device_index_;
  int timeout_ms_;
  uint64_t stripe_min_;
  HandshakeListener handshake_;
};

class TcpConnector {
 public:
  TcpConnector(std::shared_ptr<NetContext> ctx, const TcpDevice& device, int device_index,
               const ListenHandle& handle, int streams, const Config& config, int traffic_class);
  // ncclSuccess with *send_comm null while in progress.
  ncclResult_t poll(std::unique_ptr<SendComm>* send_comm);

 private:
  std::shared_ptr<NetContext> ctx_;
  TcpDevice device_;
  int device_index_;
  int timeout_ms_;
  uint64_t stripe_min_;
  int traffic_class_;
  HandshakeConnector handshake_;
};

// Streams per connection: ASTRAL_TCP_STREAMS, else one per 50 Gb/s of link speed (1..8).
int default_streams(int speed_mbps);

}  // namespace astral::plugin::tcp
