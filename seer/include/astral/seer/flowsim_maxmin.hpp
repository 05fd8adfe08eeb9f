#pragma once
// The fluid core of the flow simulator: max-min fair rates by progressive filling, and an
// event-driven simulation of transfers whose rates are re-solved whenever one finishes.
//
// A subflow is a list of resource indices (link directions, NVLink ports); every subflow crossing a
// resource shares its capacity. A transfer is a number of bytes carried by one or more subflows
// (the QPs of a connection): its rate is the sum of theirs.
#include <cstdint>
#include <span>
#include <vector>

namespace astral::seer {

struct FlowSet {
  std::vector<std::uint32_t> offset{0};
  std::vector<std::int32_t> resources;

  size_t size() const { return offset.size() - 1; }
  void add(std::span<const int> path) {
    resources.insert(resources.end(), path.begin(), path.end());
    offset.push_back(std::uint32_t(resources.size()));
  }
  std::span<const std::int32_t> path(size_t flow) const {
    return {resources.data() + offset[flow], offset[flow + 1] - offset[flow]};
  }
};

// Max-min fair rates (same unit as capacity). Subflows with active[f] == 0 are ignored and get 0;
// an empty `active` means all. A subflow crossing a resource of capacity 0 gets 0. Exact: each
// resource fills in order of its fair level, found with a lazy min-heap (levels only rise), in
// O((F * hops + R) log R).
std::vector<double> max_min_rates(std::span<const double> capacity, const FlowSet& flows,
                                  std::span<const char> active = {});

struct Transfer {
  double bytes = 0;
  std::uint32_t first_flow = 0;  // its subflows are [first_flow, first_flow + flow_count)
  std::uint32_t flow_count = 1;
};

struct EventSimResult {
  std::vector<double> finish_s;  // per transfer; +inf when it can never finish (a zero rate)
  double makespan_s = 0;         // latest finite finish
  int events = 0;                // max-min solves
  size_t stalled = 0;            // transfers that never finish
};

// Runs all transfers from t = 0 until each finishes, re-solving rates after each completion.
// Transfers finishing within `batch_tolerance` (relative to the elapsed time) of the first one are
// completed in the same event at their own finish times, which bounds the number of solves.
EventSimResult simulate_transfers(std::span<const double> capacity_bytes_per_s, const FlowSet& flows,
                                  std::span<const Transfer> transfers,
                                  double batch_tolerance = 1e-9);

}  // namespace astral::seer
