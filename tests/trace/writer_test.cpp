// The writer and reader together: every payload round-trips, metadata survives, wrap and stop
// bound the file, threads keep their order, failures turn tracing off with one warning.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "astral/trace/reader.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::trace::test::small_options;
using astral::trace::test::TempDir;
using astral::trace::test::transfer_event;

namespace {
uint64_t mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

std::vector<std::string> g_warnings;
void capture_warning(const char* message) { g_warnings.emplace_back(message); }

std::vector<uint64_t> seqs_of(const TraceFile& f, EventKind kind) {
  std::vector<uint64_t> out;
  for (const auto& e : f.events)
    if (e.kind == kind) out.push_back(e.as<Transfer>()->seq);
  return out;
}
}  // namespace

TEST_CASE("every event kind round-trips through the writer and the reader") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path));
  REQUIRE(w);
  const StringId func = w->intern("AllReduce");
  const StringId dtype = w->intern("ncclFloat32");
  REQUIRE(func != 0);
  CHECK(w->intern("AllReduce") == func);  // interned once

  std::vector<Event> written;
  auto add = [&](EventKind kind, Payload p, uint16_t channel = kNoChannel) {
    Event e;
    e.kind = kind;
    e.comm_hash = 0xabcdef0123456789ull;
    e.channel = channel;
    e.payload = p;
    w->record(e);
    written.push_back(e);
  };
  add(EventKind::Note, Note{func, 1});
  add(EventKind::NetSendPosted, Transfer{11, 22, 33, 1 << 20, 0, 5});
  add(EventKind::NetRecvDone, Transfer{11, 22, 0, 1 << 20, 1234, 5});
  add(EventKind::NetError, NetFault{22, 11, -104, func});
  add(EventKind::NetPeerLost, NetFault{22, 0, 6, 0});
  add(EventKind::GroupBegin, Group{99, 2});
  add(EventKind::CollBegin, Collective{100, 17, 262144, func, dtype, func, dtype, 0, 2, 8}, 3);
  add(EventKind::CollEnd, SpanEnd{100});
  add(EventKind::P2pBegin, P2p{101, 4, 1024, func, dtype, 7, 1});
  add(EventKind::ProxyOpBegin, ProxyOp{102, 100, 17, 1, 8, 524288, true}, 2);
  add(EventKind::ProxyStepBegin, ProxyStep{555, 102, 0, 3, 1, -1, true}, 2);
  add(EventKind::ProxyStepState, ProxyStep{555, 102, 65536, 3, 1, 9, true}, 2);
  add(EventKind::NetPluginBegin, NetPluginLink{555, 22, 11});
  add(EventKind::KernelChBegin, KernelChannel{100, 123456789}, 1);
  add(EventKind::GroupEnd, SpanEnd{99});
  w->add_connection(0xabcdef0123456789ull, Connection{22, 1, 5000, 4, 3, func, dtype, 0, 0, true});
  w->add_comm(0xabcdef0123456789ull, CommInfo{3, 8, 2, dtype});
  w->close();

  const TraceFile f = read_trace_file(w->path());
  CHECK_FALSE(f.damage.corrupt());
  CHECK(f.damage.incomplete_records == 0);
  CHECK(f.info.host == "testhost");
  CHECK(f.info.closed);
  CHECK(f.info.rank == 3);  // from add_comm
  CHECK(f.info.nranks == 8);
  CHECK(f.info.comm_hash == 0xabcdef0123456789ull);
  CHECK(f.str(func) == "AllReduce");
  CHECK(f.str(dtype) == "ncclFloat32");
  REQUIRE(f.connection(22));
  CHECK(f.connection(22)->port == 5000);
  CHECK(f.connection(22)->is_send);
  REQUIRE(f.comm(0xabcdef0123456789ull));
  CHECK(f.comm(0xabcdef0123456789ull)->nnodes == 2);

  std::vector<Event> read;
  for (const auto& e : f.events)
    if (e.kind != EventKind::ClockSync && e.kind != EventKind::NetConnect && e.kind != EventKind::CommInit)
      read.push_back(e);
  REQUIRE(read.size() == written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    INFO("event " << i << " " << to_string(written[i].kind));
    CHECK(read[i].kind == written[i].kind);
    CHECK(read[i].comm_hash == written[i].comm_hash);
    CHECK(read[i].channel == written[i].channel);
    CHECK(read[i].payload == written[i].payload);
    if (i) CHECK(read[i].time_ns >= read[i - 1].time_ns);
  }
}

TEST_CASE("event times are CLOCK_MONOTONIC nanoseconds of the writing host") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path));
  REQUIRE(w);
  std::vector<std::pair<uint64_t, uint64_t>> brackets;
  for (int i = 0; i < 20; ++i) {
    const uint64_t before = mono_now();
    w->record(transfer_event(EventKind::NetSendPosted, i));
    brackets.emplace_back(before, mono_now());
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 10 ? 1100 : 5));  // crosses a clock sync
  }
  const TraceFile f = read_trace_file(w->path());
  const auto events = seqs_of(f, EventKind::NetSendPosted);
  REQUIRE(events.size() == 20);
  size_t k = 0;
  for (const auto& e : f.events) {
    if (e.kind != EventKind::NetSendPosted) continue;
    INFO("event " << k);
    // The tick -> monotonic mapping is interpolated; allow 20 us of error.
    CHECK(e.time_ns + 20'000 >= brackets[k].first);
    CHECK(e.time_ns <= brackets[k].second + 20'000);
    ++k;
  }
  CHECK(f.clock.size() >= 3);  // open, chunk header, periodic reading
  CHECK(std::llabs(f.wall_offset_ns() - (int64_t(f.info.start_wall_ns) - int64_t(f.info.start_mono_ns))) < 5'000'000);
}

TEST_CASE("a Done event records the time since its Posted tick") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path));
  REQUIRE(w);
  const Ticks posted = w->now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w->record(transfer_event(EventKind::NetSendDone, 1), posted);
  const TraceFile f = read_trace_file(w->path());
  for (const auto& e : f.events)
    if (e.kind == EventKind::NetSendDone) {
      CHECK(e.as<Transfer>()->duration_ns >= 19'000'000);
      CHECK(e.as<Transfer>()->duration_ns < 2'000'000'000);
    }
}

TEST_CASE("threads write without sharing a chunk and keep their own order") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path, 8u << 20));
  REQUIRE(w);
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) w->record(transfer_event(EventKind::NetSendPosted, i, 1, t));
    });
  for (auto& th : threads) th.join();
  const TraceFile f = read_trace_file(w->path());
  CHECK_FALSE(f.damage.corrupt());
  std::map<uint64_t, std::vector<uint64_t>> by_conn;
  std::map<uint64_t, uint32_t> thread_of_conn;
  for (const auto& e : f.events)
    if (auto* t = e.as<Transfer>()) {
      by_conn[t->conn_id].push_back(t->seq);
      thread_of_conn[t->conn_id] = e.thread;
    }
  REQUIRE(by_conn.size() == kThreads);
  for (auto& [conn, seqs] : by_conn) {
    REQUIRE(seqs.size() == kPerThread);
    for (int i = 0; i < kPerThread; ++i) REQUIRE(seqs[i] == uint64_t(i));
  }
  std::set<uint32_t> distinct;
  for (auto& [conn, th] : thread_of_conn) distinct.insert(th);
  CHECK(distinct.size() == kThreads);
  CHECK(f.threads >= kThreads);
  CHECK(w->dropped_events() == 0);
}

TEST_CASE("a wrapping file keeps the latest events within its size") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path, 4096 + 16384 + 8 * 4096));  // 8 chunks of 63 records
  REQUIRE(w);
  constexpr int kEvents = 2000;
  for (int i = 0; i < kEvents; ++i) w->record(transfer_event(EventKind::NetSendPosted, i));
  CHECK_FALSE(w->full());
  const TraceFile f = read_trace_file(w->path());
  CHECK(f.info.file_bytes == 4096 + 16384 + 8 * 4096);
  CHECK_FALSE(f.damage.corrupt());
  const auto seqs = seqs_of(f, EventKind::NetSendPosted);
  REQUIRE(seqs.size() > 6 * 60);
  REQUIRE(seqs.size() < 8 * 63);
  CHECK(seqs.back() == kEvents - 1);
  for (size_t i = 1; i < seqs.size(); ++i) REQUIRE(seqs[i] == seqs[i - 1] + 1);  // a contiguous tail
  CHECK(f.recycled_chunks > 20);
}

TEST_CASE("a stopping file keeps the first events and counts the rest as dropped") {
  TempDir dir;
  auto o = small_options(dir.path, 4096 + 16384 + 4 * 4096);
  o.on_full = OnFull::Stop;
  auto w = Writer::open(o);
  REQUIRE(w);
  for (int i = 0; i < 1000; ++i) w->record(transfer_event(EventKind::NetSendPosted, i));
  CHECK(w->full());
  const TraceFile f = read_trace_file(w->path());
  const auto seqs = seqs_of(f, EventKind::NetSendPosted);
  REQUIRE(!seqs.empty());
  CHECK(seqs.front() == 0);
  for (size_t i = 1; i < seqs.size(); ++i) REQUIRE(seqs[i] == seqs[i - 1] + 1);
  CHECK(f.dropped_events + seqs.size() >= 1000);  // a clock reading may also have been dropped
  CHECK(f.dropped_events > 700);
  CHECK(f.recycled_chunks == 0);
}

TEST_CASE("the event mask leaves out unwanted categories") {
  TempDir dir;
  auto o = small_options(dir.path);
  o.event_mask = *parse_event_mask("coll");
  auto w = Writer::open(o);
  REQUIRE(w);
  CHECK_FALSE(w->wants(EventKind::NetSendPosted));
  CHECK(w->wants(EventKind::CollBegin));
  w->record(transfer_event(EventKind::NetSendPosted, 1));
  Event c;
  c.kind = EventKind::CollEnd;
  c.payload = SpanEnd{5};
  w->record(c);
  const TraceFile f = read_trace_file(w->path());
  CHECK(seqs_of(f, EventKind::NetSendPosted).empty());
  CHECK(std::count_if(f.events.begin(), f.events.end(), [](auto& e) { return e.kind == EventKind::CollEnd; }) == 1);
}

TEST_CASE("an event whose payload does not match its kind is refused and counted") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path));
  REQUIRE(w);
  Event bad;
  bad.kind = EventKind::CollBegin;
  bad.payload = Transfer{};
  w->record(bad);
  const TraceFile f = read_trace_file(w->path());
  CHECK(f.rejected_events == 1);
  CHECK(std::none_of(f.events.begin(), f.events.end(), [](auto& e) { return e.kind == EventKind::CollBegin; }));
}

TEST_CASE("an unwritable directory turns tracing off with one warning") {
  TempDir dir;
  const std::string blocked = dir.path + "/blocked";
  REQUIRE(mkdir(blocked.c_str(), 0500) == 0);
  if (geteuid() == 0) {  // root ignores permissions: use a path below a regular file instead
    FILE* f = std::fopen((dir.path + "/file").c_str(), "w");
    std::fclose(f);
  }
  const std::string target = geteuid() == 0 ? dir.path + "/file/sub" : blocked + "/sub";
  g_warnings.clear();
  set_warn_function(capture_warning);
  std::string error;
  auto w = Writer::open(small_options(target), &error);
  set_warn_function(nullptr);
  CHECK_FALSE(w);
  REQUIRE(g_warnings.size() == 1);
  CHECK(g_warnings[0].find(target) != std::string::npos);
  CHECK(g_warnings[0].find("tracing is off") != std::string::npos);
  CHECK(error == g_warnings[0]);
}

TEST_CASE("a file that cannot be preallocated (disk full) turns tracing off, nothing left behind") {
  TempDir dir;
  // A child process with a 1 MiB file size limit stands in for a full disk: preallocating the
  // 4 MiB file fails the same way (EFBIG instead of ENOSPC) before anything is mapped.
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1u << 20, 1u << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    g_warnings.clear();
    set_warn_function(capture_warning);
    auto w = Writer::open(small_options(dir.path, 4u << 20));
    const bool ok = !w && g_warnings.size() == 1 && g_warnings[0].find("cannot reserve") != std::string::npos;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("intern_static caches by address and agrees with intern") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path));
  REQUIRE(w);
  static const char kName[] = "ReduceScatter";
  const StringId a = w->intern_static(kName);
  CHECK(a != 0);
  CHECK(w->intern_static(kName) == a);
  CHECK(w->intern("ReduceScatter") == a);
  CHECK(w->intern_static(nullptr) == 0);
}

TEST_CASE("two writers in one process and thread keep separate files") {
  TempDir dir;
  auto a = Writer::open(small_options(dir.path));
  auto b = Writer::open(small_options(dir.path));
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->path() != b->path());
  for (int i = 0; i < 300; ++i) {
    a->record(transfer_event(EventKind::NetSendPosted, i, 1, 1));
    b->record(transfer_event(EventKind::NetSendPosted, i, 1, 2));
  }
  for (const auto* w : {a.get(), b.get()}) {
    const TraceFile f = read_trace_file(w->path());
    CHECK(seqs_of(f, EventKind::NetSendPosted).size() == 300);
  }
}
