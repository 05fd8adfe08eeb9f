// Progressive filling with a lazy heap, and the event loop built on it.
#include "astral/seer/flowsim_maxmin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace astral::seer {

std::vector<double> max_min_rates(std::span<const double> capacity, const FlowSet& flows,
                                  std::span<const char> active) {
  const size_t n_flows = flows.size();
  const size_t n_res = capacity.size();
  std::vector<double> rate(n_flows, 0.0);
  auto is_active = [&](size_t f) { return active.empty() || active[f]; };

  // Incidence: resource -> active subflows through it (CSR).
  std::vector<std::uint32_t> count(n_res + 1, 0);
  for (size_t f = 0; f < n_flows; ++f)
    if (is_active(f))
      for (int r : flows.path(f)) count[r + 1]++;
  for (size_t r = 0; r < n_res; ++r) count[r + 1] += count[r];
  std::vector<std::uint32_t> members(count.back());
  {
    std::vector<std::uint32_t> fill(count.begin(), count.end() - 1);
    for (size_t f = 0; f < n_flows; ++f)
      if (is_active(f))
        for (int r : flows.path(f)) members[fill[r]++] = std::uint32_t(f);
  }

  std::vector<std::uint32_t> unfrozen(n_res);
  std::vector<double> frozen_sum(n_res, 0.0);
  using Entry = std::pair<double, std::uint32_t>;  // (fair level, resource)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (size_t r = 0; r < n_res; ++r) {
    unfrozen[r] = count[r + 1] - count[r];
    if (unfrozen[r] > 0) heap.push({std::max(0.0, capacity[r]) / unfrozen[r], std::uint32_t(r)});
  }
  std::vector<char> frozen(n_flows, 0);
  auto level_of = [&](size_t r) {
    return std::max(0.0, capacity[r] - frozen_sum[r]) / double(unfrozen[r]);
  };
  while (!heap.empty()) {
    auto [key, r] = heap.top();
    heap.pop();
    if (unfrozen[r] == 0) continue;
    double level = level_of(r);
    if (level > key * (1 + 1e-12) + 1e-300) {  // stale: the level rose since it was pushed
      heap.push({level, r});
      continue;
    }
    // Resource r fills at `level`: freeze every subflow still growing through it.
    for (std::uint32_t k = count[r]; k < count[r + 1]; ++k) {
      std::uint32_t f = members[k];
      if (frozen[f]) continue;
      frozen[f] = 1;
      rate[f] = level;
      for (int q : flows.path(f)) {
        frozen_sum[q] += level;
        unfrozen[q]--;
      }
    }
  }
  return rate;
}

EventSimResult simulate_transfers(std::span<const double> capacity, const FlowSet& flows,
                                  std::span<const Transfer> transfers, double batch_tolerance) {
  const double inf = std::numeric_limits<double>::infinity();
  EventSimResult result;
  result.finish_s.assign(transfers.size(), inf);
  std::vector<double> remaining(transfers.size());
  std::vector<char> active(flows.size(), 0);
  size_t left = 0;
  for (size_t t = 0; t < transfers.size(); ++t) {
    remaining[t] = transfers[t].bytes;
    if (transfers[t].bytes <= 0) {
      result.finish_s[t] = 0;
      continue;
    }
    ++left;
    for (std::uint32_t k = 0; k < transfers[t].flow_count; ++k)
      active[transfers[t].first_flow + k] = 1;
  }
  double now = 0;
  std::vector<double> transfer_rate(transfers.size());
  while (left > 0) {
    std::vector<double> rate = max_min_rates(capacity, flows, active);
    ++result.events;
    double soonest = inf;
    for (size_t t = 0; t < transfers.size(); ++t) {
      if (!std::isinf(result.finish_s[t]) || remaining[t] <= 0) continue;
      double r = 0;
      for (std::uint32_t k = 0; k < transfers[t].flow_count; ++k) r += rate[transfers[t].first_flow + k];
      transfer_rate[t] = r;
      if (r > 0) soonest = std::min(soonest, remaining[t] / r);
    }
    if (std::isinf(soonest)) break;  // what is left can never move
    double horizon = soonest + batch_tolerance * (now + soonest);
    for (size_t t = 0; t < transfers.size(); ++t) {
      if (!std::isinf(result.finish_s[t]) || remaining[t] <= 0) continue;
      double r = transfer_rate[t];
      if (r > 0 && remaining[t] / r <= horizon) {
        result.finish_s[t] = now + remaining[t] / r;
        remaining[t] = 0;
        --left;
        for (std::uint32_t k = 0; k < transfers[t].flow_count; ++k)
          active[transfers[t].first_flow + k] = 0;
      } else {
        remaining[t] -= r * soonest;
      }
    }
    now += soonest;
  }
  for (size_t t = 0; t < transfers.size(); ++t) {
    if (std::isinf(result.finish_s[t]))
      ++result.stalled;
    else
      result.makespan_s = std::max(result.makespan_s, result.finish_s[t]);
  }
  return result;
}

}  // namespace astral::seer
