// Fat tree with ECMP against same-rail Tier-2, row by row.
#include "astral/seer/flowsim_compare.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace astral::seer {
namespace {

// The failure's element in this fabric and the options that take it down.
FailureOutcome apply_failure(const topo::Fabric& f, const std::string& failure, FlowSimOptions& o) {
  FailureOutcome out;
  out.failure = failure;
  auto first_switch = [&](int tier) -> std::string {
    for (const auto& s : f.switches())
      if (s.tier == tier) return s.name;
    throw std::invalid_argument(fmt::format("--failure {}: the fabric has no tier-{} switch", failure, tier));
  };
  if (failure == "spine" || failure == "tor") {
    out.element = first_switch(failure == "spine" ? 2 : 1);
    o.fail_switches.push_back(out.element);
  } else if (failure == "nic-port") {
    out.element = f.endpoint_label(f.links()[size_t(f.link_at_host_port(0, 0, 1))].a);
    o.fail_links.push_back(out.element);
  } else if (failure.rfind("links:", 0) == 0) {
    int k = std::atoi(failure.c_str() + 6);
    if (k < 1) throw std::invalid_argument(fmt::format("--failure '{}': links:K needs K >= 1", failure));
    o.fail_random_links = k;
    out.element = fmt::format("{} random links", k);
  } else {
    throw std::invalid_argument(
        fmt::format("--failure '{}': use spine, tor, nic-port or links:K", failure));
  }
  return out;
}

// GPUs whose NIC lost every port (cut off: the job stops) or some ports (degraded: dual-ToR).
void blast_radius(const topo::Fabric& f, const FlowSimOptions& o, FailureOutcome& out) {
  std::set<int> down;
  for (const auto& name : o.fail_switches)
    if (auto sw = f.find_switch(name))
      for (int l : f.switch_links(*sw)) down.insert(l);
  for (const auto& spec : o.fail_links)
    if (auto l = f.find_link(spec)) down.insert(*l);
  for (size_t h = 0; h < f.hosts().size(); ++h) {
    const auto& profile = f.profile_of(int(h));
    for (size_t n = 0; n < profile.nics.size(); ++n) {
      int lost = 0;
      for (int p = 1; p <= profile.nics[n].ports; ++p) {
        int l = f.link_at_host_port(int(h), int(n), p);
        lost += l < 0 || down.count(l) ? 1 : 0;
      }
      if (lost == 0) continue;
      int gpus = int(profile.nics[n].gpus.size());
      (lost == profile.nics[n].ports ? out.gpus_cut_off : out.gpus_degraded) += gpus;
    }
  }
}

double slowdown(const FlowSimResult& with, const FlowSimResult& without) {
  return without.completion_s > 0 ? with.completion_s / without.completion_s - 1 : 0;
}

void run_failures(const topo::Fabric& f, const FlowSimOptions& o, const std::vector<std::string>& failures,
                  const Progress& progress, CompareRow& row) {
  FlowSimOptions ring = o;
  ring.pattern = TrafficPattern::kRingAllReduce;
  FlowSimResult ring_base = simulate(f, ring);
  row.allreduce_efficiency = ring_base.efficiency;
  for (const std::string& failure : failures) {
    FlowSimOptions a = o;
    FailureOutcome out = apply_failure(f, failure, a);
    blast_radius(f, a, out);
    if (progress) progress(fmt::format("{} {}: failure {} ({})", row.fabric_kind, row.routing, failure, out.element));
    FlowSimResult r = simulate(f, a);
    FlowSimOptions b = a;
    b.pattern = TrafficPattern::kRingAllReduce;
    FlowSimResult rr = simulate(f, b);
    out.alltoall_efficiency = r.efficiency;
    out.alltoall_slowdown = slowdown(r, row.result);
    out.allreduce_efficiency = rr.efficiency;
    out.allreduce_slowdown = slowdown(rr, ring_base);
    row.failures.push_back(out);
  }
}

}  // namespace

FabricComparison compare_fabrics(int gpus, const topo::GenerateOptions& fabric, const FlowSimOptions& sim,
                                 const Progress& progress, const std::vector<std::string>& failures) {
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
      CompareRow row;
      row.fabric_kind = topo::fabric_kind_name(g.kind);
      row.routing = spec.routing;
      row.summary = summary;
      row.result = simulate(f, o, progress);
      c.rows.push_back(std::move(row));
      if (!failures.empty()) run_failures(f, o, failures, progress, c.rows.back());
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
    for (const auto& [gbps, n] : row.summary.links_by_gbps) r["links_by_gbps"][fmt::format("{}", gbps)] = n;
    if (!row.failures.empty()) r["allreduce_efficiency"] = row.allreduce_efficiency;
    for (const FailureOutcome& x : row.failures)
      r["failures"].push_back({{"failure", x.failure}, {"element", x.element},
                               {"gpus_cut_off", x.gpus_cut_off}, {"gpus_degraded", x.gpus_degraded},
                               {"alltoall_efficiency", x.alltoall_efficiency},
                               {"alltoall_slowdown", x.alltoall_slowdown},
                               {"allreduce_efficiency", x.allreduce_efficiency},
                               {"allreduce_slowdown", x.allreduce_slowdown}});
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
    bool header = false;
    for (const CompareRow& row : c.rows)
      for (const FailureOutcome& x : row.failures) {
        if (!header)
          out += fmt::format("{:>6}  {:<14} {:<17} {:<9} {:<22} {:>7} {:>8} {:>15} {:>15}\n", "GPUs",
                             "fabric", "routing", "failure", "element", "cut off", "degraded",
                             "all-to-all", "all-reduce");
        header = true;
        out += fmt::format("{:>6}  {:<14} {:<17} {:<9} {:<22} {:>7} {:>8} {:>6.3f} {:>+7.1f}% {:>6.3f} {:>+7.1f}%\n",
                           c.gpus, row.fabric_kind, row.routing, x.failure, x.element, x.gpus_cut_off,
                           x.gpus_degraded, x.alltoall_efficiency, 100 * x.alltoall_slowdown,
                           x.allreduce_efficiency, 100 * x.allreduce_slowdown);
      }
    if (header) out += "\n";
  }
  return out;
}

}  // namespace astral::seer
