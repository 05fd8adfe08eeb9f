// Writer cost per event, side by side with baselines in the same run (the machine is shared and
// noisy: compare the rows, not runs).
//
//   bench_trace_writer [batches]      (default 4000 batches of 1000 events per row)
//
// Rows, measured in interleaved batches so that noise hits them alike:
//   build event       construct the Event and its request id (the caller's share, in every row)
//   copy to array     build the event and copy it into an in-memory ring (what any tracer pays)
//   clock_gettime     one CLOCK_MONOTONIC read (the per-event timestamp of a naive tracer)
//   writer            Writer::record into a wrapping file mapping, steady state
//   writer, 4 threads the same with four threads writing at once (per-thread cost)
// Target (issue 4): writer median <= 50 ns per event.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "astral/trace/writer.hpp"

using namespace astral::trace;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 1000;

Event make_event(uint64_t seq) {
  Event e;
  e.kind = EventKind::NetSendPosted;
  e.comm_hash = 0x1234567890abcdefull;
  e.payload = Transfer{request_id(MessageKeys{e.comm_hash, 42, seq}), 42, seq, 1u << 20, 0, 3};
  return e;
}

struct Row {
  const char* name;
  std::vector<double> ns_per_event;
  double percentile(double p) {
    std::sort(ns_per_event.begin(), ns_per_event.end());
    return ns_per_event[std::min(ns_per_event.size() - 1, size_t(p * double(ns_per_event.size())))];
  }
};

template <class F>
double time_batch(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kBatch;
}

}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::max(10, std::atoi(argv[1])) : 4000;
  char tmpl[] = "/tmp/astral-bench-trace-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  WriterOptions o;
  o.dir = dir;
  o.max_bytes = 16u << 20;  // wraps every ~250k events: the steady state of a long job
  auto w = Writer::open(o);
  if (!w) return 1;
  // Warm up: one full lap through the file so every page is mapped (steady state).
  for (uint64_t i = 0; i < 300000; ++i) w->record(make_event(i));

  static std::array<Event, 1024> ring;
  Row build{"build event", {}}, copy{"copy to array", {}}, gettime{"clock_gettime", {}}, writer{"writer", {}};
  uint64_t seq = 0, sink = 0;
  for (int b = 0; b < batches; ++b) {
    build.ns_per_event.push_back(time_batch([&] {
      for (int i = 0; i < kBatch; ++i) {
        Event e = make_event(seq++);
        asm volatile("" : : "r"(&e) : "memory");
      }
    }));
    copy.ns_per_event.push_back(time_batch([&] {
      for (int i = 0; i < kBatch; ++i) {
        ring[seq % ring.size()] = make_event(seq);
        asm volatile("" : : "r"(&ring[seq % ring.size()]) : "memory");  // keep the copy
        ++seq;
      }
    }));
    gettime.ns_per_event.push_back(time_batch([&] {
      for (int i = 0; i < kBatch; ++i) {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += uint64_t(ts.tv_nsec);
      }
    }));
    writer.ns_per_event.push_back(time_batch([&] {
      for (int i = 0; i < kBatch; ++i) w->record(make_event(seq++));
    }));
  }

  // Four threads at once: per-thread cost (no shared lock or counter on the hot path).
  Row threaded{"writer, 4 threads", {}};
  std::atomic<bool> go{false};
  std::vector<std::vector<double>> per_thread(4);
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      uint64_t s = uint64_t(t) << 40;
      for (int b = 0; b < batches / 4; ++b)
        per_thread[t].push_back(time_batch([&] {
          for (int i = 0; i < kBatch; ++i) w->record(make_event(s++));
        }));
    });
  go.store(true);
  for (auto& th : pool) th.join();
  for (auto& v : per_thread) threaded.ns_per_event.insert(threaded.ns_per_event.end(), v.begin(), v.end());

  std::printf("trace writer: ns per event, %d batches of %d (median / p90 / p99)\n", batches, kBatch);
  for (Row* r : {&build, &copy, &gettime, &writer, &threaded})
    std::printf("  %-20s %8.1f %8.1f %8.1f\n", r->name, r->percentile(0.5), r->percentile(0.9), r->percentile(0.99));
  const double median = writer.percentile(0.5);
  std::printf("writer median %.1f ns per event including building it (record() alone ~%.1f ns) = %.2fx "
              "clock_gettime, %.2fx copy-to-array; target <= 50 ns: %s\n",
              median, median - build.percentile(0.5), median / gettime.percentile(0.5), median / copy.percentile(0.5),
              median <= 50 ? "met" : "NOT MET");
  std::printf("dropped events: %llu (sink %llu)\n", static_cast<unsigned long long>(w->dropped_events()),
              static_cast<unsigned long long>(sink & 1));
  w.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
