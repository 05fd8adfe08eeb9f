// The ECMP collision baselines of performance-models.md section 9, reproduced through the whole
// stack (generator, router, traffic, max-min): one plane of a non-blocking leaf-spine with L leaves,
// D hosts per leaf and D spines, one-GPU hosts, capacities equal to the NIC rate, random hashing.
// Tolerance: the reference's Monte Carlo tolerance (+-0.015) plus the standard error of our mean.
#include <astral/seer/flowsim.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>

using namespace astral;
using namespace astral::seer;

namespace {

// L x D: rail-only fabric of one-GPU hosts on 2D-port switches (D down, D up, D spines).
topo::Fabric leaf_spine(int leaves, int hosts_per_leaf) {
  topo::GenerateOptions o;
  o.kind = topo::FabricKind::kRailOnly;
  o.gpus_per_host = 1;
  o.gpus = leaves * hosts_per_leaf;
  o.radix = 2 * hosts_per_leaf;
  return topo::generate_fabric(o);
}

FlowSimResult permutation(const topo::Fabric& f, int qps, int trials) {
  FlowSimOptions o;
  o.pattern = TrafficPattern::kPermutation;
  o.qps = qps;
  o.trials = trials;
  o.seed = 2024;
  return simulate(f, o);
}

FlowSimResult all_to_all(const topo::Fabric& f, int trials, const char* routing = "ecmp") {
  FlowSimOptions o;
  o.pattern = TrafficPattern::kAllToAll;
  o.cross_segment_only = true;  // inter-leaf pairs, as in the baseline
  o.routing = *topo::parse_routing(routing);
  o.trials = trials;
  o.seed = 99;
  o.goodput_limit = 0;
  return simulate(f, o);
}

constexpr double kTolerance = 0.015;

}  // namespace

TEST_CASE("fabric shape of the baseline: L x D with D spines and one uplink per leaf-spine pair") {
  topo::Fabric f = leaf_spine(4, 16);
  int leaves = 0, spines = 0;
  for (const auto& s : f.switches()) (s.tier == 1 ? leaves : spines)++;
  CHECK(leaves == 4);
  CHECK(spines == 16);
  CHECK(f.links().size() == 64 + 4 * 16);
}

TEST_CASE("permutation goodput 4 x 16: 1, 4 and 16 QPs (section 9.2)") {
  topo::Fabric f = leaf_spine(4, 16);
  auto one = permutation(f, 1, 300);
  CHECK(*one.goodput_adaptive == Approx(0.533).margin(kTolerance));
  auto four = permutation(f, 4, 200);
  CHECK(*four.goodput_adaptive == Approx(0.819).margin(kTolerance));
  CHECK(*four.goodput_equal_split == Approx(0.547).margin(kTolerance));
  auto sixteen = permutation(f, 16, 100);
  CHECK(*sixteen.goodput_adaptive == Approx(0.962).margin(kTolerance));
  CHECK(*sixteen.goodput_equal_split == Approx(0.676).margin(kTolerance));
}

TEST_CASE("permutation goodput 8 x 32: about 0.50 with one flow per host (section 9.2)") {
  topo::Fabric f = leaf_spine(8, 32);
  auto one = permutation(f, 1, 60);
  CHECK(*one.goodput_adaptive == Approx(0.504).margin(kTolerance));
  auto four = permutation(f, 4, 30);
  CHECK(*four.goodput_adaptive == Approx(0.809).margin(kTolerance));
  CHECK(*four.goodput_equal_split == Approx(0.544).margin(kTolerance));
}

TEST_CASE("uniform all-to-all, single ECMP stage: 0.739 / 0.839 / 0.872 (section 9.3)") {
  CHECK(all_to_all(leaf_spine(4, 16), 200).efficiency == Approx(0.739).margin(kTolerance));
  CHECK(all_to_all(leaf_spine(8, 32), 40).efficiency == Approx(0.839).margin(kTolerance));
  CHECK(all_to_all(leaf_spine(16, 32), 12).efficiency == Approx(0.872).margin(kTolerance));
}

TEST_CASE("pinning by destination port balances a uniform all-to-all exactly") {
  auto r = all_to_all(leaf_spine(8, 32), 1, "pinned");
  CHECK(r.efficiency == Approx(1.0));
  CHECK(r.method == "max-load");
}

TEST_CASE("single hop under one leaf needs no ECMP: permutation goodput is 1") {
  topo::Fabric f = leaf_spine(1, 32);
  auto r = permutation(f, 1, 5);
  CHECK(*r.goodput_adaptive == Approx(1.0));
  CHECK(r.efficiency == Approx(1.0));
}
