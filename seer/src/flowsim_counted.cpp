// ECMP collisions counted from the hash model (see flowsim_counted.hpp).
#include "flowsim_counted.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace astral::seer::detail {
namespace {

constexpr size_t kCounterSlots = 8;  // destination leaves pending at once

// splitmix64 stream: deterministic per (salt, round, destination, switch).
struct CountRng {
  std::uint64_t state;
  std::uint64_t next() { return topo::mix64(state += 0x9e3779b97f4a7c15ULL); }
  double open01() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
  double gaussian() {  // Box-Muller
    return std::sqrt(-2.0 * std::log(open01())) * std::cos(6.283185307179586 * open01());
  }
};

// Binomial(n, p): waiting times when the mean is small, else the normal approximation (the
// counts that matter for a max-load are thousands of QPs; its error there is far below the
// draw's own spread).
std::uint64_t draw_binomial(std::uint64_t n, double p, CountRng& rng) {
  if (n == 0 || p <= 0) return 0;
  if (p >= 1) return n;
  if (p > 0.5) return n - draw_binomial(n, 1 - p, rng);
  const double mean = double(n) * p;
  if (mean < 16) {
    const double log_q = std::log1p(-p);
    std::uint64_t k = 0;
    for (double pos = 0;; ++k) {
      pos += std::floor(std::log(rng.open01()) / log_q) + 1;
      if (pos > double(n)) return k;
    }
  }
  const double k = std::round(mean + std::sqrt(mean * (1 - p)) * rng.gaussian());
  return std::uint64_t(std::clamp(k, 0.0, double(n)));
}

}  // namespace

bool counting_applies(const FlowSimOptions& o, std::string* why) {
  const char* reason = nullptr;
  if (o.routing.choice == topo::PathChoice::kPinned) reason = "pinned paths are not hashed";
  else if (o.routing.polarisation > 0) reason = "polarised hashes are correlated across stages";
  if (reason && why) *why = reason;
  return reason == nullptr;
}

EcmpCounter::EcmpCounter(const topo::Router& router, ResourceLoads& loads, std::uint64_t salt)
    : router_(router), loads_(loads), salt_(salt) {}

void EcmpCounter::add(int sw, int leaf, std::uint64_t qps, double subflow_bytes) {
  if (qps == 0 || sw == router_.leaf_switch(leaf)) return;
  if (subflow_bytes != subflow_bytes_) {
    flush();
    subflow_bytes_ = subflow_bytes;
  }
  Pending& p = slot_for(leaf);
  if (p.at[sw] == 0) p.touched.push_back(sw);
  p.at[sw] += qps;
}

EcmpCounter::Pending& EcmpCounter::slot_for(int leaf) {
  for (Pending& p : slots_)
    if (p.leaf == leaf) return p;
  for (Pending& p : slots_)
    if (p.leaf < 0) {
      p.leaf = leaf;
      return p;
    }
  if (slots_.size() == kCounterSlots) flush();
  if (slots_.size() < kCounterSlots) {
    slots_.emplace_back();
    slots_.back().at.assign(size_t(router_.fabric().switches().size()), 0);
  }
  for (Pending& p : slots_)
    if (p.leaf < 0) {
      p.leaf = leaf;
      return p;
    }
  return slots_.front();  // unreachable: flush frees every slot
}

void EcmpCounter::flush() {
  for (Pending& p : slots_)
    if (p.leaf >= 0) {
      propagate(p);
      p.leaf = -1;
    }
  ++round_;
}

void EcmpCounter::load(int resource, std::uint64_t count) {
  constexpr std::uint64_t kChunk = std::numeric_limits<std::uint32_t>::max();
  for (; count > kChunk; count -= kChunk) loads_.add_many(resource, std::uint32_t(kChunk), subflow_bytes_);
  if (count) loads_.add_many(resource, std::uint32_t(count), subflow_bytes_);
}

// Walks the destination's ECMP DAG from the farthest switches down, splitting each switch's QPs
// over its group as the per-QP hash would (uniform, independent per switch).
void EcmpCounter::propagate(Pending& p) {
  const int leaf = p.leaf, dst_sw = router_.leaf_switch(leaf);
  for (int sw : p.touched) {
    size_t d = size_t(router_.hops(sw, leaf));
    if (levels_.size() <= d) levels_.resize(d + 1);
    levels_[d].push_back(sw);
  }
  p.touched.clear();
  for (size_t d = levels_.size(); d-- > 1;) {
    for (size_t i = 0; i < levels_[d].size(); ++i) {
      const int sw = levels_[d][i];
      std::uint64_t left = p.at[sw];
      p.at[sw] = 0;
      auto group = router_.next_hops(sw, leaf);
      CountRng rng{topo::mix64(salt_ ^ (std::uint64_t(leaf) << 32 | std::uint32_t(sw)) ^
                               (round_ * 0xd6e8feb86659fd93ULL))};
      for (size_t m = 0; m < group.size() && left > 0; ++m) {
        const std::uint64_t k =
            m + 1 == group.size() ? left : draw_binomial(left, 1.0 / double(group.size() - m), rng);
        if (k == 0) continue;
        left -= k;
        load(group[m].resource, k);
        const int next = group[m].next_switch;
        if (next == dst_sw) continue;
        if (p.at[next] == 0) levels_[d - 1].push_back(next);
        p.at[next] += k;
      }
    }
    levels_[d].clear();
  }
}

}  // namespace astral::seer::detail
