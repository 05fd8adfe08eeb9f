// Collective cost model: bandwidth terms against the nccl-tests formulas, placement (hosts, rails,
// tiers), algorithm and protocol choice.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/network.hpp"
#include "astral/topo/fabric_generate.hpp"
#include "temp_dir.hpp"

#include <fstream>

using namespace astral::seer;

namespace {

Network single_host(const HardwareSpec& hw) { return uniform_network(hw, hw.gpus_per_node); }

}  // namespace

TEST_CASE("seer group placement follows Megatron's rank order") {
  Group tp = group_of(8, 1, 8);
  CHECK(tp.per_host == 8);
  CHECK(tp.hosts() == 1);
  Group dp = group_of(64, 8, 8);  // tp 8: one DP rank per host
  CHECK(dp.per_host == 1);
  CHECK(dp.hosts() == 64);
  Group dp2 = group_of(16, 2, 8);  // tp 2: four DP ranks per host
  CHECK(dp2.per_host == 4);
  CHECK(dp2.hosts() == 4);
  Group pp = group_of(2, 64, 8);  // pipeline neighbours 8 hosts apart
  CHECK(pp.per_host == 1);
  CHECK(pp.host_stride == 8);
}

TEST_CASE("seer large all-reduce inside a host runs at the NVLink bus bandwidth") {
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = single_host(hw);
  CollectiveModel m(net, group_of(8, 1, 8));
  const double bytes = 1e9;
  auto best = m.best(Collective::kAllReduce, bytes);
  CHECK(best.algorithm == Algorithm::kRing);
  CHECK(best.protocol == Protocol::kSimple);
  // nccl-tests: t = S / busbw x 2(n-1)/n with busbw = 300 GB/s x 0.775.
  const double ideal = bytes * 2 * 7 / 8 / (300e9 * 0.775);
  CHECK(best.seconds == Approx(ideal).epsilon(0.01));
  // All-gather and reduce-scatter move half the bytes of an all-reduce.
  CHECK(m.best(Collective::kAllGather, bytes).seconds == Approx(ideal / 2).epsilon(0.02));
  CHECK(m.best(Collective::kReduceScatter, bytes).seconds == Approx(ideal / 2).epsilon(0.02));
}

TEST_CASE("seer small messages pick a low-latency protocol, large ones Simple") {
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 64);
  CollectiveModel m(net, group_of(64, 1, 8));
  CHECK(m.best(Collective::kAllReduce, 1024).protocol != Protocol::kSimple);
  CHECK(m.best(Collective::kAllReduce, 1e9).protocol == Protocol::kSimple);
  // Across hosts the tree's log-depth latency wins for tiny messages.
  CHECK(m.best(Collective::kAllReduce, 64).algorithm == Algorithm::kTree);
  CostTable t;
  m.cost_table(Collective::kAllReduce, 1 << 20, t);
  CHECK(t[int(Algorithm::kCollNetDirect)][0] < 0);  // no opinion: not modelled
  CHECK(t[int(Algorithm::kRing)][int(Protocol::kSimple)] > 0);
}

TEST_CASE("seer multi-host rings are bound by the rail NICs, hosts by their NIC count") {
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 64);
  const double bytes = 4e9;
  // 64 ranks, 8 per host: ring bus bandwidth = min(NVLink, 8 NICs x 25 GB/s x 0.92).
  double t64 = CollectiveModel(net, group_of(64, 1, 8)).best(Collective::kAllReduce, bytes).seconds;
  CHECK(t64 == Approx(bytes * 2 * 63 / 64 / (8 * 25e9 * 0.92)).epsilon(0.03));
  // One rank per host (a DP group with tp 8) uses one NIC: 8x slower per byte.
  double t8 = CollectiveModel(net, group_of(8, 8, 8)).best(Collective::kAllReduce, bytes).seconds;
  CHECK(t8 == Approx(bytes * 2 * 7 / 8 / (25e9 * 0.92)).epsilon(0.03));
}

TEST_CASE("seer NVLS wins large single-host all-reduce on Hopper") {
  HardwareSpec hw = load_hardware("h100-sxm");
  CollectiveModel m(single_host(hw), group_of(8, 1, 8));
  auto best = m.best(Collective::kAllReduce, 1e9);
  CHECK(best.algorithm == Algorithm::kNvls);
  // 476 GB/s bus bandwidth measured (perf-models §1).
  double busbw = 1e9 / best.seconds * 2 * 7 / 8;
  CHECK(busbw == Approx(476e9).epsilon(0.03));
}

TEST_CASE("seer same-rail fabrics keep all-to-all off the rail-joining tier") {
  HardwareSpec hw = load_hardware("h100-sxm");
  Network astral = load_network("astral-same-rail-12k", hw);
  Network fat = load_network("rail-optimized-fat-tree-12k", hw);
  // 512 GPUs, 8 per host, over 64 hosts: beyond a 32-host rail leaf of the fat tree.
  Group g = group_of(512, 1, 8);
  const double bytes = 2e9;
  double t_astral = CollectiveModel(astral, g).best(Collective::kAllToAll, bytes).seconds;
  double t_fat = CollectiveModel(fat, g).best(Collective::kAllToAll, bytes).seconds;
  CHECK(t_fat > t_astral * 1.1);  // the ECMP stage costs the fat tree (perf-models §9.3)
  // Without PXN the cross-rail part climbs to the core in the same-rail design.
  Network no_pxn = astral;
  no_pxn.pxn = false;
  no_pxn.tiers[1].oversubscription = 4;  // same-rail aggregation to core
  double t_xrail = CollectiveModel(no_pxn, g).best(Collective::kAllToAll, bytes).seconds;
  CHECK(t_xrail > t_astral * 2);
  // Oversubscription on the path slows a DP ring that crosses it.
  Network over = fat;
  over.tiers[0].oversubscription = 3;
  Group dp = group_of(128, 8, 8);  // 128 hosts, one rank each
  CHECK(CollectiveModel(over, dp).best(Collective::kAllReduce, bytes).seconds >
        2 * CollectiveModel(fat, dp).best(Collective::kAllReduce, bytes).seconds);
}

TEST_CASE("seer network JSON is checked and round-trips") {
  HardwareSpec hw = load_hardware("h100-sxm");
  Network n = load_network("astral-same-rail-12k", hw);
  CHECK(n.hosts == 1536);
  CHECK(n.tiers.size() == 3);
  CHECK(n.tier_for(100, false) == 0);
  CHECK(n.tier_for(100, true) == 2);  // cross-rail goes to the core
  CHECK(n.tier_for(200, false) == 1);
  Network back = network_from_json(to_json(n), hw);
  CHECK(back.tiers[1].hosts == n.tiers[1].hosts);
  nlohmann::json j = to_json(n);
  j["tiers"][1]["hosts"] = 10;  // smaller than the tier below
  CHECK_THROWS_WITH(network_from_json(j, hw), Catch::Contains("network.tiers[1].hosts"));
  j = to_json(n);
  j.erase("tiers");
  CHECK_THROWS_WITH(network_from_json(j, hw), Catch::Contains("network.tiers"));
}

TEST_CASE("seer network from a generated fabric: tiers, rails and oversubscription") {
  using astral::topo::FabricKind;
  using astral::topo::GenerateOptions;
  HardwareSpec hw = load_hardware("h100-sxm");
  GenerateOptions o;
  o.kind = FabricKind::kSameRailT2;
  o.gpus = 1024;
  o.radix = 64;
  Network same_rail = network_from_fabric(astral::topo::generate_fabric(o), hw);
  CHECK(same_rail.hosts == 128);
  CHECK(same_rail.gpus_per_host == 8);
  CHECK(same_rail.rails == 8);
  CHECK(same_rail.nic_bandwidth == Approx(50e9));
  REQUIRE(same_rail.tiers.size() >= 2);
  CHECK(same_rail.tiers[0].rail_local);
  CHECK(same_rail.tiers[0].hosts < same_rail.hosts);  // a leaf serves one segment
  CHECK(same_rail.tiers[1].rail_local);               // the same-rail spine
  CHECK(same_rail.tiers.back().hosts >= same_rail.hosts);

  o.kind = FabricKind::kFatTree;
  o.oversubscription = 2;
  Network fat = network_from_fabric(astral::topo::generate_fabric(o), hw);
  // Leaf ports split into whole down and up counts with down/up <= 2 (39:25 at radix 64).
  CHECK(fat.tiers[0].oversubscription > 1.4);
  CHECK(fat.tiers[0].oversubscription <= 2.0);
  bool shared_tier = false;
  for (const Tier& t : fat.tiers) shared_tier = shared_tier || !t.rail_local;
  CHECK(shared_tier);  // a fat tree's spine joins rails
  // The same all-to-all costs more on the oversubscribed fat tree.
  Group g = group_of(1024, 1, 8);
  CHECK(CollectiveModel(fat, g).best(Collective::kAllToAll, 1e9).seconds >
        CollectiveModel(same_rail, g).best(Collective::kAllToAll, 1e9).seconds);
}

TEST_CASE("seer loads a fabric JSON as a network, and names the file when it is broken") {
  HardwareSpec hw = load_hardware("h100-sxm");
  astral::topo::GenerateOptions o;
  o.gpus = 256;
  o.radix = 64;
  astral::test::TempDir dir;  // not the working directory: parallel ctest runs share it
  std::string path = dir / "seer-network-fabric.json";
  astral::topo::save_fabric(astral::topo::generate_fabric(o), path);
  Network n = load_network(path, hw);
  CHECK(n.hosts == 32);
  {
    std::ofstream(path) << R"({"format": "astral-fabric", "version": 1, "hosts": []})";
  }
  try {
    load_network(path, hw);
    FAIL("a broken fabric loaded");
  } catch (const SpecError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
}
