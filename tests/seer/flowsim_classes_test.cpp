// The class engine against the per-connection simulator (the reference) on the same fabric, seed
// and options: every design, routing, placement and fault case gives the same completion, loads
// and counts. The issue asks for agreement within 0.5 %; the engine hashes every QP as the
// reference does, so it agrees to rounding, and the test asserts that (1e-9), which is stronger.
// Sizes are 1K-4K GPUs so that the reference stays quick under ASan; 16K is in bench_flowsim.
#include <astral/seer/flowsim.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>

using namespace astral;
using namespace astral::seer;

namespace {

topo::Fabric build_fabric(topo::FabricKind kind, int gpus, int radix, int planes = 1, int tiers = 0) {
  topo::GenerateOptions o;
  o.kind = kind;
  o.gpus = gpus;
  o.radix = radix;
  o.planes = planes;
  o.tiers = tiers;
  return topo::generate_fabric(o);
}

FlowSimOptions classes_opts(const char* routing) {
  FlowSimOptions o;
  o.routing = *topo::parse_routing(routing);
  o.bytes = 64.0 * 1024 * 1024;
  o.goodput_limit = 0;    // both engines stream
  o.event_sim_limit = 0;  // several jobs: bounds in both
  return o;
}

// Runs both engines and checks that they agree.
FlowSimResult engines_agree(const topo::Fabric& f, FlowSimOptions o) {
  o.engine = SimEngine::kConnections;
  FlowSimResult ref = simulate(f, o);
  o.engine = SimEngine::kClasses;
  FlowSimResult fast = simulate(f, o);
  INFO(f.name() << ", " << ref.routing << ", " << ref.placement << ", method " << ref.method);
  CHECK(ref.engine == "connections");
  CHECK(fast.engine == "classes");
  CHECK(fast.classes > 0);
  CHECK(fast.method == ref.method);
  CHECK(fast.connections == ref.connections);
  CHECK(fast.subflows == ref.subflows);
  CHECK(fast.unroutable == ref.unroutable);
  CHECK(fast.completion_s == Approx(ref.completion_s).epsilon(1e-9));
  CHECK(fast.completion_upper_s == Approx(ref.completion_upper_s).epsilon(1e-9));
  CHECK(fast.ideal_s == Approx(ref.ideal_s).epsilon(1e-9));
  CHECK(fast.efficiency == Approx(ref.efficiency).epsilon(1e-9));
  REQUIRE(fast.loads.size() == ref.loads.size());
  for (size_t i = 0; i < ref.loads.size(); ++i) {
    INFO("link class " << ref.loads[i].link_class);
    CHECK(fast.loads[i].link_class == ref.loads[i].link_class);
    CHECK(fast.loads[i].max == Approx(ref.loads[i].max).epsilon(1e-9));
    CHECK(fast.loads[i].mean == Approx(ref.loads[i].mean).epsilon(1e-9));
    CHECK(fast.loads[i].p99 == Approx(ref.loads[i].p99).epsilon(1e-9));
  }
  return fast;
}

}  // namespace

TEST_CASE("classes agree with per-connection routing on every design and routing") {
  const topo::Fabric same_rail = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  const topo::Fabric fat2 = build_fabric(topo::FabricKind::kFatTree, 1024, 64);
  const topo::Fabric fat3 = build_fabric(topo::FabricKind::kFatTree, 1024, 32, 1, 3);
  const topo::Fabric rail_only = build_fabric(topo::FabricKind::kRailOnly, 1024, 32);
  // Two same-rail pods (radix 16): same-rail traffic between pods crosses the core.
  const topo::Fabric same_rail_pods = build_fabric(topo::FabricKind::kSameRailT2, 1024, 16);
  REQUIRE(same_rail_pods.hosts().back().pod == 1);
  for (const topo::Fabric* f : {&same_rail, &fat2, &fat3, &rail_only, &same_rail_pods})
    for (const char* routing : {"ecmp", "pinned", "same-rail", "same-rail-pinned"}) {
      FlowSimResult r = engines_agree(*f, classes_opts(routing));
      CHECK(r.method == "max-load");
      CHECK(r.exact_connections == 0);  // no faults: nothing is routed one by one
    }
}

TEST_CASE("classes agree with polarisation, several QPs, planes and cross-segment traffic") {
  const topo::Fabric fat3 = build_fabric(topo::FabricKind::kFatTree, 1024, 32, 1, 3);
  auto o = classes_opts("ecmp");
  o.routing.polarisation = 0.2;
  o.qps = 2;
  engines_agree(fat3, o);
  o = classes_opts("same-rail");
  o.cross_segment_only = true;
  engines_agree(fat3, o);
  for (int planes : {2, 4}) {
    const topo::Fabric multi = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32, planes);
    for (const char* routing : {"ecmp", "same-rail"}) {
      auto p = classes_opts(routing);
      p.qps = 2;
      engines_agree(multi, p);
    }
  }
  // 4,096 GPUs, the size where classes start to matter, with PXN (2.1 M connections).
  engines_agree(build_fabric(topo::FabricKind::kSameRailT2, 4096, 64), classes_opts("same-rail"));
}

TEST_CASE("classes agree on placements and several jobs") {
  const topo::Fabric f = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  auto o = classes_opts("same-rail");
  o.placement = Placement::kFragmented;
  o.fill = 0.75;
  engines_agree(f, o);
  o.jobs = 3;
  o.fill = 0.9;
  FlowSimResult r = engines_agree(f, o);
  CHECK(r.method == "bounds");  // jobs of different sizes: subflows of different sizes
  o.placement = Placement::kPacked;
  o.routing = *topo::parse_routing("ecmp");
  engines_agree(f, o);
}

TEST_CASE("classes agree under faults, routing only the broken connections one by one") {
  const topo::Fabric dual = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32, 2);
  const topo::Fabric fat3 = build_fabric(topo::FabricKind::kFatTree, 1024, 32, 1, 3);
  const topo::Fabric same_rail = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  const topo::Fabric same_rail_pods = build_fabric(topo::FabricKind::kSameRailT2, 1024, 16);
  for (const char* routing : {"ecmp", "same-rail"}) {
    auto o = classes_opts(routing);
    o.fail_links = {"node0001:mlx5_0:1"};  // dual-ToR failover: port 2 carries port 1's QPs
    FlowSimResult r = engines_agree(dual, o);
    CHECK(r.exact_connections > 0);
    CHECK(r.exact_connections < r.connections / 50);
    o.fail_links = {};
    o.fail_switches = {"r3-02a"};  // a whole ToR
    engines_agree(dual, o);
    o.fail_switches = {"s0-00"};  // a same-rail spine
    r = engines_agree(same_rail, o);
    CHECK(r.exact_connections == 0);  // a spine changes the ECMP groups, which classes follow
    o.fail_switches = {"ag1-03"};
    engines_agree(fat3, o);
    o.fail_switches = {"s2p1-03"};  // a rail spine of the second pod
    engines_agree(same_rail_pods, o);
    o.fail_switches = {};
    o.fail_random_links = 40;
    engines_agree(fat3, o);
  }
}

TEST_CASE("patterns without classes fall back to per-connection routing, saying so") {
  const topo::Fabric f = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  for (TrafficPattern p : {TrafficPattern::kMoeAllToAll, TrafficPattern::kRingAllReduce,
                           TrafficPattern::kTreeAllReduce, TrafficPattern::kPermutation}) {
    auto o = classes_opts("same-rail");
    o.pattern = p;
    o.engine = SimEngine::kClasses;
    FlowSimResult fast = simulate(f, o);
    o.engine = SimEngine::kConnections;
    FlowSimResult ref = simulate(f, o);
    CHECK(fast.engine == "connections");
    CHECK(fast.completion_s == ref.completion_s);
    bool noted = false;
    for (const auto& n : fast.notes) noted = noted || n.find("per-connection routing") != std::string::npos;
    CHECK(noted);
  }
}

TEST_CASE("a simulation beyond the memory limit is refused up front with the estimate") {
  const topo::Fabric f = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  auto o = classes_opts("same-rail");
  o.memory_limit_gib = 0.001;
  try {
    simulate(f, o);
    FAIL("expected a refusal");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("needs about") != std::string::npos);
    CHECK(std::string(e.what()).find("--memory-limit") != std::string::npos);
  }
  CHECK(estimate_memory_gib(f, classes_opts("same-rail")) > 0);
}

TEST_CASE("a failure naming an unknown element is refused naming it") {
  const topo::Fabric f = build_fabric(topo::FabricKind::kSameRailT2, 1024, 32);
  auto o = classes_opts("same-rail");
  o.fail_switches = {"s9-99"};
  CHECK_THROWS_WITH(simulate(f, o), Catch::Contains("'s9-99'"));
}
