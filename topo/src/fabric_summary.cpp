// `astral fabric show`: counts per tier, oversubscription, bisection bandwidth and optics.
#include "astral/topo/fabric_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

namespace astral::topo {
namespace {

int tier_of(const Fabric& f, const Endpoint& e) { return e.is_host() ? 0 : f.switches()[e.sw].tier; }

const char* tier_name(int tier) {
  switch (tier) {
    case 0:
      return "host";
    case 1:
      return "leaf";
    case 2:
      return "spine";
    default:
      return "core";
  }
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

}  // namespace

FabricSummary summarize(const Fabric& f) {
  FabricSummary s;
  s.name = f.name();
  s.kind = f.kind();
  s.hosts = int(f.hosts().size());
  s.gpus = f.gpu_count();
  s.rails = f.rails();
  s.planes = f.planes();
  s.warnings = f.warnings();

  int top = 0;
  for (const Switch& sw : f.switches()) top = std::max(top, sw.tier);
  s.tiers.resize(top);
  for (int t = 0; t < top; ++t) s.tiers[t].tier = t + 1;
  for (const Switch& sw : f.switches()) {
    s.tiers[sw.tier - 1].switches++;
    s.tiers[sw.tier - 1].ports_total += sw.radix;
  }

  std::set<std::pair<int, int>> used_ports;
  std::map<std::pair<int, int>, LinkClassSummary> classes;
  std::map<std::pair<int, int>, std::map<double, long>> class_speeds;
  std::vector<double> up_from_tier(top + 1, 0.0);
  UnionFind switches_joined(f.switches().size());
  for (const Link& l : f.links()) {
    int lo = tier_of(f, l.a), hi = tier_of(f, l.b);
    if (lo > hi) std::swap(lo, hi);
    auto& c = classes[{lo, hi}];
    c.lower_tier = lo;
    c.upper_tier = hi;
    c.links++;
    class_speeds[{lo, hi}][l.gbps]++;
    bool up = l.state == LinkState::kUp;
    if (!up) c.down++;
    c.total_gbps += l.gbps;
    if (up && lo < hi) up_from_tier[lo] += l.gbps;
    for (const Endpoint* e : {&l.a, &l.b}) {
      if (e->is_host()) continue;
      used_ports.insert({e->sw, e->port});
      TierSummary& t = s.tiers[f.switches()[e->sw].tier - 1];
      bool is_lower_end = tier_of(f, *e) == lo && lo != hi;
      (is_lower_end ? t.up_gbps : t.down_gbps) += l.gbps;
    }
    s.links_by_gbps[l.gbps]++;
    if (l.media == LinkMedia::kOptic) {
      if (l.a.is_host()) s.optics_by_gbps[l.gbps]++;
    }
    if (!l.a.is_host() && up) switches_joined.join(l.a.sw, l.b.sw);
  }
  // Switch-side transceivers: one per used front-panel port of an optical link.
  std::set<std::pair<int, int>> optic_ports;
  for (const Link& l : f.links()) {
    if (l.media != LinkMedia::kOptic) continue;
    for (const Endpoint* e : {&l.a, &l.b})
      if (!e->is_host() && optic_ports.insert({e->sw, e->port}).second)
        s.optics_by_gbps[f.switches()[e->sw].port_gbps]++;
  }
  for (const auto& [gbps, n] : s.optics_by_gbps) s.optics += n;
  s.switches = long(f.switches().size());
  for (const auto& [sw, port] : used_ports) s.tiers[f.switches()[sw].tier - 1].ports_used++;
  for (TierSummary& t : s.tiers) t.oversubscription = t.up_gbps > 0 ? t.down_gbps / t.up_gbps : 0;
  for (auto& [key, c] : classes) {
    long best = 0;
    for (const auto& [gbps, n] : class_speeds[key])
      if (n > best) best = n, c.gbps_each = gbps;
    s.link_classes.push_back(c);
  }

  double narrowest = -1;
  for (int t = 0; t < top; ++t)
    if (narrowest < 0 || up_from_tier[t] < narrowest) narrowest = up_from_tier[t];
  s.bisection_gbps = narrowest > 0 ? narrowest / 2 : 0;
  s.bisection_per_gpu_gbps = s.gpus > 0 ? 2 * s.bisection_gbps / s.gpus : 0;

  // Is there a network path between leaves of different rails?
  std::map<int, std::set<int>> rails_by_component;
  for (const Link& l : f.links()) {
    if (!l.a.is_host()) continue;
    int rail = f.profile_of(l.a.host).nics[l.a.nic].rail;
    rails_by_component[switches_joined.find(l.b.sw)].insert(rail);
  }
  s.cross_rail_network = f.rails() == 1;
  for (const auto& [component, rails] : rails_by_component)
    if (rails.size() > 1) s.cross_rail_network = true;
  return s;
}

nlohmann::json to_json(const FabricSummary& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["kind"] = s.kind;
  j["hosts"] = s.hosts;
  j["gpus"] = s.gpus;
  j["rails"] = s.rails;
  j["planes"] = s.planes;
  for (const TierSummary& t : s.tiers)
    j["tiers"].push_back({{"tier", t.tier},
                          {"role", tier_name(t.tier)},
                          {"switches", t.switches},
                          {"ports_total", t.ports_total},
                          {"ports_used", t.ports_used},
                          {"down_gbps", t.down_gbps},
                          {"up_gbps", t.up_gbps},
                          {"oversubscription", t.oversubscription}});
  for (const LinkClassSummary& c : s.link_classes)
    j["links"].push_back({{"between", fmt::format("{}-{}", tier_name(c.lower_tier),
                                                  tier_name(c.upper_tier))},
                          {"links", c.links},
                          {"down", c.down},
                          {"gbps_each", c.gbps_each},
                          {"total_gbps", c.total_gbps}});
  j["bisection_gbps"] = s.bisection_gbps;
  j["bisection_per_gpu_gbps"] = s.bisection_per_gpu_gbps;
  j["cross_rail_network"] = s.cross_rail_network;
  j["optics"] = s.optics;
  j["switches"] = s.switches;
  for (const auto& [gbps, n] : s.links_by_gbps) j["links_by_gbps"][fmt::format("{}", gbps)] = n;
  for (const auto& [gbps, n] : s.optics_by_gbps)
    j["optics_by_gbps"][fmt::format("{}", gbps)] = n;
  j["warnings"] = s.warnings;
  return j;
}

std::string format_summary(const FabricSummary& s) {
  std::string out;
  out += fmt::format("fabric   {} ({})\n", s.name, s.kind);
  out += fmt::format("hosts    {} x {} GPUs = {} GPUs, {} rails, {} plane{}\n", s.hosts,
                     s.hosts ? s.gpus / s.hosts : 0, s.gpus, s.rails, s.planes,
                     s.planes > 1 ? "s" : "");
  out += fmt::format("\n{:<6} {:<6} {:>9} {:>17} {:>12} {:>12} {:>8}\n", "tier", "role", "switches",
                     "ports used/total", "down Tb/s", "up Tb/s", "oversub");
  for (const TierSummary& t : s.tiers)
    out += fmt::format("{:<6} {:<6} {:>9} {:>17} {:>12.1f} {:>12.1f} {:>8}\n", t.tier,
                       tier_name(t.tier), t.switches,
                       fmt::format("{}/{}", t.ports_used, t.ports_total), t.down_gbps / 1000,
                       t.up_gbps / 1000,
                       t.oversubscription > 0 ? fmt::format("{:.2f}:1", t.oversubscription) : "-");
  out += fmt::format("\n{:<12} {:>9} {:>7} {:>8} {:>12}\n", "links", "count", "down", "speed",
                     "total Tb/s");
  for (const LinkClassSummary& c : s.link_classes)
    out += fmt::format("{:<12} {:>9} {:>7} {:>7}G {:>12.1f}\n",
                       fmt::format("{}-{}", tier_name(c.lower_tier), tier_name(c.upper_tier)),
                       c.links, c.down, c.gbps_each, c.total_gbps / 1000);
  out += fmt::format("\nbisection {:.1f} Tb/s ({:.0f} Gb/s per GPU across the cut)\n",
                     s.bisection_gbps / 1000, s.bisection_per_gpu_gbps);
  if (!s.cross_rail_network)
    out += "cross-rail traffic has no network path: it must be forwarded over NVLink (PXN)\n";
  std::string optics;
  for (auto it = s.optics_by_gbps.rbegin(); it != s.optics_by_gbps.rend(); ++it)
    optics += fmt::format("{}{}x {}G", optics.empty() ? "" : ", ", it->second, it->first);
  out += fmt::format("optics   {} transceivers ({})\n", s.optics, optics.empty() ? "none" : optics);
  std::string links;
  for (auto it = s.links_by_gbps.rbegin(); it != s.links_by_gbps.rend(); ++it)
    links += fmt::format("{}{}x {}G", links.empty() ? "" : ", ", it->second, it->first);
  out += fmt::format("cost     {} switches, {} transceivers, links {}\n", s.switches, s.optics,
                     links.empty() ? "none" : links);
  for (const std::string& w : s.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace astral::topo
