// The other process of the two-process conformance tests. It loads the plugin with dlopen, like
// NCCL, and plays one side of a connection:
//   plugin_peer recv [--hold] SIZE...  listen, print "handle <hex>", accept, receive and verify
//   plugin_peer send [--hold] SIZE...  read "handle <hex>" from stdin, connect, send
// Message i carries pattern seed i; up to 8 requests are in flight. With --hold the peer posts
// its first request, prints "posted" and then stops polling (the test kills or stops it).
// Exit 0 and "ok N" when every message arrived intact; otherwise "error ..." and exit 1.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <string>
#include <vector>

#include "harness.hpp"
#include "pattern.hpp"

namespace {
using namespace astral::test;

constexpr int kWindow = 8;

size_t parse_size(const std::string& text) {
  size_t value = std::stoull(text);
  char unit = text.back();
  if (unit == 'K') value <<= 10;
  if (unit == 'M') value <<= 20;
  return value;
}

int fail(const std::string& what) {
  std::printf("error %s\n%s", what.c_str(), LogCapture::dump().c_str());
  std::fflush(stdout);
  return 1;
}

void hold_forever() {
  std::printf("posted\n");
  std::fflush(stdout);
  for (;;) pause();
}

int run_recv(const ncclNet_v11_t& net, void* ctx, const std::vector<size_t>& sizes, bool hold) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  if (net.listen(ctx, 0, handle, &listen_comm) != ncclSuccess) return fail("listen");
  std::printf("handle %s\n", to_hex(handle, sizeof handle).c_str());
  std::fflush(stdout);
  void* recv_comm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!recv_comm) {
    if (net.accept(listen_comm, &recv_comm, nullptr) != ncclSuccess) return fail("accept");
    if (Clock::now() > deadline) return fail("accept timed out");
  }
  net.closeListen(listen_comm);
  struct Posted {
    size_t index;
    std::vector<uint8_t> buffer;
    void* request;
  };
  std::deque<Posted> posted;
  size_t next = 0, verified = 0;
  while (verified < sizes.size()) {
    while (next < sizes.size() && posted.size() < kWindow) {
      Posted p{next, std::vector<uint8_t>(sizes[next]), nullptr};
      void* data = p.buffer.data();
      size_t size = sizes[next];
      int tag = 7;
      if (net.irecv(recv_comm, 1, &data, &size, &tag, nullptr, nullptr, &p.request) != ncclSuccess) {
        return fail("irecv");
      }
      if (!p.request) break;
      posted.push_back(std::move(p));
      ++next;
      if (hold) hold_forever();
    }
    int done = 0, received = -1;
    if (net.test(posted.front().request, &done, &received) != ncclSuccess) return fail("test");
    if (!done) continue;
    Posted& p = posted.front();
    if (static_cast<size_t>(received) != p.buffer.size()) return fail("wrong received size");
    if (check_pattern(p.buffer.data(), p.buffer.size(), p.index) != SIZE_MAX) {
      return fail("corrupt message " + std::to_string(p.index));
    }
    posted.pop_front();
    ++verified;
  }
  net.closeRecv(recv_comm);
  std::printf("ok %zu\n", verified);
  return 0;
}

int run_send(const ncclNet_v11_t& net, void* ctx, const std::vector<size_t>& sizes, bool hold) {
  std::string word, hex;
  std::cin >> word >> hex;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  if (word != "handle" || !from_hex(hex, handle, sizeof handle)) return fail("no handle on stdin");
  void* send_comm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!send_comm) {
    if (net.connect(ctx, 0, handle, &send_comm, nullptr) != ncclSuccess) return fail("connect");
    if (Clock::now() > deadline) return fail("connect timed out");
  }
  std::vector<std::vector<uint8_t>> buffers(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    buffers[i].resize(sizes[i]);
    fill_pattern(buffers[i].data(), sizes[i], i);
  }
  std::deque<void*> posted;
  size_t next = 0, completed = 0;
  while (completed < sizes.size()) {
    while (next < sizes.size() && posted.size() < kWindow) {
      void* request = nullptr;
      if (net.isend(send_comm, buffers[next].data(), sizes[next], 7, nullptr, nullptr, &request) !=
          ncclSuccess) {
        return fail("isend");
      }
      if (!request) break;
      posted.push_back(request);
      ++next;
      if (hold) {
        for (int i = 0; i < 100; ++i) {
          int done = 0;
          net.test(request, &done, nullptr);
        }
        hold_forever();
      }
    }
    int done = 0;
    if (net.test(posted.front(), &done, nullptr) != ncclSuccess) return fail("test");
    if (done) {
      posted.pop_front();
      ++completed;
    }
  }
  net.closeSend(send_comm);
  std::printf("ok %zu\n", completed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  alarm(120);  // never outlive a broken test
  if (argc < 3) {
    std::fprintf(stderr, "usage: plugin_peer recv|send [--hold] SIZE...\n");
    return 2;
  }
  std::string role = argv[1];
  bool hold = false;
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--hold") == 0) {
      hold = true;
    } else {
      sizes.push_back(parse_size(argv[i]));
    }
  }
  try {
    LoadedPlugin plugin;
    void* ctx = plugin.init(0xbeef);
    int rc = role == "recv" ? run_recv(plugin.net(), ctx, sizes, hold)
                            : run_send(plugin.net(), ctx, sizes, hold);
    plugin.net().finalize(ctx);
    return rc;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
