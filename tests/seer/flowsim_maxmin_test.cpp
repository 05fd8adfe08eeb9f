// The fluid core: max-min fair rates by progressive filling, and event-driven completion.
#include <astral/seer/flowsim_maxmin.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

using namespace astral::seer;

namespace {

FlowSet make_flows(std::initializer_list<std::vector<int>> paths) {
  FlowSet s;
  for (const auto& p : paths) s.add(p);
  return s;
}

}  // namespace

TEST_CASE("max-min: the textbook two-link example") {
  // Link 0 (cap 1): f0, f1. Link 1 (cap 1): f0, f2, f3. Link 1 fills first at 1/3.
  FlowSet flows = make_flows({{0, 1}, {0}, {1}, {1}});
  std::vector<double> cap = {1, 1};
  auto rate = max_min_rates(cap, flows);
  CHECK(rate[0] == Approx(1.0 / 3));
  CHECK(rate[1] == Approx(2.0 / 3));
  CHECK(rate[2] == Approx(1.0 / 3));
  CHECK(rate[3] == Approx(1.0 / 3));
}

TEST_CASE("max-min: parking lot, unequal capacities, dead links and inactive flows") {
  // A long flow over links 0,1,2 and one short flow per link; link 1 is faster.
  FlowSet flows = make_flows({{0, 1, 2}, {0}, {1}, {2}});
  std::vector<double> cap = {10, 30, 10};
  auto rate = max_min_rates(cap, flows);
  CHECK(rate[0] == Approx(5));
  CHECK(rate[1] == Approx(5));
  CHECK(rate[2] == Approx(25));
  CHECK(rate[3] == Approx(5));

  cap[2] = 0;  // a link that is down starves what crosses it and frees the rest
  rate = max_min_rates(cap, flows);
  CHECK(rate[0] == 0);
  CHECK(rate[3] == 0);
  CHECK(rate[1] == Approx(10));
  CHECK(rate[2] == Approx(30));

  std::vector<char> active = {0, 1, 1, 1};
  cap[2] = 10;
  rate = max_min_rates(cap, flows, active);
  CHECK(rate[0] == 0);
  CHECK(rate[1] == Approx(10));
}

TEST_CASE("max-min rates are feasible and every flow has a saturated bottleneck") {
  std::mt19937 rng(42);
  for (int round = 0; round < 30; ++round) {
    int resources = 12, n = 40;
    std::vector<double> cap(resources);
    for (double& c : cap) c = std::uniform_real_distribution<double>(1, 10)(rng);
    FlowSet flows;
    for (int f = 0; f < n; ++f) {
      std::vector<int> path;
      for (int r = 0; r < resources; ++r)
        if (rng() % 4 == 0) path.push_back(r);
      if (path.empty()) path.push_back(int(rng() % resources));
      flows.add(path);
    }
    auto rate = max_min_rates(cap, flows);
    std::vector<double> used(resources, 0.0), top(resources, 0.0);
    for (int f = 0; f < n; ++f)
      for (int r : flows.path(f)) used[r] += rate[f], top[r] = std::max(top[r], rate[f]);
    for (int r = 0; r < resources; ++r) CHECK(used[r] <= cap[r] * (1 + 1e-9));
    for (int f = 0; f < n; ++f) {
      bool bottleneck = false;
      for (int r : flows.path(f))
        if (used[r] >= cap[r] * (1 - 1e-9) && rate[f] >= top[r] * (1 - 1e-9)) bottleneck = true;
      CHECK(bottleneck);
    }
  }
}

TEST_CASE("event simulation re-shares a link when a transfer finishes") {
  FlowSet flows = make_flows({{0}, {0}});
  std::vector<double> cap = {1};
  std::vector<Transfer> transfers = {{1, 0, 1}, {2, 1, 1}};
  auto r = simulate_transfers(cap, flows, transfers);
  CHECK(r.finish_s[0] == Approx(2));  // both at 1/2 until the first is done
  CHECK(r.finish_s[1] == Approx(3));  // then alone at 1
  CHECK(r.makespan_s == Approx(3));
  CHECK(r.events == 2);
}

TEST_CASE("an adaptive transfer drains through the sum of its QPs' rates") {
  // One transfer with two QPs on links 0 and 1; a competitor on link 0.
  FlowSet flows = make_flows({{0}, {1}, {0}});
  std::vector<double> cap = {2, 2};
  std::vector<Transfer> transfers = {{6, 0, 2}, {1, 2, 1}};
  auto r = simulate_transfers(cap, flows, transfers);
  CHECK(r.finish_s[1] == Approx(1));   // 1 byte at 1
  CHECK(r.finish_s[0] == Approx(1.75));  // 3 bytes by t=1 (1 + 2), then 3 more at 2 + 2
}

TEST_CASE("a transfer with no capacity is reported as stalled, not waited for") {
  FlowSet flows = make_flows({{0}, {1}});
  std::vector<double> cap = {1, 0};
  std::vector<Transfer> transfers = {{1, 0, 1}, {1, 1, 1}};
  auto r = simulate_transfers(cap, flows, transfers);
  CHECK(r.stalled == 1);
  CHECK(std::isinf(r.finish_s[1]));
  CHECK(r.makespan_s == Approx(1));
}

TEST_CASE("equal-size transfers finish exactly at max(load / capacity)") {
  // The identity the streaming "max-load" method relies on, on random instances.
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    int resources = 10, n = 30;
    std::vector<double> cap(resources);
    for (double& c : cap) c = std::uniform_real_distribution<double>(1, 5)(rng);
    FlowSet flows;
    std::vector<Transfer> transfers;
    std::vector<double> load(resources, 0.0);
    // Per-resource uniform sizes: each resource class carries one size.
    for (int f = 0; f < n; ++f) {
      std::vector<int> path = {int(rng() % resources)};
      if (rng() % 2) {
        int other = int(rng() % resources);
        if (other != path[0]) path.push_back(other);
      }
      flows.add(path);
      transfers.push_back({3.0, std::uint32_t(f), 1});
      for (int r : path) load[r] += 3.0;
    }
    double bound = 0;
    for (int r = 0; r < resources; ++r) bound = std::max(bound, load[r] / cap[r]);
    auto sim = simulate_transfers(cap, flows, transfers);
    CHECK(sim.makespan_s == Approx(bound).epsilon(1e-9));
  }
}
