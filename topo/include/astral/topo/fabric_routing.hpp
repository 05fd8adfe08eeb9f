#pragma once
// Paths through a fabric: ECMP groups per switch and destination leaf (shortest paths over links
// that are up), the candidate paths between two GPUs (direct, or via the NVLink hop to the
// same-rail GPU that NCCL's PXN uses), and how one QP picks its path: a hash of its 5-tuple with
// per-switch seeds (ECMP), or a deterministic choice by destination (path pinning).
//
// The flow simulator sees the fabric as resources: each direction of each link, plus each GPU's
// NVLink egress and ingress into the NVSwitch domain.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "astral/topo/fabric.hpp"

namespace astral::topo {

// 64-bit mixer (splitmix64 finaliser) used for ECMP hashes and flow keys.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The step between the flow keys of one connection's QPs (PathSelector::route_nics, roce_flow_key).
inline constexpr std::uint64_t kQpKeyStride = 0x9e3779b97f4a7c15ULL;

// The ECMP key of one RoCE QP: its two NIC ports' links stand for the source and destination
// addresses and its UDP source port for the QP, combined as route_nics combines a connection key
// with a QP; each switch then hashes it with its own seed (PathSelector::walk). The plugin's path
// planner and the monitor's path reader must agree on it exactly.
inline std::uint64_t roce_flow_key(int src_link, int dst_link, std::uint16_t udp_sport) {
  const std::uint64_t connection = mix64(std::uint64_t(std::uint32_t(src_link)) << 32 | std::uint32_t(dst_link));
  return mix64(connection + kQpKeyStride * std::uint64_t(udp_sport));
}

enum class PathChoice { kEcmp, kPinned };

struct RoutingPolicy {
  PathChoice choice = PathChoice::kEcmp;
  // Forward cross-rail traffic over NVLink to the source host's GPU on the destination's rail,
  // then stay on that rail (NCCL PXN, the default on rail-optimised hosts).
  bool pxn = false;
  std::uint64_t seed = 1;  // ECMP hash seed; each switch derives its own from it
  // ECMP polarisation: the fraction of flows whose hash at a stage repeats the previous stage's
  // (correlated hash functions across tiers), so they take the same member index again. The busiest
  // link of a later stage then carries about 1 + (group size - 1) x P times its share: HPN's
  // measured 3x port skew is P ~ 0.03 with 64-way groups; P = 1 is the degenerate bound where a
  // stage collapses onto one member.
  double polarisation = 0.0;
};

// "ecmp" | "pinned" | "same-rail" (PXN + ECMP) | "same-rail-pinned" (PXN + pinning).
std::optional<RoutingPolicy> parse_routing(std::string_view text);
std::string routing_name(const RoutingPolicy& policy);

// One next hop of an ECMP group.
struct NextHop {
  int resource = -1;  // the link direction taken
  int next_switch = -1;
};

// A path between two GPUs, for inspection (`astral fabric paths`, the monitor).
struct PathCandidate {
  bool pxn = false;     // first an NVLink hop to via_gpu
  int via_gpu = -1;     // global GPU index of the PXN proxy, or -1
  bool nvlink_only = false;  // both GPUs on one host
  int src_link = -1;    // host link leaving the source NIC port
  int dst_link = -1;    // host link into the destination NIC port
  std::vector<int> switch_links;  // switch-to-switch links in order
  std::vector<int> switches;      // switches visited, leaf to leaf
};

// Which ECMP tables a Router builds up front. A table is one destination leaf's: a BFS over the
// switches (about 1 ms per leaf at 131K GPUs). The simulator needs all of them; a process that
// routes its own connections only (the NCCL plugin's path planner) needs the few leaves its peers
// sit on, and builds those on first use (thread-safe).
enum class RouteTables { kAll, kOnDemand };

class Router {
 public:
  // Builds the ECMP tables from the fabric's current link states (a down link carries nothing and
  // is left out of every group, as after routing converges).
  explicit Router(const Fabric& fabric, RouteTables tables = RouteTables::kAll);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  const Fabric& fabric() const { return fabric_; }

  // Resources.
  int resource_count() const { return 2 * int(fabric_.links().size()) + 2 * fabric_.gpu_count(); }
  static int link_resource(int link, bool upward) { return 2 * link + (upward ? 0 : 1); }
  int nvlink_out(int gpu) const { return 2 * int(fabric_.links().size()) + 2 * gpu; }
  int nvlink_in(int gpu) const { return nvlink_out(gpu) + 1; }
  bool is_nvlink(int resource) const { return resource >= 2 * int(fabric_.links().size()); }
  static int link_of_resource(int resource) { return resource / 2; }
  static bool resource_is_upward(int resource) { return resource % 2 == 0; }
  double resource_gbps(int resource) const;  // 0 for a link that is down
  std::string resource_label(int resource) const;  // "r3-07:65 -> s3-00:8", "GPU 17 NVLink out"

  // Host ports.
  int port_link(int host, int nic, int port) const {
    return port_link_[host_port_base_[host] + nic_port_offset_[nic_offset_base_[host_profile_[host]] + nic] +
                      port - 1];
  }
  int nic_ports(int host, int nic) const {
    return nic_ports_[nic_offset_base_[host_profile_[host]] + nic];
  }
  // Link states as they were when the Router was built.
  bool link_up(int link) const { return link_up_[link] != 0; }
  int leaf_of_link(int host_link) const { return fabric_.links()[host_link].b.sw; }
  // Leaf index of the leaf a host link attaches to.
  int leaf_index_of_link(int host_link) const { return link_leaf_index_[host_link]; }
  // Position of a host link among its leaf's host ports; destination-based pinning uses it.
  int port_ordinal(int host_link) const { return port_ordinal_[host_link]; }

  // ECMP.
  int leaf_count() const { return int(leaves_.size()); }
  int leaf_index(int sw) const { return leaf_index_[sw]; }  // -1 when not a leaf
  int leaf_switch(int leaf) const { return leaves_[leaf]; }
  // What destination-based pinning spreads a leaf's flows by beyond the first stage (see build).
  int leaf_pin_key(int leaf) const { return leaf_pin_key_[leaf]; }
  // Next hops from `sw` toward leaf index `leaf`; empty when unreachable or sw is that leaf.
  std::span<const NextHop> next_hops(int sw, int leaf) const { return routes(leaf).next[sw]; }
  bool reachable(int sw, int leaf) const { return dist(leaf, sw) != kUnreachable; }
  int hops(int sw, int leaf) const { return dist(leaf, sw); }

  // Every shortest path between two GPUs on every plane, direct and through PXN, up to `limit`
  // per kind; total_paths receives the full count (ECMP width).
  std::vector<PathCandidate> candidates(int src_gpu, int dst_gpu, size_t limit,
                                        long* total_paths = nullptr) const;
  std::string describe(const PathCandidate& path) const;

 private:
  static constexpr std::uint8_t kUnreachable = 255;
  // Toward one destination leaf: switch hops from every switch, and its ECMP group (empty when
  // unreachable or the switch is that leaf). Spans point into groups_, which never move.
  struct LeafRoutes {
    std::vector<std::uint8_t> dist;
    std::vector<std::span<const NextHop>> next;
  };
  struct GroupStore;
  const LeafRoutes& routes(int leaf) const {
    if (!all_built_) std::call_once(built_[leaf], [&] { build_leaf(leaf); });
    return *routes_[leaf];
  }
  std::uint8_t dist(int leaf, int sw) const { return routes(leaf).dist[sw]; }
  void build_ports();
  void build_adjacency();
  void build_leaf(int leaf) const;
  void enumerate(int sw, int leaf, std::vector<int>& links, std::vector<int>& sws,
                 std::vector<std::pair<std::vector<int>, std::vector<int>>>& out, size_t limit) const;
  long count_paths(int sw, int leaf) const;

  const Fabric& fabric_;
  int switch_count_ = 0;
  std::vector<int> host_port_base_;
  std::vector<int> host_profile_;
  std::vector<char> link_up_;
  std::vector<int> link_leaf_index_;  // per host link; -1 for switch links
  std::vector<int> nic_offset_base_;  // per profile: its first entry in nic_port_offset_
  std::vector<int> nic_port_offset_;  // per profile and NIC: first port's offset within the host
  std::vector<int> nic_ports_;        // per profile and NIC: its port count
  std::vector<int> port_link_;                     // -1 when not cabled
  std::vector<int> port_ordinal_;                  // per link; -1 for switch links
  std::vector<int> leaves_;                        // switch index per leaf index
  std::vector<int> leaf_index_;                    // per switch
  std::vector<int> leaf_pin_key_;                  // per leaf index
  std::vector<int> adj_offset_;                    // switch adjacency over links that are up (CSR)
  std::vector<NextHop> adj_;
  bool all_built_ = false;
  mutable std::unique_ptr<std::once_flag[]> built_;           // per leaf, RouteTables::kOnDemand
  mutable std::vector<std::unique_ptr<LeafRoutes>> routes_;   // per leaf; set once
  mutable std::unique_ptr<GroupStore> groups_;                // distinct groups, shared by leaves
};

// A Router bound to one routing policy: picks the path of each QP. Cheap to make; copyable.
class PathSelector {
 public:
  PathSelector(const Router& router, const RoutingPolicy& policy);

  const RoutingPolicy& policy() const { return policy_; }

  // Appends the resources of QP `qp` of a connection between two NICs (host link up, switch
  // links, host link down). `connection_key` identifies the connection (its 5-tuple without the
  // QP's source port). QP k uses NIC port (k mod ports) on both ends, or the next port whose
  // links are up and joined (dual-ToR failover). Returns false, appending nothing, when no path
  // exists.
  bool route_nics(int src_host, int src_nic, int dst_host, int dst_nic, int qp,
                  std::uint64_t connection_key, std::vector<int>& out) const;
  // The same between two host ports' links.
  bool route_links(int src_link, int dst_link, std::uint64_t flow_key, std::vector<int>& out) const;

  // The switch-to-switch hops of one QP from leaf switch `sw` to leaf index `leaf` (route_links
  // without its two host links): visit(resource) per hop, in order. `ordinal` is the destination
  // port's ordinal on its leaf (pinning). False, after visiting a prefix, when a stage has no next
  // hop. Inline so that the flow simulator's class engine walks exactly the path route_links takes.
  template <class Visit>
  bool walk(int sw, int leaf, int ordinal, std::uint64_t flow_key, Visit&& visit) const {
    const int dst_sw = router_.leaf_switch(leaf);
    std::uint64_t hash = 0;
    for (int stage = 0; sw != dst_sw; ++stage) {
      auto group = router_.next_hops(sw, leaf);
      if (group.empty()) return false;
      size_t index = group.size() > 1 ? member(group.size(), sw, leaf, stage, ordinal, flow_key, hash) : 0;
      visit(group[index].resource);
      sw = group[index].next_switch;
    }
    return true;
  }

 private:
  std::uint64_t switch_seed(int sw) const { return seeds_[sw]; }
  // The group member a QP takes at one stage: by destination when pinned, else by its hash (or the
  // previous stage's hash again when polarised). `hash` carries the previous stage's hash.
  size_t member(size_t n, int sw, int leaf, int stage, int ordinal, std::uint64_t flow_key,
                std::uint64_t& hash) const {
    if (policy_.choice == PathChoice::kPinned)
      return size_t(ordinal + stage * (router_.leaf_pin_key(leaf) + 1)) % n;
    bool repeat = stage > 0 && repeat_threshold_ != 0 &&
                  (repeat_threshold_ == ~std::uint64_t{0} ||
                   mix64(flow_key ^ (0xc2b2ae3d27d4eb4fULL * std::uint64_t(stage))) < repeat_threshold_);
    if (!repeat) hash = mix64(flow_key ^ switch_seed(sw));
    // Lemire's multiply-shift: a uniform index in [0, n) from the high bits of the hash.
    return size_t((std::uint64_t(std::uint32_t(hash >> 32)) * n) >> 32);
  }

  const Router& router_;
  RoutingPolicy policy_;
  std::vector<std::uint64_t> seeds_;
  std::uint64_t repeat_threshold_ = 0;  // polarisation as a fraction of 2^64
};


}  // namespace astral::topo
