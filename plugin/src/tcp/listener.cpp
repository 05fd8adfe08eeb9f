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
namespace {
// Half-open connections kept at once; beyond this the oldest is dropped (a flood must not grow
// memory or starve the real peer).
constexpr size_t kMaxPending = 64;
// WARNs per listen comm before further strays are logged at INFO.
constexpr int kMaxDropWarnings = 8;
// A legitimate peer's Hello is already in the socket buffer when we accept; strays get this long.
constexpr int kHandshakeTimeoutMs = 10000;
}  // namespace

TcpListenComm::TcpListenComm(std::shared_ptr<NetContext> ctx, Fd fd, const Secret& secret,
                             const TcpDevice& device, int device_index, const Config& config)
    : ctx_(std::move(ctx)),
      fd_(std::move(fd)),
      secret_(secret),
      device_(device),
      device_index_(device_index),
      timeout_ms_(config.timeout_ms),
      stripe_min_(config.stripe_min) {}

void TcpListenComm::drop(const std::string& peer, const std::string& why) {
  ++dropped_;
  auto level = dropped_ <= kMaxDropWarnings ? NCCL_LOG_WARN : NCCL_LOG_INFO;
  ASTRAL_LOG(level, "dropped connection from {} on {} ({}): {}{}", peer, device_.name,
             format_address(local_address(fd_.get())), why,
             dropped_ == kMaxDropWarnings ? "; further drops on this listener are logged at INFO"
                                          : "");
}

void TcpListenComm::accept_new(int64_t now) {
  for (;;) {
    int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (!would_block(errno) && errno != ECONNABORTED) {
        ASTRAL_WARN("accept on {} failed: {}", device_.name, std::strerror(errno));
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

void TcpListenComm::read_hellos(int64_t now) {
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
          check_hello(p.hello, secret_, &why);
        }
      } else if (check_hello(p.hello, secret_, &why)) {
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
void TcpListenComm::admit(Pending& p) {
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

ncclResult_t TcpListenComm::accept(std::unique_ptr<RecvComm>* recv_comm) {
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
    if (g.ack_sent == 0) g.ack = Ack{kAckMagic, kProtocolVersion, int16_t(device_.rail),
                                     g.connection_id, 0};
    ssize_t n = ::send(g.streams[0].get(), reinterpret_cast<uint8_t*>(&g.ack) + g.ack_sent,
                       sizeof(Ack) - g.ack_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && !would_block(errno)) {
      drop(g.peer, fmt::format("sending the handshake answer: {}", std::strerror(errno)));
      groups_.erase(groups_.begin() + static_cast<long>(i--));
      continue;
    }
    if (n > 0) g.ack_sent += static_cast<size_t>(n);
    if (g.ack_sent < sizeof(Ack)) continue;

    for (auto& s : g.streams) configure_stream(s.get(), timeout_ms_, ctx_->traffic_class);
    auto setup = describe_connection(false, device_, device_index_, g.rail, g.connection_id,
                                     g.peer, timeout_ms_, stripe_min_);
    *recv_comm = std::make_unique<TcpRecvComm>(ctx_, std::move(g.streams), setup);
    groups_.erase(groups_.begin() + static_cast<long>(i));
    return ncclSuccess;
  }
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
