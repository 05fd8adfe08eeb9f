// Generators and `fabric show` arithmetic: switch and link counts, tiers, oversubscription,
// bisection, optics and the size limits of each design.
#include <astral/topo/fabric_generate.hpp>
#include <astral/topo/fabric_summary.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <catch2/catch.hpp>
#include <set>

using namespace astral::topo;

namespace {

GenerateOptions options(FabricKind kind, int gpus, int radix = 128) {
  GenerateOptions o;
  o.kind = kind;
  o.gpus = gpus;
  o.radix = radix;
  return o;
}

const TierSummary& tier(const FabricSummary& s, int t) { return s.tiers.at(t - 1); }

}  // namespace

TEST_CASE("two-tier fat tree: leaves per rail and segment, spines shared by all rails") {
  Fabric f = generate_fabric(options(FabricKind::kFatTree, 1024, 64));
  FabricSummary s = summarize(f);
  REQUIRE(s.tiers.size() == 2);
  // 32 hosts per 64-port leaf (32 down, 32 up) -> 4 segments x 8 rails = 32 leaves.
  CHECK(tier(s, 1).switches == 32);
  CHECK(tier(s, 2).switches == 32);
  CHECK(tier(s, 2).ports_used == 32 * 32);
  CHECK(tier(s, 1).oversubscription == Approx(1.0));
  CHECK(s.bisection_gbps == Approx(1024 * 400 / 2.0));
  CHECK(s.bisection_per_gpu_gbps == Approx(400));
  // 1024 host links + 1024 leaf-spine links, a transceiver at each end of each.
  CHECK(s.optics == 4096);
  CHECK(s.cross_rail_network);
  CHECK(f.find_switch("sp-31"));
  CHECK(f.switches()[*f.find_switch("sp-31")].rail == kAnyRail);
}

TEST_CASE("fat tree grows a third tier when a spine cannot reach every leaf") {
  auto o = options(FabricKind::kFatTree, 4096, 128);
  CHECK(summarize(generate_fabric(o)).tiers.size() == 2);  // 8 rails x 8 segments = 64 <= 128
  o.gpus = 16384;
  Fabric f = generate_fabric(o);
  FabricSummary s = summarize(f);
  REQUIRE(s.tiers.size() == 3);
  // Pods of 8 segments (64 down ports / 8 rails) x 64 hosts x 8 GPUs = 4096 GPUs; 4 pods.
  CHECK(f.hosts().back().pod == 3);
  CHECK(tier(s, 2).switches == 4 * 64);
  CHECK(tier(s, 2).oversubscription == Approx(1.0));
  CHECK(s.bisection_per_gpu_gbps == Approx(400));
  o.tiers = 2;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("--tiers 3"));
}

TEST_CASE("same-rail Tier-2: spines join one rail, the core joins rails") {
  Fabric f = generate_fabric(options(FabricKind::kSameRailT2, 4096, 128));
  FabricSummary s = summarize(f);
  REQUIRE(s.tiers.size() == 3);
  auto spine = f.find_switch("s5-63");
  REQUIRE(spine);
  CHECK(f.switches()[*spine].rail == 5);
  // Every leaf a same-rail spine touches serves the spine's rail.
  for (int link : f.switch_links(*spine)) {
    const Link& l = f.links()[link];
    if (l.a.sw != *spine) CHECK(f.switches()[l.a.sw].rail == 5);
  }
  CHECK(s.cross_rail_network);
  CHECK(s.bisection_per_gpu_gbps == Approx(400));
}

TEST_CASE("same-rail Tier-2 beyond one spine's reach: pods of rail spines joined by the core") {
  // Radix 16, 4 GPUs and rails per host: 8 hosts per leaf, 8 leaves per rail spine group, so a pod
  // is 64 hosts; 160 hosts are two full pods and a half one. A core joins radix / rails = 4 pods.
  auto o = options(FabricKind::kSameRailT2, 160 * 4, 16);
  o.gpus_per_host = 4;
  Fabric f = generate_fabric(o);
  FabricSummary s = summarize(f);
  REQUIRE(s.tiers.size() == 3);
  CHECK(f.hosts().front().pod == 0);
  CHECK(f.hosts().back().pod == 2);
  CHECK(tier(s, 2).switches == 3 * 4 * 8);  // 8 spines per (pod, rail)
  CHECK(tier(s, 1).oversubscription == Approx(1.0));
  // The half pod's spines keep every core uplink: 20 of 24 leaf slots per rail are used.
  CHECK(tier(s, 2).oversubscription == Approx(20.0 / 24.0));
  auto spine = f.find_switch("s3p2-07");
  REQUIRE(spine);
  CHECK(f.switches()[*spine].pod == 2);
  CHECK(f.switches()[*spine].rail == 3);
  // A rail spine joins only the leaves of its rail and pod, and every core joins all 12 rail
  // spines with the same index.
  for (int link : f.switch_links(*spine)) {
    const Link& l = f.links()[link];
    const Switch& other = f.switches()[l.a.sw == *spine ? l.b.sw : l.a.sw];
    if (other.tier == 1) {
      CHECK(other.rail == 3);
      CHECK(other.pod == 2);
    }
  }
  auto core = f.find_switch("c07-00");
  REQUIRE(core);
  std::set<int> spines;
  for (int link : f.switch_links(*core)) spines.insert(f.links()[link].a.sw);
  CHECK(spines.size() == 3 * 4);
  // Same-rail traffic between pods goes up to the core: leaf, spine, core, spine, leaf.
  Router router(f);
  int src = 0, dst = 150 * 4;  // GPU 0 of host 0 (pod 0) and of host 150 (pod 2), rail 0
  long total = 0;
  auto paths = router.candidates(src, dst, 4, &total);
  REQUIRE_FALSE(paths.empty());
  CHECK(paths.front().switches.size() == 5);
  CHECK(total == 8 * 8);  // a spine of 8, then a core group of 8
  o.gpus = 5 * 64 * 4;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("at most 1024 GPUs"));
}

TEST_CASE("rail-only has no path between rails in the network") {
  Fabric f = generate_fabric(options(FabricKind::kRailOnly, 2048, 64));
  FabricSummary s = summarize(f);
  CHECK_FALSE(s.cross_rail_network);
  CHECK(s.tiers.size() == 2);
  CHECK(format_summary(s).find("NVLink (PXN)") != std::string::npos);
}

TEST_CASE("oversubscription lands on the top tier boundary of each design") {
  // Full switches so that the ratio is exact: 48 segments of 32 one-GPU hosts fill a 64-port
  // spine split 48 down / 16 up.
  auto o = options(FabricKind::kSameRailT2, 48 * 32, 64);
  o.gpus_per_host = 1;
  o.oversubscription = 3;
  FabricSummary s = summarize(generate_fabric(o));
  CHECK(tier(s, 1).oversubscription == Approx(1.0));
  CHECK(tier(s, 2).oversubscription == Approx(3.0));
  // A cut between rails crosses the oversubscribed core.
  CHECK(s.bisection_per_gpu_gbps == Approx(400.0 / 3));
  // 2-tier fat tree: 64-port leaves split 42 down / 21 up; 8 full segments of 42 hosts.
  o = options(FabricKind::kFatTree, 8 * 42 * 8, 64);
  o.oversubscription = 2;
  s = summarize(generate_fabric(o));
  REQUIRE(s.tiers.size() == 2);
  CHECK(tier(s, 1).oversubscription == Approx(2.0));
  CHECK(s.bisection_per_gpu_gbps == Approx(200));
}

TEST_CASE("bundling builds fewer spines with parallel links and the same capacity") {
  auto o = options(FabricKind::kSameRailT2, 1024, 128);
  FabricSummary spread = summarize(generate_fabric(o));
  o.bundle = true;
  FabricSummary bundled = summarize(generate_fabric(o));
  CHECK(tier(bundled, 2).switches < tier(spread, 2).switches);
  CHECK(tier(bundled, 2).down_gbps == Approx(tier(spread, 2).down_gbps));
  CHECK(bundled.bisection_gbps == Approx(spread.bisection_gbps));
}

TEST_CASE("each design states its size limit and refuses beyond it") {
  // A same-rail pod is 64 segments x 64 hosts x 8 GPUs at radix 128; the core joins up to
  // radix / rails = 16 pods.
  auto o = options(FabricKind::kSameRailT2, 8, 128);
  CHECK(max_gpus(o) == 16 * 32768);
  o.dual_plane = true;
  CHECK(max_gpus(o) == 16 * 65536);  // HPN-style 128 x 200G hosts per leaf: Astral's 64K pod
  o.dual_plane = false;
  o.radix = 64;
  CHECK(max_gpus(o) == 8 * 8192);
  o.gpus = 131072;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("at most 65536 GPUs"));
  o.dual_plane = true;
  CHECK(max_gpus(o) == 131072);  // radix 64 reaches 131K with dual-ToR NICs
  o = options(FabricKind::kRailOnly, 8, 64);
  CHECK(max_gpus(o) == 64 * 32 * 8);
}

TEST_CASE("generator options that cannot be built are rejected") {
  auto o = options(FabricKind::kFatTree, 1001);
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("multiple of --gpus-per-host"));
  o.gpus = 1024;
  o.radix = 2;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("impossible radix"));
  o.radix = 64;
  o.nic_gbps = 300;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("breakout"));
  o.nic_gbps = 400;
  o.oversubscription = 0.5;
  CHECK_THROWS(generate_fabric(o));
  CHECK_FALSE(parse_fabric_kind("torus"));
  CHECK(parse_fabric_kind("rail-only") == FabricKind::kRailOnly);
}

TEST_CASE("multi-plane NICs: one port per plane, each plane its own rail fabric") {
  GenerateOptions o = options(FabricKind::kSameRailT2, 1024, 64);
  o.planes = 4;
  Fabric f = generate_fabric(o);
  CHECK(f.planes() == 4);
  CHECK(f.profiles()[0].nics[0].ports == 4);
  CHECK(f.profiles()[0].nics[0].port_gbps == 100);  // 400G NIC split over 4 planes
  // Port p of a NIC lands on a leaf of plane p-1, on the NIC's rail.
  for (int port = 1; port <= 4; ++port) {
    Attachment a = f.attachment(5, 3, port);
    REQUIRE(a.sw >= 0);
    CHECK(f.switches()[a.sw].plane == port - 1);
    CHECK(f.switches()[a.sw].rail == 3);
    CHECK(a.lane > 0);  // 100G lanes of a broken-out 400G port
  }
  // Four planes hold four times the GPUs of one at the same radix.
  GenerateOptions one = options(FabricKind::kSameRailT2, 1024, 64);
  CHECK(max_gpus(o) == 4 * max_gpus(one));
  o.planes = 3;
  CHECK_THROWS_WITH(generate_fabric(o), Catch::Contains("inconsistent planes"));
}

TEST_CASE("a fabric whose planes do not meet is rejected naming the link") {
  GenerateOptions o = options(FabricKind::kSameRailT2, 256, 32);
  o.dual_plane = true;
  FabricData d;
  {
    Fabric f = generate_fabric(o);
    d.name = f.name();
    d.kind = f.kind();
    d.rails = f.rails();
    d.planes = f.planes();
    d.profiles = f.profiles();
    d.hosts = f.hosts();
    d.switches = f.switches();
    d.links = f.links();
  }
  FabricData swapped = d;
  std::swap(swapped.links[0].b, swapped.links[1].b);  // port 1 of mlx5_0 on the plane-b leaf
  CHECK_THROWS_WITH(Fabric(swapped), Catch::Contains("link 0: inconsistent planes"));
  FabricData crossed = d;
  for (auto& l : crossed.links)
    if (!l.a.is_host() && crossed.switches[l.a.sw].plane == 0 && crossed.switches[l.b.sw].tier == 2) {
      for (size_t s = 0; s < crossed.switches.size(); ++s)
        if (crossed.switches[s].tier == 2 && crossed.switches[s].plane == 1) {
          l.b.sw = int(s);
          break;
        }
      break;
    }
  CHECK_THROWS_WITH(Fabric(crossed), Catch::Contains("inconsistent planes"));
}
