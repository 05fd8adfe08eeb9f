// Simulator behaviour on generated fabrics: methods agree, PXN keeps traffic on its rail, faults,
// placement, MoE skew and several jobs.
#include <astral/seer/flowsim.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace astral;
using namespace astral::seer;

namespace {

topo::Fabric make(topo::FabricKind kind, int gpus, int radix, bool dual = false) {
  topo::GenerateOptions o;
  o.kind = kind;
  o.gpus = gpus;
  o.radix = radix;
  o.dual_plane = dual;
  return topo::generate_fabric(o);
}

FlowSimOptions opts(TrafficPattern pattern, const char* routing) {
  FlowSimOptions o;
  o.pattern = pattern;
  o.routing = *topo::parse_routing(routing);
  o.bytes = 16.0 * 1024 * 1024;
  return o;
}

const LoadDistribution* load_class(const FlowSimResult& r, const std::string& name) {
  for (const auto& d : r.loads)
    if (d.link_class == name) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("the streaming max-load completion equals the event simulation") {
  topo::GenerateOptions g;
  g.kind = topo::FabricKind::kFatTree;
  g.gpus = 128;
  g.radix = 16;
  g.tiers = 3;  // two ECMP stages
  topo::Fabric f = topo::generate_fabric(g);
  for (const char* routing : {"ecmp", "same-rail"}) {
    auto o = opts(TrafficPattern::kAllToAll, routing);
    o.goodput_limit = 0;
    auto fast = simulate(f, o);
    o.force_event = true;
    auto slow = simulate(f, o);
    CHECK(fast.method == "max-load");
    CHECK(slow.method == "event");
    CHECK(slow.events > 1);
    CHECK(fast.completion_s == Approx(slow.completion_s).epsilon(2e-3));  // event batching
    o.event_tolerance = 0;
    auto exact = simulate(f, o);
    CHECK(fast.completion_s == Approx(exact.completion_s).epsilon(1e-9));
  }
}

TEST_CASE("pinned same-rail stays balanced across same-rail pods joined by the core") {
  // Radix 16: a pod is 512 GPUs, so 1,024 are two pods and half the same-rail traffic crosses the
  // core. The leaves of one rail sit `rails` apart in index order, a multiple of a spine's eight
  // uplinks: pinning by raw leaf index once put every flow of a spine on one core link (0.25).
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 1024, 16);
  auto o = opts(TrafficPattern::kAllToAll, "same-rail-pinned");
  o.goodput_limit = 0;
  auto r = simulate(f, o);
  const LoadDistribution* up = load_class(r, "spine->core");
  REQUIRE(up);
  CHECK(up->mean > 0.4);  // the core carries the traffic between the pods
  CHECK(up->max == Approx(up->mean).epsilon(1e-9));
  CHECK(r.efficiency == Approx(1.0).epsilon(1e-9));
}

TEST_CASE("all-to-all: ideal, efficiency and nccl-tests bandwidths are consistent") {
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 512, 32);
  auto r = simulate(f, opts(TrafficPattern::kAllToAll, "same-rail-pinned"));
  // 64 hosts x 8 GPUs, 400G NICs: each GPU sends (512-8)/512 of 16 MiB over its 50 GB/s NIC.
  double ideal = 16.0 * 1024 * 1024 * (512 - 8) / 512 / 50e9;
  CHECK(r.ideal_s == Approx(ideal));
  CHECK(r.efficiency == Approx(r.ideal_s / r.completion_s));
  CHECK(r.algbw_gbytes_s == Approx(16.0 * 1024 * 1024 / r.completion_s / 1e9));
  CHECK(r.busbw_gbytes_s == Approx(r.algbw_gbytes_s * 511 / 512));
  CHECK(r.efficiency == Approx(1.0).epsilon(1e-9));  // pinned same-rail: perfectly balanced
  CHECK(r.gpus == 512);
  auto json = to_json(r);
  CHECK(json["efficiency"].get<double>() == Approx(r.efficiency));
  CHECK(format_result(r).find("efficiency") != std::string::npos);
}

TEST_CASE("same-rail routing keeps all-to-all off the core, direct ECMP does not") {
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 512, 32);
  auto pxn = simulate(f, opts(TrafficPattern::kAllToAll, "same-rail"));
  const auto* core = load_class(pxn, "spine->core");
  REQUIRE(core);
  CHECK(core->max == 0);
  REQUIRE(load_class(pxn, "nvlink"));
  CHECK(load_class(pxn, "nvlink")->max > 0);
  auto direct = simulate(f, opts(TrafficPattern::kAllToAll, "ecmp"));
  CHECK(load_class(direct, "spine->core")->max > 0);
  // PXN shares one connection per (NIC, remote GPU): 8x fewer network connections.
  CHECK(pxn.connections < direct.connections / 4);
}

TEST_CASE("rail-only needs PXN for cross-rail traffic") {
  topo::Fabric f = make(topo::FabricKind::kRailOnly, 256, 32);
  auto direct = simulate(f, opts(TrafficPattern::kAllToAll, "ecmp"));
  CHECK(direct.unroutable > 0);
  bool noted = false;
  for (const auto& n : direct.notes) noted |= n.find("--routing same-rail") != std::string::npos;
  CHECK(noted);
  auto pxn = simulate(f, opts(TrafficPattern::kAllToAll, "same-rail"));
  CHECK(pxn.unroutable == 0);
  CHECK(pxn.efficiency > 0.5);
}

TEST_CASE("one port of a dual-ToR NIC down halves that NIC, the job slows to its pace") {
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 2048, 128, /*dual=*/true);
  auto o = opts(TrafficPattern::kAllToAll, "same-rail-pinned");
  o.goodput_limit = 0;
  auto healthy = simulate(f, o);
  CHECK(healthy.efficiency == Approx(1.0).epsilon(1e-6));
  o.fail_links = {"node0001:mlx5_0:1"};
  auto degraded = simulate(f, o);
  CHECK(degraded.efficiency == Approx(0.5).epsilon(0.02));
  CHECK(degraded.unroutable == 0);
  REQUIRE_FALSE(degraded.notes.empty());
  o.fail_links = {"no-such-switch:1"};
  CHECK_THROWS_WITH(simulate(f, o), Catch::Contains("no-such-switch:1"));
}

TEST_CASE("a spine link down moves its flows to the surviving members") {
  topo::Fabric f = make(topo::FabricKind::kFatTree, 1024, 64);
  auto o = opts(TrafficPattern::kAllToAll, "ecmp");
  o.goodput_limit = 0;
  auto healthy = simulate(f, o);
  o.fail_random_links = 50;
  auto degraded = simulate(f, o);
  CHECK(degraded.unroutable == 0);
  CHECK(degraded.efficiency < healthy.efficiency);
}

TEST_CASE("pinning works for packed jobs and degrades when the placement is fragmented") {
  // Meta's experience: destination pinning needs full racks.
  topo::Fabric f = make(topo::FabricKind::kFatTree, 2048, 64);
  auto o = opts(TrafficPattern::kRingAllReduce, "pinned");
  o.goodput_limit = 0;
  o.fill = 0.5;
  auto packed = simulate(f, o);
  CHECK(packed.efficiency == Approx(1.0).epsilon(1e-6));
  o.placement = Placement::kFragmented;
  o.trials = 4;
  auto fragmented = simulate(f, o);
  CHECK(fragmented.efficiency < 0.75);
}

TEST_CASE("MoE skew makes the hot experts' NICs the bottleneck and is simulated by events") {
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 128, 16);
  auto o = opts(TrafficPattern::kMoeAllToAll, "same-rail-pinned");
  o.moe_skew = 0.0;
  auto flat = simulate(f, o);
  o.moe_skew = 1.2;
  auto skewed = simulate(f, o);
  CHECK(skewed.method == "event");
  CHECK(skewed.completion_s > 2 * flat.completion_s);
  // The ideal accounts for the hot NIC, so efficiency stays meaningful.
  CHECK(skewed.efficiency > 0.5);
  CHECK(skewed.efficiency <= 1.0 + 1e-9);
}

TEST_CASE("beyond the event limit a non-uniform pattern gets proven bounds") {
  topo::Fabric f = make(topo::FabricKind::kSameRailT2, 128, 16);
  auto o = opts(TrafficPattern::kMoeAllToAll, "same-rail");
  o.event_sim_limit = 100;
  o.goodput_limit = 0;
  auto r = simulate(f, o);
  CHECK(r.method == "bounds");
  CHECK(r.completion_upper_s >= r.completion_s);
  o.event_sim_limit = 1000000;
  auto exact = simulate(f, o);
  CHECK(exact.completion_s >= r.completion_s * (1 - 1e-9));
  CHECK(exact.completion_s <= r.completion_upper_s * (1 + 1e-9));
}

TEST_CASE("several jobs on fragmented hosts: one outcome per job") {
  topo::Fabric f = make(topo::FabricKind::kFatTree, 512, 32);
  auto o = opts(TrafficPattern::kAllToAll, "same-rail");
  o.jobs = 4;
  o.fill = 0.75;
  o.placement = Placement::kFragmented;
  o.goodput_limit = 0;
  auto r = simulate(f, o);
  REQUIRE(r.job_outcomes.size() == 4);
  CHECK(r.hosts == 48);
  for (const auto& j : r.job_outcomes) {
    CHECK(j.hosts == 12);
    CHECK(j.efficiency > 0);
    CHECK(j.efficiency <= 1.0 + 1e-9);
  }
  CHECK(r.method == "event");
}

TEST_CASE("tree and ring all-reduce and more QPs behave as expected") {
  topo::Fabric f = make(topo::FabricKind::kFatTree, 512, 32);
  auto ring = simulate(f, opts(TrafficPattern::kRingAllReduce, "ecmp"));
  CHECK(ring.efficiency == Approx(1.0).epsilon(1e-6));  // packed ring crosses each leaf once
  CHECK(ring.busbw_gbytes_s == Approx(ring.algbw_gbytes_s * 2 * 511 / 512));
  auto tree = simulate(f, opts(TrafficPattern::kTreeAllReduce, "ecmp"));
  CHECK(tree.efficiency > 0);
  CHECK(tree.efficiency <= 1.0 + 1e-9);
  auto o = opts(TrafficPattern::kPermutation, "ecmp");
  o.trials = 8;
  auto one = simulate(f, o);
  o.qps = 8;
  auto eight = simulate(f, o);
  CHECK(*eight.goodput_adaptive > *one.goodput_adaptive + 0.1);
}

TEST_CASE("bad options are rejected naming the option") {
  topo::Fabric f = make(topo::FabricKind::kFatTree, 64, 16);
  auto o = opts(TrafficPattern::kAllToAll, "ecmp");
  o.qps = 0;
  CHECK_THROWS_WITH(simulate(f, o), Catch::Contains("--qps"));
  o.qps = 1;
  o.jobs = 100;
  CHECK_THROWS_WITH(simulate(f, o), Catch::Contains("--jobs"));
  o.jobs = 1;
  o.bytes = -1;
  CHECK_THROWS_WITH(simulate(f, o), Catch::Contains("--bytes"));
}
