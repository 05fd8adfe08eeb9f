// The ECMP-efficiency table: producer (one simulation per entry), JSON form, reader, lookup.
#include "astral/seer/ecmp_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <astral/topo/fabric_summary.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "json_fields.hpp"

namespace astral::seer {
namespace {

// The highest switch tier any of the simulated traffic crossed.
int highest_tier(const FlowSimResult& r) {
  int tier = 1;
  for (const auto& d : r.loads) {
    if (d.max <= 0) continue;
    if (d.link_class == "leaf->spine" || d.link_class == "spine->leaf") tier = std::max(tier, 2);
    if (d.link_class == "spine->core" || d.link_class == "core->spine") tier = std::max(tier, 3);
  }
  return tier;
}

std::string canonical_pattern(std::string_view p) {
  if (p == "all-to-all" || p == "alltoall") return "alltoall";
  if (p == "all-reduce" || p == "allreduce" || p == "ring" || p == "ring-allreduce") return "ring";
  if (p == "tree-allreduce") return "tree";
  return std::string(p);
}

}  // namespace

EcmpTable make_ecmp_table(const topo::Fabric& f, const EcmpTableOptions& options,
                          const Progress& progress) {
  EcmpTable t;
  topo::FabricSummary summary = topo::summarize(f);
  t.fabric_name = f.name();
  t.design = f.kind();
  t.gpus = f.gpu_count();
  t.rails = f.rails();
  t.planes = f.planes();
  for (const auto& s : f.switches()) t.radix = std::max(t.radix, s.radix);
  t.tiers = int(summary.tiers.size());
  for (const auto& tier : summary.tiers) t.oversubscription = std::max(t.oversubscription, tier.oversubscription);
  t.routing = topo::routing_name(options.sim.routing);
  t.balance = options.sim.balance == QpBalance::kAdaptive ? "adaptive" : "equal-split";
  t.polarisation = options.sim.routing.polarisation;
  t.seed = options.sim.seed;
  t.bytes_per_gpu = options.sim.bytes;
  const int hosts = int(f.hosts().size());
  const int per_host = f.hosts().empty() ? 1 : f.profile_of(0).gpus;
  std::vector<int> sizes;
  for (int h = std::max(1, options.min_group_hosts); h < hosts; h *= 2) sizes.push_back(h);
  sizes.push_back(hosts);
  for (TrafficPattern pattern : options.patterns)
    for (Placement placement : options.placements)
      for (int qps : options.qps)
        for (int group_hosts : sizes) {
          FlowSimOptions o = options.sim;
          o.pattern = pattern;
          o.placement = placement;
          o.qps = qps;
          o.jobs = 1;
          o.fill = double(group_hosts) / hosts;
          o.goodput_limit = 0;
          if (progress)
            progress(fmt::format("{} {} GPUs, {}, {} QP", pattern_name(pattern), group_hosts * per_host,
                                 placement_name(placement), qps));
          FlowSimResult r = simulate(f, o);
          EcmpEntry e;
          e.pattern = pattern_name(pattern);
          e.placement = placement_name(placement);
          e.group_size = r.gpus;
          e.qps = qps;
          e.tier = highest_tier(r);
          const JobOutcome* job = r.job_outcomes.empty() ? nullptr : &r.job_outcomes[0];
          e.ranks_per_leaf = job && job->segments > 0 ? std::max(1, int(std::lround(double(job->hosts) / job->segments))) : 1;
          e.efficiency = std::min(1.0, r.efficiency);
          t.entries.push_back(e);
        }
  return t;
}

nlohmann::json to_json(const EcmpTable& t) {
  nlohmann::json j;
  j["format"] = kEcmpTableFormat;
  j["version"] = kEcmpTableVersion;
  j["fabric"] = {{"name", t.fabric_name}, {"design", t.design}, {"gpus", t.gpus},
                 {"rails", t.rails},      {"planes", t.planes}, {"radix", t.radix},
                 {"tiers", t.tiers},      {"oversubscription", t.oversubscription}};
  j["hash_model"] = {{"routing", t.routing}, {"polarisation", t.polarisation},
                     {"balance", t.balance}, {"seed", t.seed}};
  j["bytes_per_gpu"] = t.bytes_per_gpu;
  j["entries"] = nlohmann::json::array();
  for (const EcmpEntry& e : t.entries)
    j["entries"].push_back({{"pattern", e.pattern}, {"placement", e.placement},
                            {"group_size", e.group_size}, {"qps", e.qps}, {"tier", e.tier},
                            {"ranks_per_leaf", e.ranks_per_leaf}, {"efficiency", e.efficiency}});
  return j;
}

EcmpTable ecmp_table_from_json(const nlohmann::json& doc) {
  detail::Fields top(doc, "ecmp table");
  if (top.string("format", "") != kEcmpTableFormat)
    throw SpecError(fmt::format("ecmp table.format: expected \"{}\"", kEcmpTableFormat));
  if (top.positive_int("version") != kEcmpTableVersion)
    throw SpecError(fmt::format("ecmp table.version: only version {} is known", kEcmpTableVersion));
  EcmpTable t;
  detail::Fields fab = top.object("fabric");
  t.fabric_name = fab.string("name", "");
  t.design = fab.string("design", "custom");
  t.gpus = fab.positive_int("gpus");
  t.rails = fab.positive_int("rails", 1);
  t.planes = fab.positive_int("planes", 1);
  t.radix = fab.nonnegative_int("radix", 0);
  t.tiers = fab.nonnegative_int("tiers", 0);
  t.oversubscription = fab.number("oversubscription", 1.0, 1.0, 1e6);
  detail::Fields hash = top.object("hash_model");
  t.routing = hash.string("routing", "ecmp");
  t.balance = hash.string("balance", "equal-split");
  t.polarisation = hash.number("polarisation", 0.0, 0.0, 1.0);
  t.bytes_per_gpu = top.number("bytes_per_gpu", 0.0);
  if (!doc.contains("entries") || !doc.at("entries").is_array())
    throw SpecError("ecmp table.entries: missing (an array)");
  const auto& entries = doc.at("entries");
  for (size_t i = 0; i < entries.size(); ++i) {
    detail::Fields f(entries[i], fmt::format("ecmp table.entries[{}]", i));
    EcmpEntry e;
    e.pattern = canonical_pattern(f.string("pattern", ""));
    if (e.pattern.empty()) throw SpecError(f.path("pattern") + ": missing (alltoall, ring, ...)");
    e.placement = f.string("placement", "packed");
    e.group_size = f.positive_int("group_size");
    e.qps = f.positive_int("qps", 1);
    e.tier = f.positive_int("tier", 1);
    e.ranks_per_leaf = f.positive_int("ranks_per_leaf", 1);
    e.efficiency = f.number("efficiency", -1.0, 0.0, 1.0);
    if (e.efficiency <= 0) throw SpecError(f.path("efficiency") + ": missing or not in (0, 1]");
    t.entries.push_back(std::move(e));
  }
  return t;
}

EcmpTable load_ecmp_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SpecError(fmt::format("{}: cannot open the ECMP-efficiency table", path));
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded()) throw SpecError(fmt::format("{}: not valid JSON", path));
  try {
    return ecmp_table_from_json(doc);
  } catch (const SpecError& e) {
    throw SpecError(fmt::format("{}: {}", path, e.what()));
  }
}

void attach_ecmp_table(Network& n, const std::string& path) {
  auto table = std::make_shared<EcmpTable>(load_ecmp_table(path));
  if (table->gpus != n.hosts * n.gpus_per_host)
    throw SpecError(fmt::format("{}: simulated on a fabric of {} GPUs; the network has {} x {}", path,
                                table->gpus, n.hosts, n.gpus_per_host));
  n.ecmp_table = std::move(table);
}

std::optional<EcmpEntry> nearest_entry(const EcmpTable& t, std::string_view pattern, int group_size,
                                       int qps, std::string_view placement) {
  const std::string want = canonical_pattern(pattern);
  bool placement_known = std::any_of(t.entries.begin(), t.entries.end(), [&](const EcmpEntry& e) {
    return e.pattern == want && e.placement == placement;
  });
  const EcmpEntry* best = nullptr;
  double best_distance = 0;
  for (const EcmpEntry& e : t.entries) {
    if (e.pattern != want || (placement_known && e.placement != placement)) continue;
    double d = std::abs(std::log2(double(e.group_size) / std::max(1, group_size))) +
               0.5 * std::abs(std::log2(double(e.qps) / std::max(1, qps)));
    if (!best || d < best_distance - 1e-12 ||
        (std::abs(d - best_distance) <= 1e-12 && e.group_size < best->group_size)) {
      best = &e;
      best_distance = d;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace astral::seer
