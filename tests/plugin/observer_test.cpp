// What the transport tells its observer (the trace recorder) and NCCL's profiler callback about
// each transfer: sequence numbers known at posting whenever both ends can agree on them, and a
// profiler net event per transfer carrying the message's request id, started and stopped once.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "abi/profiler_common.h"
#include "core/net.hpp"
#include "astral/plugin/observer.hpp"
#include "core/net_trace.hpp"

namespace net = astral::plugin::net;
using astral::plugin::ConnectionInfo;
using astral::plugin::NetObserver;
using astral::plugin::TransferInfo;

namespace {

struct Seen {
  bool completed, send;
  int slot, tag;
  uint32_t sequence;
  bool known;
};
std::vector<Seen> g_seen;

class Recorder final : public NetObserver {
  void on_posted(const TransferInfo& t) noexcept override {
    g_seen.push_back({false, t.send, t.slot, t.tag, t.sequence, t.sequence_known});
  }
  void on_completed(const TransferInfo& t) noexcept override {
    g_seen.push_back({true, t.send, t.slot, t.tag, t.sequence, t.sequence_known});
  }
};

struct ProfilerCall {
  int type;
  void* phandle;
  int64_t plugin_id;
  astralProfilerNetDescr_v1_t descr;
};
std::vector<ProfilerCall> g_calls;
int g_event_token = 0;

ncclResult_t fake_profiler(void** event, int type, void* phandle, int64_t plugin_id, void* ext) {
  g_calls.push_back({type, phandle, plugin_id, *static_cast<astralProfilerNetDescr_v1_t*>(ext)});
  if (type == ncclProfilerNetEventStart) *event = &g_event_token;
  return ncclSuccess;
}

void wait_done(std::vector<void*> requests) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (bool pending = true; pending;) {
    pending = false;
    for (void*& r : requests) {
      if (!r) continue;
      int done = 0, sizes[8] = {};
      REQUIRE(net::test(r, &done, sizes) == ncclSuccess);
      if (done) r = nullptr;
      pending = pending || r;
    }
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
}

const Seen* find(bool completed, bool send, int tag) {
  for (const Seen& s : g_seen)
    if (s.completed == completed && s.send == send && s.tag == tag) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("transfers reach the observer with agreed sequence numbers and the profiler callback once each") {
  setenv("ASTRAL_SOCKET_IFNAME", "lo", 0);
  astral::plugin::set_net_observer_factory(
      [](uint64_t) -> std::shared_ptr<NetObserver> { return std::make_shared<Recorder>(); });
  g_seen.clear();
  g_calls.clear();
  void* ctx = nullptr;
  REQUIRE(net::init(&ctx, 0xabc, NCCL_NET_TRAFFIC_CLASS_UNDEF, nullptr, fake_profiler) == ncclSuccess);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *listen = nullptr, *send = nullptr, *recv = nullptr;
  REQUIRE(net::listen(ctx, 0, handle, &listen) == ncclSuccess);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!send || !recv) {
    if (!send) REQUIRE(net::connect(ctx, 0, handle, -1, &send) == ncclSuccess);
    if (!recv) REQUIRE(net::accept(listen, &recv) == ncclSuccess);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  char out[4][64] = {}, in[4][64] = {};
  int phandle = 0;  // NCCL's step handle: opaque to the transport

  // A receive posted alone, before its message: its sequence is known at posting.
  void* data[2] = {in[0], in[1]};
  size_t sizes[2] = {64, 64};
  int tags[2] = {5, 5};
  void* phandles[2] = {&phandle, &phandle};
  void *rr = nullptr, *sr = nullptr;
  REQUIRE(net::irecv(recv, 1, data, sizes, tags, nullptr, phandles, &rr) == ncclSuccess);
  REQUIRE(net::isend(send, out[0], 64, 5, nullptr, &phandle, &sr) == ncclSuccess);
  wait_done({rr, sr});
  REQUIRE(find(false, false, 5));
  CHECK(find(false, false, 5)->known);
  CHECK(find(false, false, 5)->sequence == 0);
  REQUIRE(find(true, false, 5));
  CHECK(find(true, false, 5)->sequence == 0);
  CHECK(find(false, true, 5)->known);

  // Profiler: a start and an update-and-stop per transfer, with the message's request id.
  REQUIRE(g_calls.size() == 4);
  std::vector<uint64_t> ids;
  for (const ProfilerCall& c : g_calls) {
    CHECK(c.phandle == &phandle);
    CHECK(c.plugin_id == ASTRAL_PROFILER_NET_ID);
    CHECK(c.descr.connection_id != 0);
    CHECK(c.descr.bytes == 64);
    ids.push_back(c.descr.request_id);
  }
  int starts = 0, stops = 0;
  for (const ProfilerCall& c : g_calls) {
    starts += c.type == ncclProfilerNetEventStart;
    stops += c.type == ncclProfilerNetEventUpdateAndStop;
  }
  CHECK(starts == 2);
  CHECK(stops == 2);
  for (uint64_t id : ids) CHECK(id == ids[0]);  // sender and receiver agree
  CHECK(ids[0] != 0);

  // A grouped receive: slots learn their message by tag, so only at completion.
  g_seen.clear();
  tags[0] = 7;
  tags[1] = 8;
  REQUIRE(net::irecv(recv, 2, data, sizes, tags, nullptr, nullptr, &rr) == ncclSuccess);
  void *s1 = nullptr, *s2 = nullptr;
  REQUIRE(net::isend(send, out[1], 64, 8, nullptr, nullptr, &s1) == ncclSuccess);  // sequence 1
  REQUIRE(net::isend(send, out[2], 64, 7, nullptr, nullptr, &s2) == ncclSuccess);  // sequence 2
  wait_done({rr, s1, s2});
  CHECK_FALSE(find(false, false, 7)->known);
  CHECK_FALSE(find(false, false, 8)->known);
  CHECK(find(true, false, 8)->known);
  CHECK(find(true, false, 8)->sequence == 1);
  CHECK(find(true, false, 8)->slot == 1);
  CHECK(find(true, false, 7)->sequence == 2);
  // After mixed tags, posting order no longer decides: a later single receive waits too.
  REQUIRE(net::irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rr) == ncclSuccess);
  REQUIRE(net::isend(send, out[3], 64, 7, nullptr, nullptr, &s1) == ncclSuccess);
  wait_done({rr, s1});
  REQUIRE(g_seen.size() == 12);  // 2 + 2 posted, 4 completed; then 1 + 1 posted, 2 completed
  CHECK_FALSE(g_seen[8].send);
  CHECK_FALSE(g_seen[8].known);
  CHECK(g_seen.back().sequence == 3);
  CHECK(g_calls.size() == 4);  // no phandle, no profiler call

  net::close_send(send);
  net::close_recv(recv);
  net::close_listen(listen);
  net::finalize(ctx);
  astral::plugin::set_net_observer_factory(nullptr);
}
