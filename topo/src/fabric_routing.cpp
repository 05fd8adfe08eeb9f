// ECMP tables (BFS per destination leaf over the switch graph), path enumeration and per-QP path
// selection by hash or by pinning.
#include "astral/topo/fabric_routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_set>

namespace astral::topo {

std::optional<RoutingPolicy> parse_routing(std::string_view text) {
  RoutingPolicy p;
  if (text == "ecmp") return p;
  if (text == "pinned") {
    p.choice = PathChoice::kPinned;
    return p;
  }
  if (text == "same-rail") {
    p.pxn = true;
    return p;
  }
  if (text == "same-rail-pinned") {
    p.pxn = true;
    p.choice = PathChoice::kPinned;
    return p;
  }
  return std::nullopt;
}

std::string routing_name(const RoutingPolicy& p) {
  if (p.pxn) return p.choice == PathChoice::kPinned ? "same-rail-pinned" : "same-rail";
  return p.choice == PathChoice::kPinned ? "pinned" : "ecmp";
}

// ECMP groups are shared: a leaf's group of uplinks is the same toward every other leaf. Each
// distinct group is stored once, in a deque, so the spans handed out never move.
struct Router::GroupStore {
  struct GroupHash {
    size_t operator()(std::span<const NextHop> v) const {
      std::uint64_t h = v.size();
      for (const NextHop& n : v) h = mix64(h ^ std::uint64_t(n.resource));
      return size_t(h);
    }
  };
  struct GroupEq {
    bool operator()(std::span<const NextHop> a, std::span<const NextHop> b) const {
      return a.size() == b.size() &&
             std::equal(a.begin(), a.end(), b.begin(), [](const NextHop& x, const NextHop& y) {
               return x.resource == y.resource;
             });
    }
  };
  std::mutex mutex;  // builds of different leaves (RouteTables::kOnDemand) may run concurrently
  std::deque<std::vector<NextHop>> groups;
  std::unordered_set<std::span<const NextHop>, GroupHash, GroupEq> ids;  // views of `groups`
};

Router::Router(const Fabric& fabric, RouteTables tables)
    : fabric_(fabric), switch_count_(int(fabric.switches().size())), groups_(std::make_unique<GroupStore>()) {
  build_ports();
  build_adjacency();
  routes_.resize(leaves_.size());
  if (tables == RouteTables::kOnDemand) {
    built_ = std::make_unique<std::once_flag[]>(leaves_.size());
    return;
  }
  for (size_t t = 0; t < leaves_.size(); ++t) build_leaf(int(t));
  all_built_ = true;
}

Router::~Router() = default;

void Router::build_ports() {
  const auto& profiles = fabric_.profiles();
  std::vector<int> ports_per_profile(profiles.size(), 0);
  for (size_t p = 0; p < profiles.size(); ++p) {
    nic_offset_base_.push_back(int(nic_port_offset_.size()));
    for (const NicModel& nic : profiles[p].nics) {
      nic_port_offset_.push_back(ports_per_profile[p]);
      nic_ports_.push_back(nic.ports);
      ports_per_profile[p] += nic.ports;
    }
  }
  host_port_base_.resize(fabric_.hosts().size());
  host_profile_.resize(fabric_.hosts().size());
  link_up_.resize(fabric_.links().size());
  for (size_t i = 0; i < fabric_.links().size(); ++i)
    link_up_[i] = fabric_.links()[i].state == LinkState::kUp;
  int total = 0;
  for (size_t h = 0; h < fabric_.hosts().size(); ++h) {
    host_profile_[h] = fabric_.hosts()[h].profile;
    host_port_base_[h] = total;
    total += ports_per_profile[fabric_.hosts()[h].profile];
  }
  port_link_.assign(total, -1);
  port_ordinal_.assign(fabric_.links().size(), -1);
  std::vector<std::vector<std::pair<std::pair<int, int>, int>>> by_leaf(switch_count_);
  for (size_t i = 0; i < fabric_.links().size(); ++i) {
    const Link& l = fabric_.links()[i];
    if (!l.a.is_host()) continue;
    const Endpoint& e = l.a;
    port_link_[host_port_base_[e.host] +
               nic_port_offset_[nic_offset_base_[fabric_.hosts()[e.host].profile] + e.nic] + e.port -
               1] = int(i);
    by_leaf[l.b.sw].push_back({{l.b.port, l.b.lane}, int(i)});
  }
  leaf_index_.assign(switch_count_, -1);
  for (int sw = 0; sw < switch_count_; ++sw) {
    auto& ports = by_leaf[sw];
    if (ports.empty()) continue;
    leaf_index_[sw] = int(leaves_.size());
    leaves_.push_back(sw);
    std::sort(ports.begin(), ports.end());
    for (size_t k = 0; k < ports.size(); ++k) port_ordinal_[ports[k].second] = int(k);
  }
  link_leaf_index_.assign(fabric_.links().size(), -1);
  for (size_t i = 0; i < fabric_.links().size(); ++i)
    if (fabric_.links()[i].a.is_host()) link_leaf_index_[i] = leaf_index_[fabric_.links()[i].b.sw];
  // Pin keys: a leaf's rank among the leaves of its rail and plane, plus its rail. A switch
  // carrying one rail's traffic (a same-rail spine) then spreads its destination leaves over its
  // uplinks by rank, and one carrying every rail (a fat tree's) by rank and rail; the raw leaf
  // index would not, as leaves of one rail can sit a multiple of the group size apart.
  std::map<std::pair<int, int>, int> seen;  // (rail, plane) -> leaves so far
  leaf_pin_key_.resize(leaves_.size());
  for (size_t leaf = 0; leaf < leaves_.size(); ++leaf) {
    const Switch& sw = fabric_.switches()[leaves_[leaf]];
    leaf_pin_key_[leaf] = seen[{sw.rail, sw.plane}]++ + std::max(sw.rail, 0);
  }
}

void Router::build_adjacency() {
  // Switch adjacency over links that are up.
  adj_offset_.assign(switch_count_ + 1, 0);
  const auto& links = fabric_.links();
  for (const Link& l : links)
    if (!l.a.is_host() && l.state == LinkState::kUp) adj_offset_[l.a.sw + 1]++, adj_offset_[l.b.sw + 1]++;
  for (int s = 0; s < switch_count_; ++s) adj_offset_[s + 1] += adj_offset_[s];
  adj_.resize(adj_offset_.back());
  std::vector<int> fill(adj_offset_.begin(), adj_offset_.end() - 1);
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    if (l.a.is_host() || l.state != LinkState::kUp) continue;
    adj_[fill[l.a.sw]++] = {link_resource(int(i), true), l.b.sw};
    adj_[fill[l.b.sw]++] = {link_resource(int(i), false), l.a.sw};
  }
}

// One destination leaf's table: a BFS from it over the switches, then each switch's group of
// next hops one step closer.
void Router::build_leaf(int leaf) const {
  auto r = std::make_unique<LeafRoutes>();
  r->dist.assign(switch_count_, kUnreachable);
  r->next.assign(switch_count_, {});
  std::vector<std::uint8_t>& d = r->dist;
  std::vector<int> queue(switch_count_);
  size_t head = 0, tail = 0;
  d[leaves_[leaf]] = 0;
  queue[tail++] = leaves_[leaf];
  while (head < tail) {
    int s = queue[head++];
    for (int k = adj_offset_[s]; k < adj_offset_[s + 1]; ++k) {
      int n = adj_[k].next_switch;
      if (d[n] == kUnreachable && d[s] + 1 < kUnreachable) {
        d[n] = std::uint8_t(d[s] + 1);
        queue[tail++] = n;
      }
    }
  }
  std::vector<NextHop> members;
  std::lock_guard lock(groups_->mutex);
  for (int s = 0; s < switch_count_; ++s) {
    if (d[s] == kUnreachable || d[s] == 0) continue;
    members.clear();
    for (int k = adj_offset_[s]; k < adj_offset_[s + 1]; ++k)
      if (d[adj_[k].next_switch] + 1 == d[s]) members.push_back(adj_[k]);
    auto it = groups_->ids.find(std::span<const NextHop>(members));
    if (it == groups_->ids.end()) it = groups_->ids.insert(std::span<const NextHop>(groups_->groups.emplace_back(members))).first;
    r->next[s] = *it;
  }
  routes_[leaf] = std::move(r);
}

double Router::resource_gbps(int resource) const {
  if (is_nvlink(resource)) {
    int gpu = (resource - 2 * int(fabric_.links().size())) / 2;
    return fabric_.profile_of(fabric_.gpu(gpu).host).nvlink_gbps;
  }
  const Link& l = fabric_.links()[link_of_resource(resource)];
  return l.state == LinkState::kUp ? l.gbps : 0.0;
}

std::string Router::resource_label(int resource) const {
  if (is_nvlink(resource)) {
    int index = resource - 2 * int(fabric_.links().size());
    GpuRef g = fabric_.gpu(index / 2);
    return fmt::format("{} GPU{} NVLink {}", fabric_.hosts()[g.host].name, g.gpu,
                       index % 2 == 0 ? "out" : "in");
  }
  const Link& l = fabric_.links()[link_of_resource(resource)];
  return resource_is_upward(resource)
             ? fabric_.endpoint_label(l.a) + " -> " + fabric_.endpoint_label(l.b)
             : fabric_.endpoint_label(l.b) + " -> " + fabric_.endpoint_label(l.a);
}

long Router::count_paths(int sw, int leaf) const {
  if (leaves_[leaf] == sw) return 1;
  long n = 0;
  for (const NextHop& h : next_hops(sw, leaf)) n += count_paths(h.next_switch, leaf);
  return n;
}

void Router::enumerate(int sw, int leaf, std::vector<int>& links, std::vector<int>& sws,
                       std::vector<std::pair<std::vector<int>, std::vector<int>>>& out,
                       size_t limit) const {
  if (out.size() >= limit) return;
  sws.push_back(sw);
  if (leaves_[leaf] == sw) {
    out.emplace_back(links, sws);
  } else {
    for (const NextHop& h : next_hops(sw, leaf)) {
      links.push_back(link_of_resource(h.resource));
      enumerate(h.next_switch, leaf, links, sws, out, limit);
      links.pop_back();
      if (out.size() >= limit) break;
    }
  }
  sws.pop_back();
}

std::vector<PathCandidate> Router::candidates(int src_gpu, int dst_gpu, size_t limit,
                                              long* total_paths) const {
  std::vector<PathCandidate> result;
  long total = 0;
  GpuRef s = fabric_.gpu(src_gpu), d = fabric_.gpu(dst_gpu);
  if (s.host < 0 || d.host < 0) {
    if (total_paths) *total_paths = 0;
    return result;
  }
  if (s.host == d.host) {
    PathCandidate c;
    c.nvlink_only = true;
    result.push_back(c);
    if (total_paths) *total_paths = 1;
    return result;
  }
  auto add_network_paths = [&](int src_host, int src_nic, int dst_nic, bool pxn, int via) {
    const NodeProfile& sp = fabric_.profile_of(src_host);
    const NodeProfile& dp = fabric_.profile_of(d.host);
    int ports = std::min(sp.nics[src_nic].ports, dp.nics[dst_nic].ports);
    size_t found = 0;
    for (int port = 1; port <= ports; ++port) {
      int sl = port_link(src_host, src_nic, port), dl = port_link(d.host, dst_nic, port);
      if (sl < 0 || dl < 0 || !link_up(sl) || !link_up(dl)) continue;
      int leaf = leaf_index(leaf_of_link(dl));
      int start = leaf_of_link(sl);
      if (!reachable(start, leaf)) continue;
      total += count_paths(start, leaf);
      std::vector<std::pair<std::vector<int>, std::vector<int>>> paths;
      std::vector<int> links, sws;
      enumerate(start, leaf, links, sws, paths, limit > found ? limit - found : 0);
      found += paths.size();
      for (auto& [path_links, path_switches] : paths) {
        PathCandidate c;
        c.pxn = pxn;
        c.via_gpu = via;
        c.src_link = sl;
        c.dst_link = dl;
        c.switch_links = std::move(path_links);
        c.switches = std::move(path_switches);
        result.push_back(std::move(c));
      }
    }
  };
  int src_nic = fabric_.nic_of_gpu(s.host, s.gpu), dst_nic = fabric_.nic_of_gpu(d.host, d.gpu);
  if (dst_nic < 0) {
    if (total_paths) *total_paths = 0;
    return result;
  }
  if (src_nic >= 0) add_network_paths(s.host, src_nic, dst_nic, false, -1);
  int dst_rail = fabric_.rail_of_gpu(d.host, d.gpu);
  int proxy = fabric_.gpu_on_rail(s.host, dst_rail);
  if (proxy >= 0 && proxy != s.gpu && fabric_.rail_of_gpu(s.host, s.gpu) != dst_rail)
    add_network_paths(s.host, fabric_.nic_on_rail(s.host, dst_rail), dst_nic, true,
                      fabric_.global_gpu(s.host, proxy));
  if (total_paths) *total_paths = total;
  return result;
}

std::string Router::describe(const PathCandidate& c) const {
  if (c.nvlink_only) return "NVLink (same host)";
  std::string out;
  if (c.pxn) {
    GpuRef via = fabric_.gpu(c.via_gpu);
    out = fmt::format("NVLink to GPU{} (PXN), ", via.gpu);
  }
  // Each switch with the port it leaves by: the port whose counters show this path's traffic.
  out += fabric_.endpoint_label(fabric_.links()[c.src_link].a);
  for (size_t k = 0; k < c.switches.size(); ++k) {
    int sw = c.switches[k];
    int out_link = k < c.switch_links.size() ? c.switch_links[k] : c.dst_link;
    const Link& l = fabric_.links()[out_link];
    const Endpoint& egress = l.a.sw == sw && !l.a.is_host() ? l.a : l.b;
    out += fmt::format(" -> {} p{}", fabric_.switches()[sw].name, Fabric::port_label(egress.port, egress.lane));
  }
  out += " -> " + fabric_.endpoint_label(fabric_.links()[c.dst_link].a);
  return out;
}

PathSelector::PathSelector(const Router& router, const RoutingPolicy& policy)
    : router_(router), policy_(policy) {
  size_t n = router.fabric().switches().size();
  seeds_.resize(n);
  for (size_t s = 0; s < n; ++s) seeds_[s] = mix64(policy.seed * 0x9e3779b97f4a7c15ULL + s + 1);
  double p = std::clamp(policy.polarisation, 0.0, 1.0);
  repeat_threshold_ = p >= 1.0 ? ~std::uint64_t{0} : std::uint64_t(p * 18446744073709551615.0);
}

bool PathSelector::route_links(int src_link, int dst_link, std::uint64_t flow_key,
                               std::vector<int>& out) const {
  size_t mark = out.size();
  out.push_back(Router::link_resource(src_link, true));
  if (!walk(router_.leaf_of_link(src_link), router_.leaf_index_of_link(dst_link),
            router_.port_ordinal(dst_link), flow_key, [&](int r) { out.push_back(r); })) {
    out.resize(mark);
    return false;
  }
  out.push_back(Router::link_resource(dst_link, false));
  return true;
}

bool PathSelector::route_nics(int src_host, int src_nic, int dst_host, int dst_nic, int qp,
                              std::uint64_t connection_key, std::vector<int>& out) const {
  int ports = std::min(router_.nic_ports(src_host, src_nic), router_.nic_ports(dst_host, dst_nic));
  std::uint64_t key = mix64(connection_key + kQpKeyStride * std::uint64_t(qp + 1));
  int port = ports == 1 ? 1 : qp % ports + 1;
  for (int attempt = 0; attempt < ports; ++attempt, port = port % ports + 1) {
    int sl = router_.port_link(src_host, src_nic, port);
    int dl = router_.port_link(dst_host, dst_nic, port);
    if (sl < 0 || dl < 0 || !router_.link_up(sl) || !router_.link_up(dl)) continue;
    if (route_links(sl, dl, key, out)) return true;
  }
  return false;
}

}  // namespace astral::topo
