#pragma once
// Connection establishment for the TCP transport. Both sides are polled by NCCL and never block:
// the connector opens every stream and sends a Hello on each; the listener collects streams by
// connection id, checks each Hello (magic, version, lengths, per-listen secret) and answers with
// an Ack on stream 0 once all have arrived. Strays are dropped with one WARN each.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/transport.hpp"
#include "tcp/devices.hpp"
#include "tcp/socket.hpp"
#include "tcp/wire.hpp"

namespace astral::plugin::tcp {

class TcpListenComm final : public ListenComm {
 public:
  TcpListenComm(std::shared_ptr<NetContext> ctx, Fd fd, const Secret& secret,
                const TcpDevice& device, int device_index, const Config& config);
  ncclResult_t accept(std::unique_ptr<RecvComm>* recv_comm) override;

 private:
  struct Pending {  // accepted socket whose Hello is not complete yet
    Fd fd;
    Hello hello{};
    size_t received = 0;
    int64_t deadline_ns = 0;
    std::string peer;
  };
  struct Group {  // streams of one connection, by connection id
    uint64_t connection_id = 0;
    int16_t rail = -1;
    std::vector<Fd> streams;
    int arrived = 0;
    Ack ack{};
    size_t ack_sent = 0;
    int64_t deadline_ns = 0;
    std::string peer;
  };

  void accept_new(int64_t now);
  void read_hellos(int64_t now);
  void admit(Pending& pending);
  void drop(const std::string& peer, const std::string& why);

  std::shared_ptr<NetContext> ctx_;
  Fd fd_;
  Secret secret_;
  TcpDevice device_;
  int device_index_;
  int timeout_ms_;
  uint64_t stripe_min_;
  std::vector<Pending> pending_;
  std::vector<Group> groups_;
  int dropped_ = 0;
};

class TcpConnector {
 public:
  TcpConnector(std::shared_ptr<NetContext> ctx, const TcpDevice& device, int device_index,
               const ListenHandle& handle, int streams, const Config& config, int traffic_class);
  // ncclSuccess with *send_comm null while in progress.
  ncclResult_t poll(std::unique_ptr<SendComm>* send_comm);

 private:
  ncclResult_t fail(const std::string& why);

  struct Stream {
    Fd fd;
    bool connected = false;
    size_t hello_sent = 0;
  };
  std::shared_ptr<NetContext> ctx_;
  TcpDevice device_;
  int device_index_;
  std::string remote_;
  int timeout_ms_;
  uint64_t stripe_min_;
  int traffic_class_;
  std::vector<Stream> streams_;
  Hello hello_{};
  Ack ack_{};
  size_t ack_received_ = 0;
  int64_t deadline_ns_ = 0;
  std::string start_error_;
};

// Streams per connection: ASTRAL_TCP_STREAMS, else one per 50 Gb/s of link speed (1..8).
int default_streams(int speed_mbps);

// Cryptographically random bytes (getrandom); false if the kernel cannot supply them.
bool random_bytes(void* out, size_t size);

}  // namespace astral::plugin::tcp
