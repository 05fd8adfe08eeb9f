#include "netbench/bootstrap.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>

namespace astral::netbench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMaxBlob = 64 << 20;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// Waits until `fd` is ready for `events` or the deadline passes.
void wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) fail(fmt::format("netbench: timed out {}", what));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) fail(fmt::format("netbench: poll: {}", std::strerror(errno)));
  }
}

void write_all(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    wait_ready(fd, POLLOUT, deadline, "sending to the coordinator");
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) fail(fmt::format("netbench: bootstrap send: {}", std::strerror(errno)));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// False at a clean end of stream before the first byte.
bool read_all(int fd, void* data, size_t size, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    wait_ready(fd, POLLIN, deadline, "waiting for another rank (is every rank running?)");
    ssize_t n = ::recv(fd, p + got, size - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == 0 && got == 0) return false;
    if (n <= 0) fail("netbench: a rank closed its bootstrap connection mid-message");
    got += static_cast<size_t>(n);
  }
  return true;
}

void write_blob(int fd, const std::string& blob, Clock::time_point deadline) {
  uint32_t size = static_cast<uint32_t>(blob.size());
  write_all(fd, &size, sizeof size, deadline);
  write_all(fd, blob.data(), blob.size(), deadline);
}

bool read_blob(int fd, std::string* blob, Clock::time_point deadline) {
  uint32_t size = 0;
  if (!read_all(fd, &size, sizeof size, deadline)) return false;
  if (size > kMaxBlob) fail("netbench: oversized bootstrap message (not a netbench peer?)");
  blob->resize(size);
  if (size > 0 && !read_all(fd, blob->data(), size, deadline)) {
    fail("netbench: bootstrap connection closed mid-message");
  }
  return true;
}

bool tokens_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

bool split_host_port(const std::string& text, std::string* host, int* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = text.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    size_t used = 0;
    *port = std::stoi(text.substr(colon + 1), &used);
    return used == text.size() - colon - 1 && *port > 0 && *port < 65536;
  } catch (const std::exception&) {
    return false;
  }
}

std::string random_token() {
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof bytes, 0) != sizeof bytes) fail("netbench: getrandom failed");
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

Coordinator::Coordinator(const std::string& host, int port, int ranks, std::string token)
    : ranks_(ranks), token_(std::move(token)) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    fail(fmt::format("netbench: cannot resolve coordinator address '{}': {}", host,
                     gai_strerror(rc)));
  }
  for (addrinfo* ai = found; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      listen_fd_ = fd;
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = ntohs(bound.ss_family == AF_INET6
                        ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                        : reinterpret_cast<sockaddr_in&>(bound).sin_port);
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    fail(fmt::format("netbench: cannot listen on {}:{} for the coordinator: {}", host, port,
                     std::strerror(errno)));
  }
}

Coordinator::~Coordinator() {
  for (int fd : clients_) {
    if (fd >= 0) ::close(fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void Coordinator::serve(double timeout_s) {
  clients_.assign(static_cast<size_t>(ranks_), -1);
  int registered = 0;
  auto deadline = deadline_after(timeout_s);
  while (registered < ranks_) {
    wait_ready(listen_fd_, POLLIN, deadline, "waiting for ranks to register");
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::string hello;
    uint32_t ids[2] = {0, 0};
    try {
      auto short_deadline = deadline_after(std::min(timeout_s, 10.0));
      if (!read_blob(fd, &hello, short_deadline) ||
          !read_all(fd, ids, sizeof ids, short_deadline)) {
        ::close(fd);
        continue;
      }
    } catch (const std::exception&) {
      ::close(fd);  // a stray: ignore it, keep waiting for the ranks
      continue;
    }
    if (!tokens_equal(hello, token_) || ids[1] != uint32_t(ranks_) || ids[0] >= uint32_t(ranks_) ||
        clients_[ids[0]] >= 0) {
      ::close(fd);  // wrong token, wrong job or a duplicate rank
      continue;
    }
    clients_[ids[0]] = fd;
    ++registered;
  }
  for (int fd : clients_) write_blob(fd, "ok", deadline);
  for (;;) {
    std::vector<std::string> round(static_cast<size_t>(ranks_));
    int ended = 0;
    for (int r = 0; r < ranks_; ++r) {
      if (!read_blob(clients_[r], &round[r], deadline_after(timeout_s))) ++ended;
    }
    if (ended == ranks_) return;
    if (ended > 0) fail(fmt::format("netbench: {} rank(s) left early (see their errors)", ended));
    std::string all;
    for (const auto& blob : round) {
      uint32_t size = static_cast<uint32_t>(blob.size());
      all.append(reinterpret_cast<const char*>(&size), sizeof size);
      all += blob;
    }
    for (int fd : clients_) write_blob(fd, all, deadline_after(timeout_s));
    last_round_ = std::move(round);
  }
}

BootstrapClient::BootstrapClient(const std::string& host, int port, int rank, int ranks,
                                 const std::string& token, double timeout_s)
    : ranks_(ranks), timeout_s_(timeout_s) {
  auto deadline = deadline_after(timeout_s);
  std::string service = std::to_string(port);
  // The coordinator may not be up yet on a multi-host start: retry until the deadline.
  while (fd_ < 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
      fail(fmt::format("netbench: cannot resolve coordinator '{}': {}", host, gai_strerror(rc)));
    }
    for (addrinfo* ai = found; ai && fd_ < 0; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
      } else if (fd >= 0) {
        ::close(fd);
      }
    }
    ::freeaddrinfo(found);
    if (fd_ < 0) {
      if (Clock::now() > deadline) {
        fail(fmt::format("netbench: rank {} cannot reach the coordinator at {}:{}", rank, host,
                         port));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  write_blob(fd_, token, deadline);
  uint32_t ids[2] = {uint32_t(rank), uint32_t(ranks)};
  write_all(fd_, ids, sizeof ids, deadline);
  std::string ok;
  if (!read_blob(fd_, &ok, deadline) || ok != "ok") {
    fail(fmt::format("netbench: the coordinator refused rank {} (same ASTRAL_NETBENCH_TOKEN and "
                     "--ranks on every host?)",
                     rank));
  }
}

BootstrapClient::~BootstrapClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> BootstrapClient::allgather(const std::string& mine) {
  auto deadline = deadline_after(timeout_s_);
  write_blob(fd_, mine, deadline);
  std::string all;
  if (!read_blob(fd_, &all, deadline)) fail("netbench: the coordinator went away");
  std::vector<std::string> blobs;
  size_t at = 0;
  while (at + sizeof(uint32_t) <= all.size()) {
    uint32_t size;
    std::memcpy(&size, all.data() + at, sizeof size);
    at += sizeof size;
    if (at + size > all.size()) break;
    blobs.push_back(all.substr(at, size));
    at += size;
  }
  if (blobs.size() != static_cast<size_t>(ranks_)) fail("netbench: malformed allgather answer");
  return blobs;
}

}  // namespace astral::netbench
