#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "oob/handshake.hpp"

namespace astral::plugin::oob {
namespace {
// Half-open connections kept at once; beyond this the oldest is dropped (a flood must not grow
// memory or starve the real peer).
constexpr size_t kMaxPending = 64;
// WARNs per listener before further strays are logged at INFO.
constexpr int kMaxDropWarnings = 8;
// A legitimate peer's Hello is already in the socket buffer when we accept; strays get this long.
constexpr int kHandshakeTimeoutMs = 10000;
}  // namespace

Fd open_listener(const sockaddr_storage& local, socklen_t length, int rail, void* handle,
                 Secret* secret, std::string* why) {
  sockaddr_storage address = local;
  if (address.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(address).sin_port = 0;
  if (address.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(address).sin6_port = 0;
  Fd fd = listen_on(&address, length, why);
  if (!fd) {
    *why = fmt::format("{}: {}", format_address(address), *why);
    return fd;
  }
  ListenHandle h{};
  h.magic = kHandleMagic;
  h.version = kProtocolVersion;
  h.family = address.ss_family;
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    std::memcpy(h.address, &in.sin_addr, sizeof in.sin_addr);
    h.port = ntohs(in.sin_port);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    std::memcpy(h.address, &in6.sin6_addr, sizeof in6.sin6_addr);
    h.port = ntohs(in6.sin6_port);
  }
  h.rail = static_cast<int16_t>(rail);
  if (!random_bytes(h.secret.data(), h.secret.size())) {
    *why = "cannot draw a listen secret: getrandom failed";
    return Fd();
  }
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *secret = h.secret;
  return fd;
}

HandshakeListener::HandshakeListener(Fd fd, const Secret& secret, TransportKind transport,
                                     std::string device_name, int rail, int timeout_ms)
    : fd_(std::move(fd)),
      secret_(secret),
      transport_(transport),
      device_name_(std::move(device_name)),
      rail_(rail),
      timeout_ms_(timeout_ms) {}

void HandshakeListener::drop(const std::string& peer, const std::string& why) {
  ++dropped_;
  auto level = dropped_ <= kMaxDropWarnings ? NCCL_LOG_WARN : NCCL_LOG_INFO;
  ASTRAL_LOG(level, "dropped connection from {} on {} ({}): {}{}", peer, device_name_,
             format_address(local_address(fd_.get())), why,
             dropped_ == kMaxDropWarnings ? "; further drops on this listener are logged at INFO"
                                          : "");
}

void HandshakeListener::accept_new(int64_t now) {
  for (;;) {
    int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (!would_block(errno) && errno != ECONNABORTED) {
        ASTRAL_WARN("accept on {} failed: {}", device_name_, std::strerror(errno));
      }
      return;
    }
    Pending p;
    p.fd = Fd(fd);
    p.peer = format_address(peer_address(fd));
    p.deadline_ns = now + int64_t(std::min(timeout_ms_, kHandshakeTimeoutMs)) * 1000000;
    if (pending_.size() >= kMaxPending) {
      drop(pending_.front().peer, "too many connections waiting for a handshake");
      pending_.erase(pending_.begin());
    }
    pending_.push_back(std::move(p));
  }
}

void HandshakeListener::read_hellos(int64_t now) {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    ssize_t n = ::recv(p.fd.get(), reinterpret_cast<uint8_t*>(&p.hello) + p.received,
                       sizeof(Hello) - p.received, MSG_DONTWAIT);
    std::string why;
    if (n > 0) {
      p.received += static_cast<size_t>(n);
      if (p.received < sizeof(Hello)) {
        // Reject a bad magic as soon as its 4 bytes are in: garbage need not wait for the timeout.
        if (p.received >= sizeof(uint32_t) && p.hello.magic != kHelloMagic) {
          check_hello(p.hello, secret_, &why, transport_);
        }
      } else if (check_hello(p.hello, secret_, &why, transport_)) {
        admit(p);
        pending_.erase(pending_.begin() + static_cast<long>(i));
        continue;
      }
    } else if (n == 0) {
      why = fmt::format("closed after {} of {} handshake bytes", p.received, sizeof(Hello));
    } else if (!would_block(errno)) {
      why = std::strerror(errno);
    } else if (now > p.deadline_ns) {
      why = fmt::format("no handshake within {} ms", std::min(timeout_ms_, kHandshakeTimeoutMs));
    }
    if (!why.empty()) {
      drop(p.peer, why);
      pending_.erase(pending_.begin() + static_cast<long>(i));
      continue;
    }
    ++i;
  }
}

// A checked Hello: file its socket under its connection.
void HandshakeListener::admit(Pending& p) {
  const Hello& h = p.hello;
  auto group = std::find_if(groups_.begin(), groups_.end(),
                            [&](const Group& g) { return g.connection_id == h.connection_id; });
  if (group == groups_.end()) {
    Group g;
    g.connection_id = h.connection_id;
    g.rail = h.rail;
    g.streams.resize(h.stream_count);
    g.deadline_ns = p.deadline_ns;
    g.peer = p.peer;
    groups_.push_back(std::move(g));
    group = groups_.end() - 1;
  }
  if (group->streams.size() != h.stream_count || group->streams[h.stream_index]) {
    drop(p.peer, fmt::format("stream {} of {} does not fit connection {:#x}", h.stream_index,
                             h.stream_count, h.connection_id));
    return;
  }
  group->streams[h.stream_index] = std::move(p.fd);
  ++group->arrived;
}

bool HandshakeListener::poll(Established* out) {
  int64_t now = monotonic_ns();
  accept_new(now);
  read_hellos(now);
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    if (g.arrived < static_cast<int>(g.streams.size())) {
      if (now > g.deadline_ns) {
        drop(g.peer, fmt::format("only {} of {} streams arrived", g.arrived, g.streams.size()));
        groups_.erase(groups_.begin() + static_cast<long>(i--));
      }
      continue;
    }
    if (g.ack_sent == 0) g.ack = Ack{kAckMagic, kProtocolVersion, int16_t(rail_), g.connection_id, 0};
    ssize_t n = ::send(g.streams[0].get(), reinterpret_cast<uint8_t*>(&g.ack) + g.ack_sent,
                       sizeof(Ack) - g.ack_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && !would_block(errno)) {
      drop(g.peer, fmt::format("sending the handshake answer: {}", std::strerror(errno)));
      groups_.erase(groups_.begin() + static_cast<long>(i--));
      continue;
    }
    if (n > 0) g.ack_sent += static_cast<size_t>(n);
    if (g.ack_sent < sizeof(Ack)) continue;

    out->sockets = std::move(g.streams);
    out->connection_id = g.connection_id;
    out->remote_rail = g.rail;
    out->peer = g.peer;
    groups_.erase(groups_.begin() + static_cast<long>(i));
    return true;
  }
  return false;
}

}  // namespace astral::plugin::oob
