#pragma once
// The authenticated out-of-band connection setup both transports start with. Both sides are
// polled by NCCL and never block: the connector opens every socket and sends a Hello on each; the
// listener collects sockets by connection id, checks each Hello (magic, version, transport,
// lengths, per-listen secret) and answers with an Ack on socket 0 once all have arrived. Strays
// are dropped with one WARN each (then INFO), and a flood cannot grow memory.
//
// What happens next is the transport's: TCP moves data on these sockets, IB exchanges its QP
// metadata on socket 0 and keeps it open as a liveness channel.
#include <cstdint>
#include <string>
#include <vector>

#include "oob/socket.hpp"
#include "oob/wire.hpp"

namespace astral::plugin::oob {

// A connection whose handshake is complete.
struct Established {
  std::vector<Fd> sockets;  // socket 0 first
  uint64_t connection_id = 0;
  int remote_rail = -1;
  std::string peer;  // "ip:port" of the other end
};

// Opens a listening socket on `local` (its port replaced by an ephemeral one) and writes the
// handle NCCL ships to the connecting rank (zeroed first). Invalid Fd with `why` on failure.
Fd open_listener(const sockaddr_storage& local, socklen_t length, int rail, void* handle,
                 Secret* secret, std::string* why);

class HandshakeListener {
 public:
  HandshakeListener(Fd fd, const Secret& secret, TransportKind transport, std::string device_name,
                    int rail, int timeout_ms);
  // Accepts and checks what arrived; true with *out filled when a connection is complete.
  bool poll(Established* out);

 private:
  struct Pending {  // accepted socket whose Hello is not complete yet
    Fd fd;
    Hello hello{};
    size_t received = 0;
    int64_t deadline_ns = 0;
    std::string peer;
  };
  struct Group {  // sockets of one connection, by connection id
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

  Fd fd_;
  Secret secret_;
  TransportKind transport_;
  std::string device_name_;
  int rail_;
  int timeout_ms_;
  std::vector<Pending> pending_;
  std::vector<Group> groups_;
  int dropped_ = 0;
};

class HandshakeConnector {
 public:
  // Starts `streams` non-blocking connects from `local` to the handle's listener.
  HandshakeConnector(const ListenHandle& handle, const sockaddr_storage& local, int streams,
                     TransportKind transport, int rail, int timeout_ms);
  // 1: done, *out filled; 0: in progress; -1: failed, *why set.
  int poll(Established* out, std::string* why);
  const std::string& remote() const { return remote_; }

 private:
  struct Stream {
    Fd fd;
    bool connected = false;
    size_t hello_sent = 0;
  };
  std::string remote_;
  int timeout_ms_;
  std::vector<Stream> streams_;
  Hello hello_{};
  Ack ack_{};
  size_t ack_received_ = 0;
  int64_t deadline_ns_ = 0;
  std::string start_error_;
};

}  // namespace astral::plugin::oob
