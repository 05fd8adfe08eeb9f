#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "oob/handshake.hpp"

namespace astral::plugin::oob {

HandshakeConnector::HandshakeConnector(const ListenHandle& handle, const sockaddr_storage& local,
                                       int streams, TransportKind transport, int rail,
                                       int timeout_ms)
    : timeout_ms_(timeout_ms) {
  sockaddr_storage remote = handle_address(handle);
  remote_ = format_address(remote);
  deadline_ns_ = monotonic_ns() + int64_t(timeout_ms_) * 1000000;
  hello_ = Hello{kHelloMagic, kProtocolVersion, 0, handle.secret, 0,
                 static_cast<uint16_t>(streams), static_cast<int16_t>(rail),
                 static_cast<uint32_t>(transport), 0};
  if (!random_bytes(&hello_.connection_id, sizeof hello_.connection_id)) {
    start_error_ = "no random bytes from the kernel (getrandom)";
    return;
  }
  for (int k = 0; k < streams; ++k) {
    Stream s;
    bool in_progress = false;
    s.fd = start_connect(remote, local, &in_progress, &start_error_);
    if (!s.fd) return;
    s.connected = !in_progress;
    streams_.push_back(std::move(s));
  }
}

int HandshakeConnector::poll(Established* out, std::string* why) {
  if (!start_error_.empty()) return *why = start_error_, -1;
  if (monotonic_ns() > deadline_ns_) return *why = fmt::format("no answer within {} ms", timeout_ms_), -1;
  bool hellos_sent = true;
  for (size_t k = 0; k < streams_.size(); ++k) {
    Stream& s = streams_[k];
    if (!s.connected) {
      int status = connect_status(s.fd.get(), why);
      if (status < 0) return -1;
      s.connected = status > 0;
    }
    if (s.connected && s.hello_sent < sizeof(Hello)) {
      Hello hello = hello_;
      hello.stream_index = static_cast<uint16_t>(k);
      ssize_t n = ::send(s.fd.get(), reinterpret_cast<uint8_t*>(&hello) + s.hello_sent,
                         sizeof(Hello) - s.hello_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && !would_block(errno)) return *why = fmt::format("send: {}", std::strerror(errno)), -1;
      if (n > 0) s.hello_sent += static_cast<size_t>(n);
    }
    hellos_sent = hellos_sent && s.hello_sent == sizeof(Hello);
  }
  if (!hellos_sent) return 0;

  ssize_t n = ::recv(streams_[0].fd.get(), reinterpret_cast<uint8_t*>(&ack_) + ack_received_,
                     sizeof(Ack) - ack_received_, MSG_DONTWAIT);
  if (n == 0) return *why = "the listener closed the connection during the handshake", -1;
  if (n < 0) return would_block(errno) ? 0 : (*why = std::strerror(errno), -1);
  ack_received_ += static_cast<size_t>(n);
  if (ack_received_ < sizeof(Ack)) return 0;
  if (!check_ack(ack_, hello_.connection_id, why)) return -1;

  for (auto& s : streams_) out->sockets.push_back(std::move(s.fd));
  out->connection_id = hello_.connection_id;
  out->remote_rail = ack_.rail;
  out->peer = remote_;
  return 1;
}

}  // namespace astral::plugin::oob
