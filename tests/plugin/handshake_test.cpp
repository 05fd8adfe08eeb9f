// The listen port is reachable by anyone on the network: strays, scanners and hostile peers must
// be dropped with one WARN each, without crashing, without disturbing other connections, and
// without stopping the listener from accepting the real peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "harness.hpp"
#include "pattern.hpp"
#include "tcp/wire.hpp"

using namespace astral::test;
namespace wire = astral::plugin::tcp;

namespace {

wire::ListenHandle decode(const char* handle) {
  wire::ListenHandle h;
  std::memcpy(&h, handle, sizeof h);
  return h;
}

// A raw TCP connection to the listener in `handle`.
int raw_connect(const char* handle) {
  wire::ListenHandle h = decode(handle);
  REQUIRE(h.family == AF_INET);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  std::memcpy(&addr.sin_addr, h.address, 4);
  addr.sin_port = htons(h.port);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// True once the listener has closed `fd` (EOF or reset), polling accept() meanwhile.
bool closed_by_listener(const ncclNet_v11_t& net, void* listen_comm, int fd, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    void* comm = nullptr;
    REQUIRE(net.accept(listen_comm, &comm, nullptr) == ncclSuccess);
    REQUIRE(comm == nullptr);
    pollfd p{fd, POLLIN, 10};
    if (poll(&p, 1, 10) > 0) {
      char byte;
      if (recv(fd, &byte, 1, MSG_DONTWAIT) <= 0) return true;
    }
  }
  return false;
}

wire::Hello valid_hello(const wire::ListenHandle& h) {
  wire::Hello hello{};
  hello.magic = wire::kHelloMagic;
  hello.version = wire::kProtocolVersion;
  hello.secret = h.secret;
  hello.connection_id = 99;
  hello.stream_count = 1;
  hello.rail = -1;
  return hello;
}

}  // namespace

TEST_CASE("garbage on the listen port is dropped and the real peer still connects",
          "[plugin][handshake]") {
  ScopedEnv timeout("ASTRAL_TCP_TIMEOUT_MS", "1500");
  PluginContext p;
  LogCapture::clear();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
  wire::ListenHandle h = decode(handle);

  // 1. random bytes
  int random_fd = raw_connect(handle);
  std::mt19937 rng(7);
  char noise[300];
  for (char& c : noise) c = static_cast<char>(rng());
  REQUIRE(send(random_fd, noise, sizeof noise, 0) == ssize_t(sizeof noise));
  // 2. an HTTP request (a scanner)
  int http_fd = raw_connect(handle);
  const char* get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(send(http_fd, get, std::strlen(get), 0) > 0);
  // 3. a well-formed hello with the wrong secret
  int secret_fd = raw_connect(handle);
  wire::Hello wrong = valid_hello(h);
  wrong.secret[0] ^= 1;
  REQUIRE(send(secret_fd, &wrong, sizeof wrong, 0) == ssize_t(sizeof wrong));
  // 4. the right secret but an impossible stream index
  int index_fd = raw_connect(handle);
  wire::Hello bad_index = valid_hello(h);
  bad_index.stream_index = 5;
  bad_index.stream_count = 2;
  REQUIRE(send(index_fd, &bad_index, sizeof bad_index, 0) == ssize_t(sizeof bad_index));
  // 5. half a hello, then hang up
  int half_fd = raw_connect(handle);
  wire::Hello half = valid_hello(h);
  REQUIRE(send(half_fd, &half, 20, 0) == 20);
  close(half_fd);
  // 6. connects and says nothing
  int silent_fd = raw_connect(handle);

  CHECK(closed_by_listener(p.net, listen_comm, random_fd, 5));
  CHECK(closed_by_listener(p.net, listen_comm, http_fd, 5));
  CHECK(closed_by_listener(p.net, listen_comm, secret_fd, 5));
  CHECK(closed_by_listener(p.net, listen_comm, index_fd, 5));

  // The real peer connects while the silent stray is still pending.
  void *send_comm = nullptr, *recv_comm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!send_comm || !recv_comm) {
    if (!send_comm) REQUIRE(p.net.connect(p.ctx, 0, handle, &send_comm, nullptr) == ncclSuccess);
    if (!recv_comm) REQUIRE(p.net.accept(listen_comm, &recv_comm, nullptr) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  exchange_one_message(p.net, {send_comm, recv_comm});

  // The silent one is dropped once the handshake time is up.
  CHECK(closed_by_listener(p.net, listen_comm, silent_fd, 10));
  CHECK(LogCapture::count(NCCL_LOG_WARN, "not an Astral connection") == 2);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "wrong listen secret") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "out of range") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "closed after 20 of 64 handshake bytes") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "no handshake within") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "dropped connection") == 6);
  for (int fd : {random_fd, http_fd, secret_fd, index_fd, silent_fd}) close(fd);
  p.net.closeListen(listen_comm);
  p.net.closeSend(send_comm);
  p.net.closeRecv(recv_comm);
}

TEST_CASE("closeListen on a listen comm that was never accepted", "[plugin][handshake]") {
  PluginContext p;
  SECTION("nobody connected") {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen_comm = nullptr;
    REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
    REQUIRE(listen_comm);
    CHECK(p.net.closeListen(listen_comm) == ncclSuccess);
  }
  SECTION("a peer is mid-handshake: it gets an error, not a hang") {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen_comm = nullptr;
    REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
    void* send_comm = nullptr;
    for (int i = 0; i < 50 && !send_comm; ++i) {
      REQUIRE(p.net.connect(p.ctx, 0, handle, &send_comm, nullptr) == ncclSuccess);
    }
    REQUIRE(send_comm == nullptr);  // no accept yet: no ack
    CHECK(p.net.closeListen(listen_comm) == ncclSuccess);
    ncclResult_t res = ncclSuccess;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (res == ncclSuccess && !send_comm && Clock::now() < deadline) {
      res = p.net.connect(p.ctx, 0, handle, &send_comm, nullptr);
    }
    CHECK(res == ncclRemoteError);
    CHECK(send_comm == nullptr);
  }
}

TEST_CASE("connect rejects a handle that is not ours", "[plugin][handshake]") {
  PluginContext p;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  std::memset(handle, 0x5a, sizeof handle);
  void* send_comm = nullptr;
  CHECK(p.net.connect(p.ctx, 0, handle, &send_comm, nullptr) == ncclInternalError);
  CHECK(send_comm == nullptr);
  std::memset(handle, 0, sizeof handle);
  CHECK(p.net.connect(p.ctx, 0, handle, &send_comm, nullptr) == ncclInternalError);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "not an Astral listen handle") >= 2);
}

TEST_CASE("a connector with the wrong secret is refused", "[plugin][handshake]") {
  PluginContext p;
  LogCapture::clear();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
  char forged[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(forged, handle, sizeof forged);
  reinterpret_cast<wire::ListenHandle*>(forged)->secret[31] ^= 0x80;
  void *send_comm = nullptr, *recv_comm = nullptr;
  ncclResult_t res = ncclSuccess;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && Clock::now() < deadline) {
    res = p.net.connect(p.ctx, 0, forged, &send_comm, nullptr);
    REQUIRE(p.net.accept(listen_comm, &recv_comm, nullptr) == ncclSuccess);
    REQUIRE(recv_comm == nullptr);
  }
  CHECK(res == ncclRemoteError);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "wrong listen secret") == 1);
  p.net.closeListen(listen_comm);
}
