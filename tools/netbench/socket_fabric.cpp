// netbench's baseline: plain TCP sockets, one per direction per peer (as the plugin has one send
// and one receive comm), TCP_NODELAY, default kernel buffers. A single transfer uses blocking
// send()/recv() loops, the fastest plain-socket code; concurrent ones share one poll() loop.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "netbench/fabric.hpp"

namespace astral::netbench {
namespace {

[[noreturn]] void fail_errno(const std::string& what) {
  throw std::runtime_error(fmt::format("netbench: sockets baseline: {}: {}", what,
                                       std::strerror(errno)));
}

void send_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_errno("send");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void recv_all(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      errno = ECONNRESET;
      fail_errno("peer closed");
    }
    if (n < 0) fail_errno("recv");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

class SocketFabric final : public Fabric {
 public:
  SocketFabric(const std::string& address, int rank, int ranks, BootstrapClient& bootstrap,
               double timeout_s)
      : send_(ranks, -1), recv_(ranks, -1), timeout_ms_(static_cast<int>(timeout_s * 1000)) {
    // One listening socket; peers connect to it and introduce themselves with their rank.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
    addrinfo* ai = nullptr;
    if (::getaddrinfo(address.c_str(), "0", &hints, &ai) != 0) fail_errno("address " + address);
    int listener = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || ::bind(listener, ai->ai_addr, ai->ai_addrlen) != 0 ||
        ::listen(listener, 1024) != 0) {
      ::freeaddrinfo(ai);
      fail_errno("listen on " + address);
    }
    ::freeaddrinfo(ai);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &len);
    std::string mine(reinterpret_cast<const char*>(&bound), len);
    std::vector<std::string> all = bootstrap.allgather(mine);
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      int fd = ::socket(bound.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(all[p].data()),
                              static_cast<socklen_t>(all[p].size())) != 0) {
        fail_errno(fmt::format("connect to rank {}", p));
      }
      tune(fd);
      uint32_t me = uint32_t(rank);
      send_all(fd, &me, sizeof me);
      send_[p] = fd;
    }
    for (int accepted = 0; accepted < ranks - 1; ++accepted) {
      pollfd w{listener, POLLIN, 0};
      if (::poll(&w, 1, timeout_ms_) <= 0) fail_errno("waiting for peers to connect");
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) fail_errno("accept");
      tune(fd);
      uint32_t peer = 0;
      recv_all(fd, &peer, sizeof peer);
      if (peer >= uint32_t(ranks) || recv_[peer] >= 0) {
        errno = EPROTO;
        fail_errno("unexpected peer");
      }
      recv_[peer] = fd;
    }
    ::close(listener);
  }

  ~SocketFabric() override {
    for (int fd : send_) {
      if (fd >= 0) ::close(fd);
    }
    for (int fd : recv_) {
      if (fd >= 0) ::close(fd);
    }
  }

  const char* name() const override { return "sockets"; }

  void exchange(const std::vector<Op>& ops) override {
    if (ops.size() == 1) {
      const Op& op = ops[0];
      op.send ? send_all(send_[op.peer], op.data, op.bytes)
              : recv_all(recv_[op.peer], op.data, op.bytes);
      return;
    }
    std::vector<size_t> moved(ops.size(), 0);
    std::vector<pollfd> fds(ops.size());
    size_t pending = 0;
    for (const Op& op : ops) pending += op.bytes > 0;
    while (pending > 0) {
      // A socket is a byte stream: of several ops on one socket and direction (a window of
      // messages to one peer), only the first unfinished one may move bytes, or their bytes mix.
      std::vector<int> busy;
      for (size_t i = 0; i < ops.size(); ++i) {
        const int fd = ops[i].send ? send_[ops[i].peer] : recv_[ops[i].peer];
        bool active = moved[i] < ops[i].bytes && std::find(busy.begin(), busy.end(), fd) == busy.end();
        if (active) busy.push_back(fd);
        fds[i] = {active ? fd : -1, static_cast<short>(ops[i].send ? POLLOUT : POLLIN), 0};
      }
      if (::poll(fds.data(), fds.size(), timeout_ms_) <= 0) fail_errno("poll");
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLOUT | POLLERR | POLLHUP))) continue;
        char* at = static_cast<char*>(ops[i].data) + moved[i];
        size_t left = ops[i].bytes - moved[i];
        ssize_t n = ops[i].send ? ::send(fds[i].fd, at, left, MSG_NOSIGNAL | MSG_DONTWAIT)
                                : ::recv(fds[i].fd, at, left, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) fail_errno(ops[i].send ? "send" : "recv");
        moved[i] += static_cast<size_t>(n);
        pending -= moved[i] == ops[i].bytes;
      }
    }
  }

  void stream(int peer, bool send, void* data, size_t bytes, int count, int) override {
    for (int i = 0; i < count; ++i) {
      send ? send_all(send_[peer], data, bytes) : recv_all(recv_[peer], data, bytes);
    }
  }

 private:
  void tune(int fd) const {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A dead peer must not block the baseline forever either.
    timeval tv{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  std::vector<int> send_, recv_;
  int timeout_ms_;
};

}  // namespace

std::unique_ptr<Fabric> make_socket_fabric(const std::string& address, int rank, int ranks,
                                           BootstrapClient& bootstrap, double timeout_s) {
  return std::make_unique<SocketFabric>(address, rank, ranks, bootstrap, timeout_s);
}

}  // namespace astral::netbench
