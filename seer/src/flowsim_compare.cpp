// Fat tree with ECMP against same-rail Tier-2, row by row.
#include "astral/seer/flowsim_compare.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace astral::seer {

FabricComparison compare_fabrics(int gpus, const topo::GenerateOptions& fabric, const FlowSimOptions& sim,
                           const Progress& progress) {
  struct Spec {
    topo::FabricKind kind;
    const char* routing;
  };
  const Spec specs[] = {{topo::FabricKind::kFatTree, "ecmp"},
                        {topo::FabricKind::kFatTree, "same-rail"},
                        {topo::FabricKind::kSameRailT2, "same-rail"},
                        {topo::FabricKind::kSameRailT2, "same-rail-pinned"}};
  FabricComparison c;
  c.gpus = gpus;
  for (int k = 0; k < 2; ++k) {
    topo::GenerateOptions g = fabric;
    g.gpus = gpus;
    g.kind = k == 0 ? topo::FabricKind::kFatTree : topo::FabricKind::kSameRailT2;
    if (g.kind != topo::FabricKind::kFatTree) g.tiers = 0;
    if (progress) progress(fmt::format("{} GPUs: generating {}", gpus, topo::fabric_kind_name(g.kind)));
    topo::Fabric f = topo::generate_fabric(g);
    topo::FabricSummary summary = topo::summarize(f);
    for (const Spec& spec : specs) {
      if (spec.kind != g.kind) continue;
      FlowSimOptions o = sim;
      topo::RoutingPolicy r = *topo::parse_routing(spec.routing);
      r.seed = sim.routing.seed;
      r.polarisation = sim.routing.polarisation;
      o.routing = r;
      if (progress) progress(fmt::format("{} GPUs: {} with {}", gpus, topo::fabric_kind_name(g.kind), spec.routing));
      c.rows.push_back({topo::fabric_kind_name(g.kind), spec.routing, summary, simulate(f, o, progress)});
    }
  }
  auto eff = [&](size_t i) { return c.rows[i].result.efficiency; };
  if (eff(0) > 0) c.gain = eff(2) / eff(0) - 1;
  if (eff(1) > 0) c.gain_vs_pxn = eff(2) / eff(1) - 1;
  if (eff(0) > 0) c.pinned_gain = eff(3) / eff(0) - 1;
  return c;
}

nlohmann::json to_json(const FabricComparison& c) {
  nlohmann::json j;
  j["gpus"] = c.gpus;
  j["gain"] = c.gain;
  j["gain_vs_fat_tree_pxn"] = c.gain_vs_pxn;
  j["pinned_gain"] = c.pinned_gain;
  for (const CompareRow& row : c.rows) {
    nlohmann::json r = to_json(row.result);
    r["fabric_kind"] = row.fabric_kind;
    r["tiers"] = row.summary.tiers.size();
    int switches = 0;
    for (const auto& t : row.summary.tiers) switches += t.switches;
    r["switches"] = switches;
    r["optics"] = row.summary.optics;
    j["rows"].push_back(std::move(r));
  }
  return j;
}

std::string format_comparisons(const std::vector<FabricComparison>& all) {
  std::string out;
  if (all.empty()) return out;
  const FlowSimResult& first = all[0].rows[0].result;
  out += fmt::format("{} traffic, {} QP{} per connection and port, {} placement{}{}\n\n",
                     first.pattern, first.qps, first.qps > 1 ? "s" : "", first.placement,
                     first.jobs > 1 ? fmt::format(", {} jobs", first.jobs) : "",
                     first.trials > 1 ? fmt::format(", mean of {} trials", first.trials) : "");
  out += fmt::format("{:>6}  {:<14} {:<17} {:>5} {:>8} {:>8} {:>10} {:>8}\n", "GPUs", "fabric",
                     "routing", "tiers", "switches", "optics", "efficiency", "busbw");
  for (const FabricComparison& c : all) {
    for (const CompareRow& row : c.rows) {
      int switches = 0;
      for (const auto& t : row.summary.tiers) switches += t.switches;
      out += fmt::format("{:>6}  {:<14} {:<17} {:>5} {:>8} {:>8} {:>10.3f} {:>7.1f}G\n", c.gpus,
                         row.fabric_kind, row.routing, row.summary.tiers.size(), switches,
                         row.summary.optics, row.result.efficiency, row.result.busbw_gbytes_s);
    }
    out += fmt::format(
        "{:>6}  same-rail-t2 / fat-tree ecmp: {:+.1f} %   (vs fat-tree with PXN: {:+.1f} %, "
        "pinned: {:+.1f} %)\n\n",
        c.gpus, 100 * c.gain, 100 * c.gain_vs_pxn, 100 * c.pinned_gain);
  }
  return out;
}

}  // namespace astral::seer
