#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "tcp/comms.hpp"
#include "tcp/connection.hpp"
#include "tcp/handshake.hpp"

namespace astral::plugin::tcp {

int default_streams(int speed_mbps) {
  return std::clamp((speed_mbps + 49999) / 50000, 1, 8);
}

bool random_bytes(void* out, size_t size) {
  auto* p = static_cast<uint8_t*>(out);
  while (size > 0) {
    ssize_t n = ::getrandom(p, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

TcpConnector::TcpConnector(std::shared_ptr<NetContext> ctx, const TcpDevice& device,
                           int device_index, const ListenHandle& handle, int streams,
                           const Config& config, int traffic_class)
    : ctx_(std::move(ctx)),
      device_(device),
      device_index_(device_index),
      timeout_ms_(config.timeout_ms),
      stripe_min_(config.stripe_min),
      traffic_class_(traffic_class) {
  sockaddr_storage remote{};
  remote.ss_family = handle.family;
  if (handle.family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(remote);
    std::memcpy(&in.sin_addr, handle.address, sizeof in.sin_addr);
    in.sin_port = htons(handle.port);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(remote);
    std::memcpy(&in6.sin6_addr, handle.address, sizeof in6.sin6_addr);
    in6.sin6_port = htons(handle.port);
  }
  remote_ = format_address(remote);
  deadline_ns_ = monotonic_ns() + int64_t(timeout_ms_) * 1000000;
  hello_ = Hello{kHelloMagic, kProtocolVersion, 0, handle.secret, 0,
                 static_cast<uint16_t>(streams), static_cast<int16_t>(device.rail), 0, 0};
  if (!random_bytes(&hello_.connection_id, sizeof hello_.connection_id)) {
    start_error_ = "no random bytes from the kernel (getrandom)";
    return;
  }
  for (int k = 0; k < streams; ++k) {
    Stream s;
    bool in_progress = false;
    s.fd = start_connect(remote, device.iface.address, &in_progress, &start_error_);
    if (!s.fd) return;
    s.connected = !in_progress;
    streams_.push_back(std::move(s));
  }
}

ncclResult_t TcpConnector::fail(const std::string& why) {
  ASTRAL_WARN("connecting from {} to {} failed: {}", device_.name, remote_, why);
  return ncclRemoteError;
}

ncclResult_t TcpConnector::poll(std::unique_ptr<SendComm>* send_comm) {
  if (!start_error_.empty()) return fail(start_error_);
  if (monotonic_ns() > deadline_ns_) {
    return fail(fmt::format("no answer within {} ms (ASTRAL_TCP_TIMEOUT_MS)", timeout_ms_));
  }
  bool hellos_sent = true;
  for (size_t k = 0; k < streams_.size(); ++k) {
    Stream& s = streams_[k];
    if (!s.connected) {
      std::string why;
      int status = connect_status(s.fd.get(), &why);
      if (status < 0) return fail(why);
      s.connected = status > 0;
    }
    if (s.connected && s.hello_sent < sizeof(Hello)) {
      Hello hello = hello_;
      hello.stream_index = static_cast<uint16_t>(k);
      ssize_t n = ::send(s.fd.get(), reinterpret_cast<uint8_t*>(&hello) + s.hello_sent,
                         sizeof(Hello) - s.hello_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && !would_block(errno)) return fail(fmt::format("send: {}", std::strerror(errno)));
      if (n > 0) s.hello_sent += static_cast<size_t>(n);
    }
    hellos_sent = hellos_sent && s.hello_sent == sizeof(Hello);
  }
  if (!hellos_sent) return ncclSuccess;

  ssize_t n = ::recv(streams_[0].fd.get(), reinterpret_cast<uint8_t*>(&ack_) + ack_received_,
                     sizeof(Ack) - ack_received_, MSG_DONTWAIT);
  if (n == 0) return fail("the listener closed the connection during the handshake");
  if (n < 0) return would_block(errno) ? ncclSuccess : fail(std::strerror(errno));
  ack_received_ += static_cast<size_t>(n);
  if (ack_received_ < sizeof(Ack)) return ncclSuccess;
  std::string why;
  if (!check_ack(ack_, hello_.connection_id, &why)) return fail(why);

  std::vector<Fd> fds;
  for (auto& s : streams_) {
    configure_stream(s.fd.get(), timeout_ms_, traffic_class_);
    fds.push_back(std::move(s.fd));
  }
  auto setup = describe_connection(true, device_, device_index_, ack_.rail, hello_.connection_id,
                                   remote_, timeout_ms_, stripe_min_);
  *send_comm = std::make_unique<TcpSendComm>(ctx_, std::move(fds), setup);
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
