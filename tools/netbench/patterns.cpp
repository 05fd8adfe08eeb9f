#include "netbench/patterns.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace astral::netbench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t word(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 31);
}

void fill(std::vector<uint8_t>& buffer, uint64_t seed) {
  for (size_t i = 0; i + 8 <= buffer.size(); i += 8) {
    uint64_t w = word(seed, i);
    std::memcpy(buffer.data() + i, &w, 8);
  }
  for (size_t i = buffer.size() & ~size_t(7); i < buffer.size(); ++i) buffer[i] = uint8_t(seed + i);
}

bool matches(const std::vector<uint8_t>& buffer, uint64_t seed) {
  std::vector<uint8_t> expected(buffer.size());
  fill(expected, seed);
  return expected == buffer;
}

PatternRun pingpong(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  PatternRun run;
  int partner = rank ^ 1;
  if (partner >= ranks) return run;  // odd one out idles
  bool first = rank % 2 == 0;
  std::vector<uint8_t> out(spec.bytes), in(spec.bytes);
  fill(out, rank);
  std::vector<double> warmup;
  fabric.pingpong(partner, first, out.data(), in.data(), spec.bytes, std::max(spec.warmup, 1), &warmup);
  run.verified = matches(in, partner);
  fabric.pingpong(partner, first, out.data(), in.data(), spec.bytes, spec.iterations, &run.iteration_s);
  for (double s : run.iteration_s) run.total_s += s;
  return run;
}

PatternRun stream(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  PatternRun run;
  int partner = rank ^ 1;
  if (partner >= ranks) return run;
  bool sender = rank % 2 == 0;
  std::vector<uint8_t> buffer(spec.bytes);
  if (sender) fill(buffer, rank);
  fabric.stream(partner, sender, buffer.data(), spec.bytes, spec.warmup, spec.window);
  run.verified = sender || matches(buffer, partner);
  auto start = Clock::now();
  fabric.stream(partner, sender, buffer.data(), spec.bytes, spec.iterations, spec.window);
  run.total_s = since(start);
  return run;
}

PatternRun bidirectional(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  PatternRun run;
  int partner = rank ^ 1;
  if (partner >= ranks) return run;
  // Distinct receive buffers for messages in flight, within a memory budget.
  size_t buffers = std::clamp<size_t>((size_t(512) << 20) / std::max<size_t>(spec.bytes, 1), 1,
                                      size_t(spec.window));
  std::vector<uint8_t> out(spec.bytes);
  std::vector<std::vector<uint8_t>> in(buffers, std::vector<uint8_t>(spec.bytes));
  fill(out, rank);
  std::vector<Op> ops;
  for (int w = 0; w < spec.window; ++w) {
    ops.push_back({partner, true, out.data(), spec.bytes});
    ops.push_back({partner, false, in[size_t(w) % buffers].data(), spec.bytes});
  }
  for (int i = 0; i < spec.warmup + spec.iterations; ++i) {
    auto start = Clock::now();
    fabric.exchange(ops);
    if (i >= spec.warmup) run.iteration_s.push_back(since(start));
    if (i == 0) run.verified = matches(in[0], partner);
  }
  for (double s : run.iteration_s) run.total_s += s;
  return run;
}

PatternRun all_to_all(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  PatternRun run;
  std::vector<std::vector<uint8_t>> out(ranks), in(ranks);
  std::vector<Op> ops;
  for (int p = 0; p < ranks; ++p) {
    if (p == rank) continue;
    out[p].resize(spec.bytes);
    in[p].resize(spec.bytes);
    fill(out[p], uint64_t(rank) * ranks + p);
    ops.push_back({p, false, in[p].data(), spec.bytes});
    ops.push_back({p, true, out[p].data(), spec.bytes});
  }
  for (int i = 0; i < spec.warmup + spec.iterations; ++i) {
    auto start = Clock::now();
    fabric.exchange(ops);
    if (i >= spec.warmup) run.iteration_s.push_back(since(start));
    if (i == 0) {
      run.verified = true;
      for (int p = 0; p < ranks; ++p) {
        if (p != rank) run.verified = run.verified && matches(in[p], uint64_t(p) * ranks + rank);
      }
    }
  }
  for (double s : run.iteration_s) run.total_s += s;
  return run;
}

// Ring all-reduce (sum of floats): reduce-scatter then all-gather, 2(N-1) steps, each a send to
// the right neighbour and a receive from the left one.
PatternRun all_reduce(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  PatternRun run;
  size_t count = spec.bytes / sizeof(float);
  std::vector<float> data(count), scratch(count / size_t(ranks) + 1);
  std::vector<size_t> begin(ranks + 1);
  for (int c = 0; c <= ranks; ++c) begin[c] = count * size_t(c) / size_t(ranks);
  auto chunk = [&](int c) { return std::pair(begin[c], begin[c + 1] - begin[c]); };
  int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
  auto reset = [&] {
    for (size_t i = 0; i < count; ++i) data[i] = float(rank + 1) + float(i % 7);
  };
  for (int i = 0; i < spec.warmup + spec.iterations; ++i) {
    reset();
    auto start = Clock::now();
    for (int step = 0; step < ranks - 1; ++step) {
      auto [send_at, send_n] = chunk((rank - step + ranks) % ranks);
      auto [recv_at, recv_n] = chunk((rank - step - 1 + 2 * ranks) % ranks);
      fabric.exchange({{right, true, data.data() + send_at, send_n * sizeof(float)},
                       {left, false, scratch.data(), recv_n * sizeof(float)}});
      for (size_t k = 0; k < recv_n; ++k) data[recv_at + k] += scratch[k];
    }
    for (int step = 0; step < ranks - 1; ++step) {
      auto [send_at, send_n] = chunk((rank - step + 1 + ranks) % ranks);
      auto [recv_at, recv_n] = chunk((rank - step + 2 * ranks) % ranks);
      fabric.exchange({{right, true, data.data() + send_at, send_n * sizeof(float)},
                       {left, false, data.data() + recv_at, recv_n * sizeof(float)}});
    }
    if (i >= spec.warmup) run.iteration_s.push_back(since(start));
  }
  // Sum over ranks r of (r + 1 + i % 7).
  run.verified = true;
  float base = float(ranks) * float(ranks + 1) / 2;
  for (size_t i = 0; i < count && run.verified; ++i) {
    run.verified = data[i] == base + float(ranks) * float(i % 7);
  }
  for (double s : run.iteration_s) run.total_s += s;
  return run;
}

}  // namespace

PatternRun run_pattern(Fabric& fabric, const PatternSpec& spec, int rank, int ranks) {
  switch (spec.pattern) {
    case Pattern::kPingPong: return pingpong(fabric, spec, rank, ranks);
    case Pattern::kStream: return stream(fabric, spec, rank, ranks);
    case Pattern::kBidirectional: return bidirectional(fabric, spec, rank, ranks);
    case Pattern::kAllToAll: return all_to_all(fabric, spec, rank, ranks);
    case Pattern::kAllReduce: return all_reduce(fabric, spec, rank, ranks);
  }
  return {};
}

void Fabric::pingpong(int peer, bool initiator, void* out, void* in, size_t bytes, int count,
                      std::vector<double>* seconds) {
  std::vector<Op> send = {{peer, true, out, bytes}};
  std::vector<Op> recv = {{peer, false, in, bytes}};
  for (int i = 0; i < count; ++i) {
    auto start = Clock::now();
    exchange(initiator ? send : recv);
    exchange(initiator ? recv : send);
    seconds->push_back(since(start));
  }
}

}  // namespace astral::netbench
