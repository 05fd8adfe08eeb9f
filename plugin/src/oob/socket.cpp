#include "oob/socket.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fmt/format.h>

namespace astral::plugin::oob {
namespace {

bool is_loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
  }
  return false;
}

socklen_t length_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace

Fd listen_on(sockaddr_storage* address, socklen_t length, std::string* why) {
  Fd fd(::socket(address->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    *why = fmt::format("socket: {}", std::strerror(errno));
    return {};
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(address), length) != 0) {
    *why = fmt::format("bind: {}", std::strerror(errno));
    return {};
  }
  if (::listen(fd.get(), 256) != 0) {
    *why = fmt::format("listen: {}", std::strerror(errno));
    return {};
  }
  *address = local_address(fd.get());
  return fd;
}

Fd start_connect(const sockaddr_storage& remote, const sockaddr_storage& local, bool* in_progress,
                 std::string* why) {
  Fd fd(::socket(remote.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    *why = fmt::format("socket: {}", std::strerror(errno));
    return {};
  }
  // TCP_NODELAY before the first byte: the hello must not wait for Nagle.
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (local.ss_family == remote.ss_family && is_loopback(local) == is_loopback(remote)) {
    sockaddr_storage source = local;
    if (source.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(source).sin_port = 0;
    if (source.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(source).sin6_port = 0;
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&source), length_of(source)) != 0) {
      *why = fmt::format("bind to {}: {}", "local device address", std::strerror(errno));
      return {};
    }
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&remote), length_of(remote)) == 0) {
    *in_progress = false;
  } else if (errno == EINPROGRESS || errno == EINTR) {
    *in_progress = true;
  } else {
    *why = fmt::format("connect: {}", std::strerror(errno));
    return {};
  }
  return fd;
}

int connect_status(int fd, std::string* why) {
  pollfd p{fd, POLLOUT, 0};
  int ready = ::poll(&p, 1, 0);
  if (ready == 0) return 0;
  if (ready < 0) return errno == EINTR ? 0 : (*why = std::strerror(errno), -1);
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    *why = fmt::format("connect: {}", std::strerror(err));
    return -1;
  }
  return 1;
}

void configure_stream(int fd, int timeout_ms, int traffic_class) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  // Idle connections: probe after half the timeout, three probes spread over the other half.
  int idle_s = std::max(1, timeout_ms / 2000);
  int interval_s = std::max(1, timeout_ms / 6000);
  int count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  // Unacknowledged data older than the timeout fails the connection (a vanished host).
  unsigned user_timeout = static_cast<unsigned>(timeout_ms);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  if (traffic_class >= 0) {
    int tos = traffic_class & 0xff;
    sockaddr_storage local = local_address(fd);
    if (local.ss_family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    } else {
      ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    }
  }
}

sockaddr_storage local_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return address;
}

sockaddr_storage peer_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return address;
}

int send_some(int fd, const void* data, size_t size, size_t* done, std::string* why) {
  while (*done < size) {
    ssize_t n = ::send(fd, static_cast<const char*>(data) + *done, size - *done,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (would_block(errno)) return 0;
      *why = fmt::format("send: {}", std::strerror(errno));
      return -1;
    }
    *done += static_cast<size_t>(n);
  }
  return 1;
}

int recv_some(int fd, void* data, size_t size, size_t* done, std::string* why) {
  while (*done < size) {
    ssize_t n = ::recv(fd, static_cast<char*>(data) + *done, size - *done, MSG_DONTWAIT);
    if (n == 0) {
      *why = fmt::format("the peer closed the connection after {} of {} bytes", *done, size);
      return -1;
    }
    if (n < 0) {
      if (would_block(errno)) return 0;
      *why = fmt::format("recv: {}", std::strerror(errno));
      return -1;
    }
    *done += static_cast<size_t>(n);
  }
  return 1;
}

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace astral::plugin::oob
