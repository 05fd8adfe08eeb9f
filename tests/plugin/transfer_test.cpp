// Data path conformance, driven through the dlopen'ed library as NCCL's proxy drives it: one
// thread interleaving everything, or a sender and a receiver thread; many requests in flight;
// sizes from 0 bytes up; grouped receives; every byte verified.
#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "pattern.hpp"
#include "softhca_env.hpp"

using namespace astral::test;

namespace {

struct Transfer {
  std::vector<uint8_t> buffer;
  void* request = nullptr;
};

// Sends `sizes` from one thread and receives them on another, `window` requests in flight on
// each side; receive buffers are `slack` bytes larger than the message.
void stream_messages(const ncclNet_v11_t& net, CommPair pair, const std::vector<size_t>& sizes,
                     size_t window, size_t slack = 0) {
  std::string sender_error;  // Catch2 assertions are for the main thread only
  std::thread sender([&] {
    std::deque<Transfer> inflight;
    size_t next = 0;
    while (next < sizes.size() || !inflight.empty()) {
      while (next < sizes.size() && inflight.size() < window) {
        Transfer t{std::vector<uint8_t>(sizes[next]), nullptr};
        fill_pattern(t.buffer.data(), t.buffer.size(), next);
        if (net.isend(pair.send, t.buffer.data(), t.buffer.size(), 5, nullptr, nullptr,
                      &t.request) != ncclSuccess) {
          sender_error = "isend failed";
          return;
        }
        if (!t.request) break;
        inflight.push_back(std::move(t));
        ++next;
      }
      int done = 0, size = -1;
      if (net.test(inflight.front().request, &done, &size) != ncclSuccess) {
        sender_error = "send test failed";
        return;
      }
      if (done) {
        if (size != int(inflight.front().buffer.size())) sender_error = "wrong size sent";
        inflight.pop_front();
      }
    }
  });
  std::deque<Transfer> inflight;
  size_t next = 0, received = 0, peak = 0;
  while (received < sizes.size()) {
    while (next < sizes.size() && inflight.size() < window) {
      Transfer t{std::vector<uint8_t>(sizes[next] + slack), nullptr};
      void* data = t.buffer.data();
      size_t size = t.buffer.size();
      int tag = 5;
      REQUIRE(net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &t.request) ==
              ncclSuccess);
      if (!t.request) break;
      inflight.push_back(std::move(t));
      ++next;
    }
    peak = std::max(peak, inflight.size());
    int done = 0, size = -1;
    REQUIRE(net.test(inflight.front().request, &done, &size) == ncclSuccess);
    if (!done) continue;
    INFO("message " << received << " of " << sizes[received] << " bytes");
    REQUIRE(size == int(sizes[received]));
    REQUIRE(check_pattern(inflight.front().buffer.data(), sizes[received], received) == SIZE_MAX);
    inflight.pop_front();
    ++received;
  }
  sender.join();
  CHECK(sender_error.empty());
  CHECK(peak == std::min(window, sizes.size()));
}

// Completes `target` while also testing `others`, as NCCL's progress thread tests everything it
// has posted (a send only moves when its comm is driven).
ncclResult_t complete(const ncclNet_v11_t& net, void* target, int* sizes,
                      std::vector<void*>& others) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    int done = 0;
    ncclResult_t res = net.test(target, &done, sizes);
    if (res != ncclSuccess || done) return res;
    for (void*& other : others) {
      if (!other) continue;
      int other_done = 0;
      if (net.test(other, &other_done, nullptr) != ncclSuccess) return ncclSystemError;
      if (other_done) other = nullptr;
    }
    if (Clock::now() > deadline) throw std::runtime_error("request still pending at deadline");
  }
}

}  // namespace

TEST_CASE("one thread interleaves connect, accept, sends and receives", "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  std::vector<size_t> sizes = {0, 1, 7, 8, 15, 16, 17, 4095, 4096, 4097, 65536, 1 << 20, 4 << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> out(sizes[i]), in(sizes[i] + 100, 0xEE);
    fill_pattern(out.data(), out.size(), i);
    void* data = in.data();
    size_t capacity = in.size();  // the posted receive may be larger than the send
    int tag = 1;
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(p.net.irecv(pair.recv, 1, &data, &capacity, &tag, nullptr, nullptr, &rreq) ==
            ncclSuccess);
    REQUIRE(p.net.isend(pair.send, out.data(), out.size(), 1, nullptr, nullptr, &sreq) ==
            ncclSuccess);
    REQUIRE(rreq);
    REQUIRE(sreq);
    int rdone = 0, sdone = 0, rsize = -1, ssize = -1;
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!rdone || !sdone) {
      if (!sdone) REQUIRE(p.net.test(sreq, &sdone, &ssize) == ncclSuccess);
      if (!rdone) REQUIRE(p.net.test(rreq, &rdone, &rsize) == ncclSuccess);
      REQUIRE(Clock::now() < deadline);
    }
    CHECK(ssize == int(sizes[i]));
    CHECK(rsize == int(sizes[i]));
    CHECK(check_pattern(in.data(), sizes[i], i) == SIZE_MAX);
    CHECK(in[sizes[i]] == 0xEE);  // nothing written past the message
  }
  close_pair(p.net, pair);
}

TEST_CASE("a sender and a receiver thread keep 16 requests in flight, 0 B to 64 MiB",
          "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  std::vector<size_t> sizes;
  for (size_t s : {size_t(0), size_t(1), size_t(8), size_t(1000), size_t(4096), size_t(65537),
                   size_t(1) << 20, size_t(4) << 20}) {
    for (int repeat = 0; repeat < 4; ++repeat) sizes.push_back(s);
  }
  sizes.push_back(size_t(64) << 20);
  for (int i = 0; i < 200; ++i) sizes.push_back(size_t(i % 5) * 8);  // small-message burst
  stream_messages(p.net, pair, sizes, 16, 64);
  close_pair(p.net, pair);
}

TEST_CASE("32 requests in flight per comm", "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  constexpr int kInFlight = NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<uint8_t>> out(kInFlight), in(kInFlight);
  std::vector<void*> sreq(kInFlight), rreq(kInFlight);
  for (int i = 0; i < kInFlight; ++i) {
    out[i].resize(size_t(i) * 1000);
    in[i].resize(out[i].size());
    fill_pattern(out[i].data(), out[i].size(), i);
    void* data = in[i].data();
    size_t size = in[i].size();
    int tag = 0;
    REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq[i]) ==
            ncclSuccess);
    REQUIRE(rreq[i]);
  }
  for (int i = 0; i < kInFlight; ++i) {
    REQUIRE(p.net.isend(pair.send, out[i].data(), out[i].size(), 0, nullptr, nullptr, &sreq[i]) ==
            ncclSuccess);
    REQUIRE(sreq[i]);
  }
  // Complete them in reverse order: test() on any request makes progress for the whole comm.
  for (int i = kInFlight - 1; i >= 0; --i) {
    int size = -1;
    REQUIRE(complete(p.net, rreq[i], &size, sreq) == ncclSuccess);
    CHECK(size == int(out[i].size()));
    CHECK(check_pattern(in[i].data(), in[i].size(), i) == SIZE_MAX);
  }
  std::vector<void*> none;
  for (void* r : sreq) {
    if (r) REQUIRE(complete(p.net, r, nullptr, none) == ncclSuccess);
  }
  close_pair(p.net, pair);
}

TEST_CASE("grouped receives: the tag picks the slot, sizes are reported per slot",
          "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  constexpr int kSlots = 8;
  constexpr int kGroups = 3;
  // Group g, tag t: (t * 3000 + g) bytes, seed g * 100 + t; tag 0 of each group is empty.
  auto size_of = [](int g, int t) { return t == 0 ? size_t(0) : size_t(t) * 3000 + g; };
  std::vector<std::vector<uint8_t>> in(kGroups * kSlots), out(kGroups * kSlots);
  std::vector<void*> rreq(kGroups);
  for (int g = 0; g < kGroups; ++g) {
    void* data[kSlots];
    size_t sizes[kSlots];
    int tags[kSlots];
    for (int t = 0; t < kSlots; ++t) {
      in[g * kSlots + t].assign(40000, 0);
      data[t] = in[g * kSlots + t].data();
      sizes[t] = in[g * kSlots + t].size();
      tags[t] = 10 + t;  // NCCL passes the sender ranks
    }
    REQUIRE(p.net.irecv(pair.recv, kSlots, data, sizes, tags, nullptr, nullptr, &rreq[g]) ==
            ncclSuccess);
    REQUIRE(rreq[g]);
  }
  std::mt19937 rng(42);
  std::vector<void*> sreq;
  for (int g = 0; g < kGroups; ++g) {
    std::vector<int> order(kSlots);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // senders finish in any order
    for (int t : order) {
      auto& buf = out[g * kSlots + t];
      buf.resize(size_of(g, t));
      fill_pattern(buf.data(), buf.size(), g * 100 + t);
      void* r = nullptr;
      REQUIRE(p.net.isend(pair.send, buf.data(), buf.size(), 10 + t, nullptr, nullptr, &r) ==
              ncclSuccess);
      REQUIRE(r);
      sreq.push_back(r);
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    int sizes[kSlots];
    std::fill(sizes, sizes + kSlots, -1);
    REQUIRE(complete(p.net, rreq[g], sizes, sreq) == ncclSuccess);
    for (int t = 0; t < kSlots; ++t) {
      INFO("group " << g << " slot " << t);
      CHECK(sizes[t] == int(size_of(g, t)));
      CHECK(check_pattern(in[g * kSlots + t].data(), size_of(g, t), g * 100 + t) == SIZE_MAX);
    }
  }
  std::vector<void*> none;
  for (void* r : sreq) {
    if (r) REQUIRE(complete(p.net, r, nullptr, none) == ncclSuccess);
  }
  close_pair(p.net, pair);
}

TEST_CASE("the optional-receive-completion hint still yields a real request",
          "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  uint64_t in = 0, out = 0x0123456789abcdefULL;
  void* data = &in;
  size_t size = sizeof in;
  int tag = 0;
  void* rreq = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);  // NCCL pre-sets it
  REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
  REQUIRE(rreq != nullptr);
  REQUIRE(rreq != reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION));
  void* sreq = nullptr;
  REQUIRE(p.net.isend(pair.send, &out, sizeof out, 0, nullptr, nullptr, &sreq) == ncclSuccess);
  REQUIRE(wait_pair(p.net, rreq, nullptr, sreq) == ncclSuccess);  // sizes may be NULL
  CHECK(in == out);
  close_pair(p.net, pair);
}

TEST_CASE("striping over several streams reassembles large and small messages in order",
          "[plugin][transfer]") {
  ScopedEnv streams("ASTRAL_TCP_STREAMS", "4");
  ScopedEnv stripe("ASTRAL_TCP_STRIPE_MIN", "64K");
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  std::vector<size_t> sizes;
  for (int i = 0; i < 40; ++i) {
    // Striped messages of odd sizes between unstriped ones: parts finish out of order.
    sizes.push_back(i % 3 == 0 ? (size_t(1) << 20) * (i % 5 + 1) + 12345 : size_t(i) * 97);
  }
  sizes.push_back(65536);      // exactly the threshold
  sizes.push_back(65536 + 1);  // one byte over: the last part is tiny
  sizes.push_back(16 << 20);
  stream_messages(p.net, pair, sizes, 12);
  close_pair(p.net, pair);
}

TEST_CASE("memory registration, flush and hints", "[plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  char buffer[64];
  void* mh = nullptr;
  REQUIRE(p.net.regMr(pair.send, buffer, sizeof buffer, NCCL_PTR_HOST, &mh) == ncclSuccess);
  CHECK(mh != nullptr);
  CHECK(p.net.deregMr(pair.send, mh) == ncclSuccess);
  void* gpu = nullptr;
  CHECK(p.net.regMr(pair.recv, buffer, sizeof buffer, NCCL_PTR_CUDA, &gpu) != ncclSuccess);
  // tcp offers host memory only; ib over softhca here has no peer memory (ib_env.cpp).
  CHECK(LogCapture::count(NCCL_LOG_WARN, ib_run() ? "needs GPUDirect RDMA" : "NCCL_PTR_HOST only") >= 1);
  void* data = buffer;
  int size = 8;
  void* flush = reinterpret_cast<void*>(0x1);
  REQUIRE(p.net.iflush(pair.recv, 1, &data, &size, &mh, &flush) == ncclSuccess);
  CHECK(flush == nullptr);  // nothing to flush for host memory: complete at once
  ncclNetAttr_v11_t attr{{8, 1, 2, 1}, {8, 1, 2, 1}, 1u << 4, 1u << 1, 1u << 2};
  CHECK(p.net.setNetAttr(p.ctx, &attr) == ncclSuccess);
  close_pair(p.net, pair);
}

TEST_CASE("a send larger than the posted receive fails the connection, it does not crash",
          "[tcp-only][plugin][transfer]") {
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  std::vector<uint8_t> out(4096), in(1024);
  void* data = in.data();
  size_t size = in.size();
  int tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
  REQUIRE(p.net.isend(pair.send, out.data(), out.size(), 0, nullptr, nullptr, &sreq) ==
          ncclSuccess);
  CHECK(wait_request(p.net, rreq, nullptr) == ncclInternalError);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "exceeds the posted receive") == 1);
  // The connection stays failed; later calls report it instead of touching the stream.
  void* again = nullptr;
  CHECK(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &again) != ncclSuccess);
  close_pair(p.net, pair);
}

// Over ib the sender matches its send to the receiver's clear-to-send, so it is the sender that
// finds the mismatch (before any data moves); the receiver is told nothing by RC and, in a job,
// learns of it when the failed rank aborts. [.ib-only]: run by the "plugin: ib: " entries.
TEST_CASE("ib: a send larger than the posted receive fails the sender, it does not crash",
          "[.ib-only][plugin][transfer]") {
  SofthcaEnv env;
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  std::vector<uint8_t> out(4096), in(1024);
  void* data = in.data();
  size_t size = in.size();
  int tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
  // isend itself reports it when the clear-to-send is already there, else test() does.
  ncclResult_t sent = p.net.isend(pair.send, out.data(), out.size(), 0, nullptr, nullptr, &sreq);
  if (sent == ncclSuccess && sreq) sent = wait_request(p.net, sreq, nullptr);
  CHECK(sent == ncclInvalidUsage);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "exceeds the posted receive") == 1);
  CHECK(std::all_of(in.begin(), in.end(), [](uint8_t b) { return b == 0; }));  // nothing written
  // The connection stays failed; later calls report it instead of posting.
  void* again = nullptr;
  CHECK(p.net.isend(pair.send, out.data(), 16, 0, nullptr, nullptr, &again) != ncclSuccess);
  close_pair(p.net, pair);
}
