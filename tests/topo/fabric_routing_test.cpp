// Paths between GPUs: ECMP width per design, the PXN hop, hashing, pinning, polarisation and how
// routes avoid links that are down.
#include <astral/topo/fabric_generate.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <thread>

using namespace astral::topo;

namespace {

Fabric make(FabricKind kind, int gpus, int radix = 128, bool dual = false, int gpus_per_host = 8,
            int tiers = 0) {
  GenerateOptions o;
  o.kind = kind;
  o.gpus = gpus;
  o.radix = radix;
  o.dual_plane = dual;
  o.gpus_per_host = gpus_per_host;
  o.tiers = tiers;
  return generate_fabric(o);
}

std::string switch_names(const Fabric& f, const PathCandidate& c) {
  std::string out;
  for (int sw : c.switches) out += (out.empty() ? "" : " ") + f.switches()[sw].name;
  return out;
}

}  // namespace

TEST_CASE("same-rail Tier-2: same-rail peers in other segments have one ECMP choice") {
  Fabric f = make(FabricKind::kSameRailT2, 1024);
  Router r(f);
  long total = 0;
  // node0001 GPU0 -> node0065 GPU0: rail 0, segment 0 -> segment 1.
  auto paths = r.candidates(0, 64 * 8, 1000, &total);
  CHECK(total == 64);  // one per rail-0 spine
  REQUIRE(paths.size() == 64);
  for (const auto& p : paths) {
    CHECK_FALSE(p.pxn);
    REQUIRE(p.switches.size() == 3);
    CHECK(f.switches()[p.switches[0]].name == "r0-00");
    CHECK(f.switches()[p.switches[1]].rail == 0);
    CHECK(f.switches()[p.switches[2]].name == "r0-01");
  }
  CHECK(r.describe(paths[0]) ==
        "node0001:mlx5_0:1 -> r0-00 p65 -> s0-00 p2 -> r0-01 p1 -> node0065:mlx5_0:1");
  // Same leaf: no spine at all.
  auto local = r.candidates(0, 8, 10, &total);
  CHECK(total == 1);
  CHECK(switch_names(f, local.at(0)) == "r0-00");
}

TEST_CASE("cross-rail peers: through the core directly, or one NVLink hop then same-rail (PXN)") {
  Fabric f = make(FabricKind::kSameRailT2, 1024);
  Router r(f);
  long total = 0;
  auto paths = r.candidates(0, 64 * 8 + 3, 100000, &total);  // node0001 GPU0 -> node0065 GPU3
  int direct = 0, pxn = 0;
  for (const auto& p : paths) {
    if (p.pxn) {
      ++pxn;
      CHECK(p.via_gpu == 3);  // node0001 GPU3 owns the rail-3 NIC
      CHECK(p.switches.size() == 3);
      CHECK(f.switches()[p.switches[1]].rail == 3);
    } else {
      ++direct;
      REQUIRE(p.switches.size() == 5);  // leaf, spine, core, spine, leaf
      CHECK(f.switches()[p.switches[2]].tier == 3);
    }
  }
  CHECK(pxn == 64);
  // Each rail-0 spine has 2 uplinks (2 segments below it) to its core, and the core 2 links down
  // to the rail-3 spine: 64 x 2 x 2.
  CHECK(direct == 256);
  CHECK(total == 256 + 64);
  auto same_host = r.candidates(0, 5, 10, &total);
  REQUIRE(same_host.size() == 1);
  CHECK(same_host[0].nvlink_only);
}

TEST_CASE("rail-only: cross-rail peers are reachable only through PXN") {
  Fabric f = make(FabricKind::kRailOnly, 1024, 64);
  Router r(f);
  long total = 0;
  auto paths = r.candidates(0, 8 * 40 + 2, 1000, &total);
  REQUIRE_FALSE(paths.empty());
  for (const auto& p : paths) CHECK(p.pxn);
}

TEST_CASE("ECMP hashing spreads QPs over a leaf's uplinks, deterministically per seed") {
  Fabric f = make(FabricKind::kFatTree, 1024, 64);
  Router r(f);
  RoutingPolicy policy;
  policy.seed = 7;
  PathSelector sel(r, policy);
  std::map<int, int> uplink_use;
  std::vector<int> path, again;
  int flows = 0;
  for (int dst_host = 32; dst_host < 128; ++dst_host)
    for (int qp = 0; qp < 8; ++qp) {
      path.clear();
      REQUIRE(sel.route_nics(0, 0, dst_host, 0, qp, 1234 + dst_host, path));
      REQUIRE(path.size() == 4);  // host up, leaf up, spine down, host down
      uplink_use[path[1]]++;
      ++flows;
      again.clear();
      sel.route_nics(0, 0, dst_host, 0, qp, 1234 + dst_host, again);
      CHECK(again == path);
    }
  CHECK(uplink_use.size() >= 30);  // 32 uplinks, 768 QPs
  for (const auto& [res, n] : uplink_use) CHECK(n < 3 * flows / 32);
  policy.seed = 8;
  PathSelector other(r, policy);
  int differ = 0;
  for (int dst_host = 32; dst_host < 64; ++dst_host) {
    path.clear();
    again.clear();
    sel.route_nics(0, 0, dst_host, 0, 0, 99, path);
    other.route_nics(0, 0, dst_host, 0, 0, 99, again);
    differ += path != again;
  }
  CHECK(differ > 16);
}

TEST_CASE("pinning picks the uplink by the destination's port, whatever the source") {
  Fabric f = make(FabricKind::kFatTree, 1024, 64);
  Router r(f);
  RoutingPolicy policy = *parse_routing("pinned");
  PathSelector sel(r, policy);
  std::set<int> uplinks;
  std::vector<int> path;
  for (int dst_host = 32; dst_host < 64; ++dst_host) {  // all 32 hosts of segment 1
    path.clear();
    REQUIRE(sel.route_nics(0, 0, dst_host, 0, 0, std::uint64_t(dst_host) * 31, path));
    uplinks.insert(path[1]);
    std::vector<int> from_other;
    REQUIRE(sel.route_nics(5, 0, dst_host, 0, 3, 77, from_other));
    CHECK(Router::link_of_resource(from_other[2]) == Router::link_of_resource(path[2]));
  }
  CHECK(uplinks.size() == 32);  // disjoint
}

TEST_CASE("polarisation: correlated flows repeat the previous stage's choice") {
  // A 3-tier fat tree of one-GPU hosts on 8-port switches: 4 uplinks per leaf and per aggregation.
  Fabric f = make(FabricKind::kFatTree, 64, 8, false, 1, 3);
  Router r(f);
  // For flows leaving by one leaf uplink: how concentrated their aggregation uplinks are
  // (largest share of one member), and how many members they use.
  auto concentration = [&](double polarisation, size_t& most_members) {
    RoutingPolicy policy;
    policy.polarisation = polarisation;
    PathSelector sel(r, policy);
    std::map<int, std::map<int, int>> by_leaf_uplink;
    std::vector<int> path;
    for (int dst = 16; dst < 64; ++dst)
      for (int qp = 0; qp < 16; ++qp) {
        path.clear();
        REQUIRE(sel.route_nics(0, 0, dst, 0, qp, std::uint64_t(dst), path));
        REQUIRE(path.size() == 6);
        by_leaf_uplink[path[1]][path[2]]++;
      }
    double share = 0;
    most_members = 0;
    for (const auto& [leaf_up, agg_ups] : by_leaf_uplink) {
      int total = 0, top = 0;
      for (const auto& [agg_up, n] : agg_ups) total += n, top = std::max(top, n);
      share = std::max(share, double(top) / total);
      most_members = std::max(most_members, agg_ups.size());
    }
    return share;
  };
  size_t members = 0;
  CHECK(concentration(1.0, members) == 1.0);  // the degenerate bound: one member
  CHECK(members == 1);
  CHECK(concentration(0.25, members) > 0.37);  // about 0.25 + 0.75 / 4
  CHECK(members == 4);
  CHECK(concentration(0.0, members) < 0.34);  // about 1 / 4
  CHECK(members == 4);
}

TEST_CASE("routes avoid links that are down, a dual-ToR NIC fails over to its other port") {
  Fabric f = make(FabricKind::kSameRailT2, 2048, 128, /*dual=*/true);  // 2 segments of 128 hosts
  int leaf = *f.find_switch("r0-00a");
  int first_uplink = -1;
  for (int l : f.switch_links(leaf))
    if (!f.links()[l].a.is_host()) {
      first_uplink = l;
      break;
    }
  REQUIRE(first_uplink >= 0);
  f.set_link_state(first_uplink, LinkState::kDown);
  int port1 = f.attachment(0, 0, 1).link;
  f.set_link_state(port1, LinkState::kDown);
  Router r(f);
  PathSelector sel(r, RoutingPolicy{});
  std::vector<int> path;
  for (int qp = 0; qp < 16; ++qp) {
    path.clear();
    REQUIRE(sel.route_nics(0, 0, 200, 0, qp, 5, path));
    CHECK(Router::link_of_resource(path.front()) == f.attachment(0, 0, 2).link);  // plane b
  }
  int routed = 0;
  for (int dst = 128; dst < 256; ++dst)
    for (int qp = 0; qp < 4; ++qp) {
      path.clear();
      REQUIRE(sel.route_nics(1, 0, dst, 0, qp, 9, path));
      ++routed;
      for (int res : path) CHECK(Router::link_of_resource(res) != first_uplink);
    }
  CHECK(routed == 512);
  // With both ports down there is no path.
  f.set_link_state(f.attachment(0, 0, 2).link, LinkState::kDown);
  Router none(f);
  path.clear();
  CHECK_FALSE(PathSelector(none, RoutingPolicy{}).route_nics(0, 0, 200, 0, 0, 5, path));
  CHECK(path.empty());
}

// The plugin builds a leaf's table when a connection first routes toward it; the tables must be
// exactly the eager ones, also when several threads ask at once (the ASan run checks the memory).
TEST_CASE("on-demand route tables equal the eager ones, built concurrently on first use") {
  Fabric f = make(FabricKind::kFatTree, 4096, 64);  // three tiers: up, across and down groups
  Router eager(f);
  Router lazy(f, RouteTables::kOnDemand);
  REQUIRE(lazy.leaf_count() == eager.leaf_count());
  const int switches = int(f.switches().size());
  auto same_leaf = [&](int leaf) {
    for (int sw = 0; sw < switches; ++sw) {
      auto a = eager.next_hops(sw, leaf), b = lazy.next_hops(sw, leaf);
      if (eager.hops(sw, leaf) != lazy.hops(sw, leaf) || a.size() != b.size()) return false;
      for (size_t k = 0; k < a.size(); ++k) {
        if (a[k].resource != b[k].resource || a[k].next_switch != b[k].next_switch) return false;
      }
    }
    return true;
  };
  std::vector<int> mismatched(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {  // every thread walks every leaf, from a different start
      for (int i = 0; i < lazy.leaf_count(); ++i) {
        if (!same_leaf((i + t * 7) % lazy.leaf_count())) ++mismatched[size_t(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatched == std::vector<int>(4, 0));
  // Paths come out the same through either.
  long eager_total = 0, lazy_total = 0;
  auto a = eager.candidates(0, f.gpu_count() - 1, 100, &eager_total);
  auto b = lazy.candidates(0, f.gpu_count() - 1, 100, &lazy_total);
  CHECK(eager_total == lazy_total);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].switch_links == b[i].switch_links);
}

TEST_CASE("routing names parse and print") {
  for (const char* name : {"ecmp", "pinned", "same-rail", "same-rail-pinned"})
    CHECK(routing_name(*parse_routing(name)) == name);
  CHECK_FALSE(parse_routing("spray"));
}
