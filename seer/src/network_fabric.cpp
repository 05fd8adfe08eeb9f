// Seer's network from topo's fabric model: the cost model needs tiers (how many hosts one switch
// group reaches, whether it serves one rail, its oversubscription), not individual links.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "astral/seer/network.hpp"
#include "astral/seer/spec.hpp"
#include "astral/topo/fabric_summary.hpp"
#include "units.hpp"

namespace astral::seer {
namespace {

// Hosts below each switch, following links downward (a link's b end is the upper tier).
std::vector<std::set<int>> hosts_below(const topo::Fabric& fabric) {
  const auto& switches = fabric.switches();
  std::vector<std::set<int>> below(switches.size());
  std::vector<int> order(switches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return switches[x].tier < switches[y].tier; });
  for (int sw : order) {
    for (int l : fabric.switch_links(sw)) {
      const topo::Link& link = fabric.links()[l];
      if (link.b.sw != sw) continue;  // an uplink of this switch
      if (link.a.is_host()) {
        below[sw].insert(link.a.host);
      } else {
        below[sw].insert(below[link.a.sw].begin(), below[link.a.sw].end());
      }
    }
  }
  return below;
}

}  // namespace

Network network_from_fabric(const topo::Fabric& fabric, const HardwareSpec& hw) {
  if (fabric.hosts().empty()) throw SpecError(fmt::format("fabric '{}': no hosts", fabric.name()));
  const topo::NodeProfile& profile = fabric.profile_of(0);
  if (profile.nics.empty()) throw SpecError(fmt::format("fabric '{}': hosts have no NICs", fabric.name()));

  Network n;
  n.name = fabric.name();
  n.hosts = int(fabric.hosts().size());
  n.gpus_per_host = profile.gpus;
  n.rails = fabric.rails();
  n.nvlink_bandwidth = profile.nvlink_gbps / 8 * kGB;
  n.nvlink_latency = hw.nvlink_latency;
  n.nvls = hw.nvls;
  const topo::NicModel& nic = profile.nics.front();
  n.nic_bandwidth = nic.port_gbps * nic.ports / 8 * kGB;
  n.net_latency = hw.net_latency;
  n.nvlink_efficiency = hw.eff.nvlink;
  n.nvls_efficiency = hw.eff.nvls;
  n.net_efficiency = hw.eff.net;

  topo::FabricSummary summary = topo::summarize(fabric);
  auto below = hosts_below(fabric);
  int top_tier = 0;
  for (const auto& sw : fabric.switches()) top_tier = std::max(top_tier, sw.tier);
  for (int tier = 1; tier <= top_tier; ++tier) {
    Tier t;
    t.name = tier == 1 ? "leaf" : tier == 2 ? "spine" : "core";
    int reach = std::numeric_limits<int>::max();
    bool rail_local = true;
    for (size_t s = 0; s < fabric.switches().size(); ++s) {
      const topo::Switch& sw = fabric.switches()[s];
      if (sw.tier != tier || below[s].empty()) continue;
      reach = std::min(reach, int(below[s].size()));
      rail_local = rail_local && sw.rail != topo::kAnyRail;
    }
    if (reach == std::numeric_limits<int>::max()) continue;  // a tier with no hosts below
    // A tier never reaches fewer hosts than the one below it (planes can make counts uneven).
    t.hosts = std::max(reach, n.tiers.empty() ? 0 : n.tiers.back().hosts);
    t.rail_local = rail_local;
    for (const auto& ts : summary.tiers)
      if (ts.tier == tier && ts.oversubscription > 1) t.oversubscription = ts.oversubscription;
    n.tiers.push_back(t);
  }
  if (n.tiers.empty()) throw SpecError(fmt::format("fabric '{}': no switch has hosts below it", fabric.name()));
  // The top tier spans every host it can reach; a rail-only fabric has no tier joining rails and
  // cross-rail traffic then goes through NVLink (PXN), which the cost model handles.
  n.tiers.back().hosts = std::max(n.tiers.back().hosts, n.hosts);
  return n;
}

}  // namespace astral::seer
