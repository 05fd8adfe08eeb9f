#pragma once
// Small RAII and option helpers over BSD sockets, shared by the TCP transport and the IB
// transport's out-of-band channel. Every socket is non-blocking and close-on-exec; sends never
// raise SIGPIPE.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

namespace astral::plugin::oob {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Listening socket on `address` (port 0 = ephemeral); the bound address is written back.
// Returns an invalid Fd and sets `why` on failure.
Fd listen_on(sockaddr_storage* address, socklen_t length, std::string* why);

// Starts a non-blocking connect to `remote`, bound to `local` when both are loopback or both are
// not (so traffic leaves through the chosen device). `in_progress` is set when not yet done.
Fd start_connect(const sockaddr_storage& remote, const sockaddr_storage& local,
                 bool* in_progress, std::string* why);

// 1 connected, 0 still connecting, -1 failed (`why` set).
int connect_status(int fd, std::string* why);

// Data-stream options: no Nagle, keepalive and a user timeout so a vanished peer turns into an
// error within about `timeout_ms`, and the traffic class as IP TOS when set (>= 0).
void configure_stream(int fd, int timeout_ms, int traffic_class);

sockaddr_storage local_address(int fd);
sockaddr_storage peer_address(int fd);

// Moves what is left of `size` bytes without blocking, `*done` counting what moved so far.
// 1: all moved; 0: try again later; -1: failed or closed by the peer (`why` set).
int send_some(int fd, const void* data, size_t size, size_t* done, std::string* why);
int recv_some(int fd, void* data, size_t size, size_t* done, std::string* why);

// CLOCK_MONOTONIC in nanoseconds (deadlines, timestamps).
int64_t monotonic_ns();

// errno values that mean "try again later" on a non-blocking socket.
inline bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace astral::plugin::oob
