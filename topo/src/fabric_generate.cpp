// Generators for same-rail Tier-2, rail-optimised fat tree and rail-only fabrics (see the header for
// the designs). The arithmetic lives in Plan so that max_gpus() and generate_fabric() agree.
#include "astral/topo/fabric_generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include "fabric_detail.hpp"

namespace astral::topo {
namespace {

using detail::fail;
using detail::parse_int;

// Splits a switch's ports into (down, up) with down/up <= oversubscription.
std::pair<int, int> split_ports(int radix, double oversubscription) {
  int up = std::max(1, int(std::floor(radix / (1.0 + oversubscription) + 1e-9)));
  int down = std::min(radix - up, int(std::floor(up * oversubscription + 1e-9)));
  return {down, up};
}

// Smallest number of switches per core group such that each gets an equal share of every child's
// uplinks and no core needs more ports than it has.
int cores_per_group(int uplinks_per_child, int children, int radix) {
  for (int k = 1; k <= uplinks_per_child; ++k)
    if (uplinks_per_child % k == 0 && children * (uplinks_per_child / k) <= radix) return k;
  return -1;
}

std::string plane_suffix(int planes, int plane) {
  return planes > 1 ? std::string(1, char('a' + plane)) : std::string();
}

struct Plan {
  GenerateOptions o;
  int hosts = 0, rails = 0, planes = 1, lanes = 1;
  double host_port_gbps = 0;
  int leaf_down = 0, leaf_up = 0;  // ports
  int hosts_per_segment = 0, segments = 0;
  int tiers = 2;
  int segments_per_pod = 0, pods = 1;  // 3-tier fat tree; same-rail-t2 beyond one spine's reach
  // Tier 2: groups of spines (per rail and plane for same-rail designs, per plane or per pod and
  // plane for the fat tree); each leaf of a group has `per_pair` links to each of its `spines`.
  int group_children = 0;  // leaves per spine group
  int spine_down_capacity = 0, spines = 0, per_pair = 1, spine_up = 0;
  int cores = 0, core_per_pair = 0, core_children = 0;  // per core group (one group per spine index)

  explicit Plan(const GenerateOptions& opts) : o(opts) {
    if (o.gpus_per_host < 1 || o.gpus_per_host > 64)
      fail(fmt::format("--gpus-per-host {}: must be 1..64", o.gpus_per_host));
    if (o.gpus < 1 || o.gpus % o.gpus_per_host != 0)
      fail(fmt::format("--gpus {}: must be a positive multiple of --gpus-per-host {}", o.gpus,
                       o.gpus_per_host));
    if (o.radix < 4 || o.radix > 4096)
      fail(fmt::format("--radix {}: impossible radix (4..4096)", o.radix));
    if (!(o.oversubscription >= 1.0) || o.oversubscription > 64)
      fail(fmt::format("--oversubscription {}: must be between 1 and 64", o.oversubscription));
    if (!(o.port_gbps > 0) || !(o.nic_gbps > 0)) fail("port and NIC speeds must be > 0");
    if (o.tiers != 0 && o.tiers != 2 && o.tiers != 3) fail("--tiers must be 2 or 3");
    if (o.tiers != 0 && o.kind != FabricKind::kFatTree)
      fail("--tiers applies to fat-tree only (same-rail-t2 has 3 tiers, rail-only 2)");
    hosts = o.gpus / o.gpus_per_host;
    rails = o.gpus_per_host;
    planes = o.planes > 0 ? o.planes : o.dual_plane ? 2 : 1;
    if (planes != 1 && planes != 2 && planes != 4)
      fail(fmt::format("--planes {}: inconsistent planes: a NIC has 1, 2 or 4 ports, one per plane",
                       planes));
    if (o.dual_plane && planes != 2)
      fail(fmt::format("--dual-plane and --planes {}: inconsistent planes (dual-plane is 2)", planes));
    host_port_gbps = o.nic_gbps / planes;
    double ratio = o.port_gbps / host_port_gbps;
    lanes = int(std::lround(ratio));
    if (lanes < 1 || std::abs(ratio - lanes) > 1e-9 || lanes > 8)
      fail(fmt::format("host ports of {} Gb/s cannot be cabled to {} Gb/s switch ports (need a "
                       "whole breakout of 1..8 lanes)",
                       host_port_gbps, o.port_gbps));

    switch (o.kind) {
      case FabricKind::kRailOnly:
        plan_leaves(o.oversubscription);
        tiers = 2;
        group_children = segments;
        spine_down_capacity = o.radix;
        if (!plan_spines())
          fail(fmt::format("rail-only at radix {} holds at most {} GPUs ({} segments of {} hosts); "
                           "asked for {}: raise --radix or use --dual-plane",
                           o.radix, o.radix * full_segment_hosts(o.oversubscription) * rails,
                           o.radix, full_segment_hosts(o.oversubscription), o.gpus));
        break;
      case FabricKind::kSameRailT2:
        plan_same_rail_pods();
        break;
      case FabricKind::kFatTree:
        plan_fat_tree();
        break;
    }
  }

  int full_segment_hosts(double leaf_oversubscription) const {
    return split_ports(o.radix, leaf_oversubscription).first * lanes;
  }

  void plan_leaves(double leaf_oversubscription) {
    std::tie(leaf_down, leaf_up) = split_ports(o.radix, leaf_oversubscription);
    hosts_per_segment = std::min(hosts, leaf_down * lanes);
    segments = (hosts + hosts_per_segment - 1) / hosts_per_segment;
  }

  // Spines per group and links per leaf-spine pair; false when the group does not fit.
  bool plan_spines() {
    per_pair = 0;
    for (int k = 1; k <= leaf_up; ++k) {
      if (leaf_up % k != 0) continue;
      int m = leaf_up / k;
      if (group_children * m > spine_down_capacity) continue;
      per_pair = m;
      if (o.bundle) break;  // fewest spines: the largest bundle that fits
    }
    if (!o.bundle && group_children > spine_down_capacity) return false;
    if (!o.bundle) per_pair = 1;
    if (per_pair == 0) return false;
    spines = leaf_up / per_pair;
    int down_used = group_children * per_pair;
    spine_up = int(std::ceil(down_used / o.oversubscription - 1e-9));
    return true;
  }

  bool plan_core() {
    cores = cores_per_group(spine_up, core_children, o.radix);
    if (cores < 0) return false;
    core_per_pair = spine_up / cores;
    return true;
  }

  // A same-rail pod holds the segments one spine reaches; beyond that, pods of that size are joined
  // by the core, which then carries same-rail traffic between pods as well as cross-rail traffic
  // (leaf, rail spine of the pod, core, rail spine of the other pod, leaf: two ECMP stages up).
  void plan_same_rail_pods() {
    plan_leaves(1.0);
    tiers = 3;
    spine_down_capacity = split_ports(o.radix, o.oversubscription).first;
    segments_per_pod = std::min(segments, spine_down_capacity);
    pods = (segments + segments_per_pod - 1) / segments_per_pod;
    group_children = segments_per_pod;
    core_children = rails * pods;
    if (rails > o.radix)
      fail(fmt::format("same-rail-t2: {} rails do not fit on core switches of radix {}", rails,
                       o.radix));
    if (!plan_spines() || !plan_core())
      fail(fmt::format("same-rail-t2 at radix {} holds at most {} GPUs; asked for {}: raise --radix "
                       "or use --dual-plane or --planes 4",
                       o.radix, max_same_rail_gpus(), o.gpus));
  }

  // The most GPUs of the pod design: a core switch takes at least one link from every rail spine
  // of every pod it joins, so at most radix / rails pods.
  long max_same_rail_gpus() const {
    long pod_gpus = long(spine_down_capacity) * full_segment_hosts(1.0) * rails;
    return long(o.radix / rails) * pod_gpus;
  }

  void plan_fat_tree() {
    // Two tiers when one spine can reach every leaf of its plane; otherwise pods and a core.
    plan_leaves(o.oversubscription);
    bool two_fit = rails * segments <= o.radix;
    if (o.tiers == 2 && !two_fit)
      fail(fmt::format("fat-tree with 2 tiers at radix {} holds at most {} GPUs; asked for {}: use "
                       "--tiers 3 or raise --radix",
                       o.radix, (o.radix / rails) * full_segment_hosts(o.oversubscription) * rails,
                       o.gpus));
    if (o.tiers == 2 || (o.tiers == 0 && two_fit)) {
      tiers = 2;
      group_children = rails * segments;
      spine_down_capacity = o.radix;
      plan_spines();
      return;
    }
    tiers = 3;
    plan_leaves(1.0);
    spine_down_capacity = split_ports(o.radix, o.oversubscription).first;
    segments_per_pod = std::min(segments, spine_down_capacity / rails);
    if (segments_per_pod < 1)
      fail(fmt::format("fat-tree: {} rails do not fit on an aggregation switch with {} down ports",
                       rails, spine_down_capacity));
    pods = (segments + segments_per_pod - 1) / segments_per_pod;
    group_children = rails * segments_per_pod;
    plan_spines();
    core_children = pods;
    if (pods > o.radix || !plan_core())
      fail(fmt::format("fat-tree at radix {} holds at most {} GPUs ({} pods); asked for {}",
                       o.radix, o.radix * (spine_down_capacity / rails) * full_segment_hosts(1.0) *
                                    rails,
                       o.radix, o.gpus));
  }
};

class Builder {
 public:
  explicit Builder(const Plan& plan) : p_(plan) {}

  Fabric build() {
    add_profile_and_hosts();
    add_leaves();
    switch (p_.o.kind) {
      case FabricKind::kSameRailT2:
      case FabricKind::kRailOnly:
        add_same_rail_spines();
        break;
      case FabricKind::kFatTree:
        add_shared_spines();
        break;
    }
    if (p_.tiers == 3) add_core();
    d_.kind = fabric_kind_name(p_.o.kind);
    d_.name = fmt::format("{} {} GPUs, radix {}{}{}", d_.kind, p_.o.gpus, p_.o.radix,
                          p_.planes == 2 ? ", dual-plane" : p_.planes > 2 ? ", 4 planes" : "",
                          p_.o.oversubscription > 1
                              ? fmt::format(", {}:1 top tier", p_.o.oversubscription)
                              : "");
    d_.rails = p_.rails;
    d_.planes = p_.planes;
    d_.generator = {{"kind", d_.kind},
                    {"gpus", std::to_string(p_.o.gpus)},
                    {"gpus_per_host", std::to_string(p_.o.gpus_per_host)},
                    {"radix", std::to_string(p_.o.radix)},
                    {"port_gbps", fmt::format("{}", p_.o.port_gbps)},
                    {"nic_gbps", fmt::format("{}", p_.o.nic_gbps)},
                    {"oversubscription", fmt::format("{}", p_.o.oversubscription)},
                    {"dual_plane", p_.planes == 2 ? "true" : "false"},
                    {"planes", std::to_string(p_.planes)},
                    {"bundle", p_.o.bundle ? "true" : "false"},
                    {"tiers", std::to_string(p_.tiers)}};
    return Fabric(std::move(d_));
  }

 private:
  int add_switch(std::string name, int tier, int rail, int plane, int pod, int segment) {
    Switch s;
    s.name = std::move(name);
    s.tier = tier;
    s.radix = p_.o.radix;
    s.port_gbps = p_.o.port_gbps;
    s.rail = rail;
    s.plane = plane;
    s.pod = pod;
    s.segment = segment;
    d_.switches.push_back(std::move(s));
    return int(d_.switches.size()) - 1;
  }

  void link(Endpoint a, Endpoint b, double gbps) {
    Link l;
    l.a = a;
    l.b = b;
    l.gbps = gbps;
    d_.links.push_back(l);
  }
  static Endpoint sw_port(int sw, int port, int lane = 0) {
    Endpoint e;
    e.sw = sw;
    e.port = port;
    e.lane = lane;
    return e;
  }
  int pod_of_segment(int s) const {
    return p_.tiers == 3 && p_.segments_per_pod > 0 ? s / p_.segments_per_pod : 0;
  }

  void add_profile_and_hosts() {
    NodeProfile prof;
    prof.gpus = p_.o.gpus_per_host;
    prof.nvlink_gbps = p_.o.nvlink_gbps;
    prof.name = p_.planes > 1
                    ? fmt::format("{}gpu-{}x{}x{}g", prof.gpus, prof.gpus, p_.planes, p_.host_port_gbps)
                    : fmt::format("{}gpu-{}x{}g", prof.gpus, prof.gpus, p_.host_port_gbps);
    for (int g = 0; g < prof.gpus; ++g) {
      NicModel nic;
      nic.name = fmt::format("mlx5_{}", g);
      nic.rail = g;
      nic.gpus = {g};
      nic.ports = p_.planes;
      nic.port_gbps = p_.host_port_gbps;
      prof.nics.push_back(std::move(nic));
    }
    d_.profiles.push_back(std::move(prof));
    int width = std::max<int>(4, int(std::to_string(p_.hosts).size()));
    for (int h = 0; h < p_.hosts; ++h) {
      Host host;
      host.name = fmt::format("node{:0{}}", h + 1, width);
      host.segment = h / p_.hosts_per_segment;
      host.pod = pod_of_segment(host.segment);
      d_.hosts.push_back(std::move(host));
    }
  }

  // Leaves per (rail, plane, segment): host lanes on the first ports, then uplinks.
  void add_leaves() {
    leaf_.assign(size_t(p_.rails) * p_.planes * p_.segments, -1);
    for (int s = 0; s < p_.segments; ++s)
      for (int r = 0; r < p_.rails; ++r)
        for (int pl = 0; pl < p_.planes; ++pl)
          leaf_[leaf_index(r, pl, s)] =
              add_switch(fmt::format("r{}-{:02}{}", r, s, plane_suffix(p_.planes, pl)), 1, r, pl,
                         pod_of_segment(s), s);
    for (int h = 0; h < p_.hosts; ++h) {
      int s = h / p_.hosts_per_segment, ordinal = h % p_.hosts_per_segment;
      int port = ordinal / p_.lanes + 1;
      int lane = p_.lanes > 1 ? ordinal % p_.lanes + 1 : 0;
      for (int r = 0; r < p_.rails; ++r)
        for (int pl = 0; pl < p_.planes; ++pl) {
          Endpoint host_end;
          host_end.host = h;
          host_end.nic = r;
          host_end.port = pl + 1;
          link(host_end, sw_port(leaf_[leaf_index(r, pl, s)], port, lane), p_.host_port_gbps);
        }
    }
  }
  size_t leaf_index(int rail, int plane, int segment) const {
    return (size_t(segment) * p_.rails + rail) * p_.planes + plane;
  }

  // Joins `leaf` (child `child` of its group) to the group's spines: leaf uplink k goes to spine
  // k / per_pair, on that spine's down port child * per_pair + k % per_pair.
  void join_leaf(int leaf, int child, const int* group_spines) {
    for (int k = 0; k < p_.leaf_up; ++k)
      link(sw_port(leaf, p_.leaf_down + k + 1),
           sw_port(group_spines[k / p_.per_pair], child * p_.per_pair + k % p_.per_pair + 1),
           p_.o.port_gbps);
  }

  // Same-rail spines: a group per (rail, plane, pod) joining the leaves of that rail, plane and pod
  // only. One pod keeps the names s<rail>-<index>; several are s<rail>p<pod>-<index>.
  void add_same_rail_spines() {
    int per_pod = p_.segments_per_pod > 0 ? p_.segments_per_pod : p_.segments;
    for (int pl = 0; pl < p_.planes; ++pl)
      for (int pod = 0; pod < p_.pods; ++pod)
        for (int r = 0; r < p_.rails; ++r) {
          std::vector<int> group;
          std::string pod_name = p_.pods > 1 ? fmt::format("p{}", pod) : std::string();
          for (int a = 0; a < p_.spines; ++a)
            group.push_back(add_switch(
                fmt::format("s{}{}-{:02}{}", r, pod_name, a, plane_suffix(p_.planes, pl)), 2, r, pl,
                pod, -1));
          for (int s = pod * per_pod; s < std::min(p_.segments, (pod + 1) * per_pod); ++s)
            join_leaf(leaf_[leaf_index(r, pl, s)], s - pod * per_pod, group.data());
          core_children_.push_back(std::move(group));  // core child index = pod x rails + rail
        }
  }

  // Fat-tree spines shared by every rail: a group per plane (2 tiers) or per pod and plane.
  void add_shared_spines() {
    for (int pl = 0; pl < p_.planes; ++pl)
      for (int pod = 0; pod < p_.pods; ++pod) {
        std::vector<int> group;
        for (int a = 0; a < p_.spines; ++a)
          group.push_back(add_switch(
              p_.tiers == 2 ? fmt::format("sp-{:02}{}", a, plane_suffix(p_.planes, pl))
                            : fmt::format("ag{}-{:02}{}", pod, a, plane_suffix(p_.planes, pl)),
              2, kAnyRail, pl, pod, -1));
        int first = pod * std::max(1, p_.segments_per_pod);
        int count = p_.tiers == 2 ? p_.segments : p_.segments_per_pod;
        for (int i = 0; i < count && first + i < p_.segments; ++i)
          for (int r = 0; r < p_.rails; ++r)
            join_leaf(leaf_[leaf_index(r, pl, first + i)], i * p_.rails + r, group.data());
        core_children_.push_back(std::move(group));  // core child index = pod
      }
  }

  // Core group `a` (per plane) joins spine `a` of every child group (rails or pods) with
  // core_per_pair parallel links to each of its `cores` switches.
  void add_core() {
    int children = p_.core_children;
    int up_base = p_.spine_down_capacity;
    for (int pl = 0; pl < p_.planes; ++pl)
      for (int a = 0; a < p_.spines; ++a)
        for (int c = 0; c < p_.cores; ++c) {
          int core = add_switch(fmt::format("c{:02}-{:02}{}", a, c, plane_suffix(p_.planes, pl)),
                                3, kAnyRail, pl, 0, -1);
          for (int child = 0; child < children; ++child) {
            int spine = core_children_[size_t(pl) * children + child][a];
            for (int t = 0; t < p_.core_per_pair; ++t)
              link(sw_port(spine, up_base + c * p_.core_per_pair + t + 1),
                   sw_port(core, child * p_.core_per_pair + t + 1), p_.o.port_gbps);
          }
        }
  }

  const Plan& p_;
  FabricData d_;
  std::vector<int> leaf_;
  std::vector<std::vector<int>> core_children_;  // spine groups, [plane][child]
};

}  // namespace

std::optional<FabricKind> parse_fabric_kind(std::string_view text) {
  if (text == "same-rail-t2") return FabricKind::kSameRailT2;
  if (text == "fat-tree") return FabricKind::kFatTree;
  if (text == "rail-only") return FabricKind::kRailOnly;
  return std::nullopt;
}

const char* fabric_kind_name(FabricKind kind) {
  switch (kind) {
    case FabricKind::kSameRailT2:
      return "same-rail-t2";
    case FabricKind::kFatTree:
      return "fat-tree";
    case FabricKind::kRailOnly:
      return "rail-only";
  }
  return "?";
}

Fabric generate_fabric(const GenerateOptions& options) {
  Plan plan(options);
  return Builder(plan).build();
}

int max_gpus(const GenerateOptions& options) {
  // Grow until the plan refuses; plans are monotone in the GPU count.
  GenerateOptions o = options;
  int lo = o.gpus_per_host, hi = o.gpus_per_host;
  auto fits = [&](int gpus) {
    o.gpus = gpus;
    try {
      Plan plan(o);
      return true;
    } catch (const FabricError&) {
      return false;
    }
  };
  if (!fits(lo)) return 0;
  while (hi < (1 << 26) && fits(hi * 2)) hi *= 2;
  if (hi >= (1 << 26)) return hi;
  int step_lo = hi / o.gpus_per_host, step_hi = 2 * hi / o.gpus_per_host;  // in hosts
  while (step_hi - step_lo > 1) {
    int mid = (step_lo + step_hi) / 2;
    if (fits(mid * o.gpus_per_host))
      step_lo = mid;
    else
      step_hi = mid;
  }
  return step_lo * o.gpus_per_host;
}

}  // namespace astral::topo
