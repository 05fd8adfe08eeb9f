// The ECMP-efficiency table: produced by the simulator on a small fabric, written, read back by
// Seer's reader, and looked up by the nearest entry; bad tables are refused naming the field.
#include <astral/seer/ecmp_table.hpp>
#include <astral/seer/spec.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace astral;
using namespace astral::seer;

namespace {

EcmpTable small_table() {
  topo::GenerateOptions g;
  g.kind = topo::FabricKind::kFatTree;
  g.gpus = 256;
  g.radix = 16;
  g.tiers = 3;
  topo::Fabric f = topo::generate_fabric(g);
  EcmpTableOptions o;
  o.sim.routing = *topo::parse_routing("ecmp");
  o.placements = {Placement::kPacked};
  o.qps = {1, 4};
  return make_ecmp_table(f, o);
}

}  // namespace

TEST_CASE("the ECMP-efficiency table measures the fabric per pattern, group size and QPs") {
  EcmpTable t = small_table();
  CHECK(t.design == "fat-tree");
  CHECK(t.gpus == 256);
  CHECK(t.tiers == 3);
  CHECK(t.routing == "ecmp");
  // 2 patterns x 1 placement x 2 QP counts x group sizes 2, 4, 8, 16, 32 hosts
  REQUIRE(t.entries.size() == 2 * 2 * 5);
  auto find = [&](const char* pattern, int gpus, int qps) {
    for (const auto& e : t.entries)
      if (e.pattern == pattern && e.group_size == gpus && e.qps == qps) return e;
    FAIL("no entry " << pattern << " " << gpus << " " << qps);
    return EcmpEntry{};
  };
  // Two hosts of 8 GPUs under one set of leaves: without PXN, cross-rail pairs still climb to
  // the spines (tier 2), but two hosts' flows do not collide.
  EcmpEntry one_leaf = find("alltoall", 16, 1);
  CHECK(one_leaf.tier == 2);
  CHECK(one_leaf.ranks_per_leaf == 2);
  CHECK(one_leaf.efficiency == Approx(1.0).epsilon(1e-9));
  // The whole fabric crosses the core and loses to hash collisions; more QPs lose less.
  EcmpEntry whole = find("alltoall", 256, 1), whole4 = find("alltoall", 256, 4);
  CHECK(whole.tier == 3);
  CHECK(whole.efficiency < 0.95);
  CHECK(whole4.efficiency > whole.efficiency);
  CHECK(whole.ranks_per_leaf == 8);  // radix 16, 1:1: 8 hosts under each leaf
  for (const auto& e : t.entries) {
    CHECK(e.efficiency > 0);
    CHECK(e.efficiency <= 1);
  }
}

TEST_CASE("Seer reads the table back and finds the nearest entry") {
  EcmpTable t = small_table();
  nlohmann::json j = to_json(t);
  CHECK(j["format"] == "astral-ecmp-efficiency");
  CHECK(j["version"] == 1);
  EcmpTable back = ecmp_table_from_json(j);
  REQUIRE(back.entries.size() == t.entries.size());
  CHECK(back.entries[7].efficiency == t.entries[7].efficiency);
  CHECK(back.design == t.design);
  // Nearest: 100 GPUs -> 128 (log scale), 3 QPs -> 4, "all-to-all" is "alltoall".
  auto e = nearest_entry(back, "all-to-all", 100, 3);
  REQUIRE(e);
  CHECK(e->group_size == 128);
  CHECK(e->qps == 4);
  auto r = nearest_entry(back, "all-reduce", 100000, 1);
  REQUIRE(r);
  CHECK(r->pattern == "ring");
  CHECK(r->group_size == 256);
  CHECK_FALSE(nearest_entry(back, "moe", 64));
}

TEST_CASE("a bad ECMP-efficiency table is refused naming the field") {
  nlohmann::json j = to_json(small_table());
  auto refused = [](nlohmann::json doc, const char* what) {
    CHECK_THROWS_WITH(ecmp_table_from_json(doc), Catch::Contains(what));
  };
  nlohmann::json bad = j;
  bad["format"] = "astral-fabric";
  refused(bad, "ecmp table.format");
  bad = j;
  bad["version"] = 2;
  refused(bad, "ecmp table.version");
  bad = j;
  bad["entries"][3]["efficiency"] = 1.5;
  refused(bad, "ecmp table.entries[3].efficiency");
  bad = j;
  bad["entries"][0].erase("group_size");
  refused(bad, "ecmp table.entries[0].group_size");
  bad = j;
  bad.erase("entries");
  refused(bad, "ecmp table.entries");
}
