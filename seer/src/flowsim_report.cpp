// FlowSimResult as JSON and as the human report of `astral fabric sim`.
#include <fmt/format.h>

#include <astral/seer/flowsim.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

namespace astral::seer {
namespace {

std::string human_time(double s) {
  if (!std::isfinite(s)) return "never";
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt::format("{:g} {}", std::round(b * 100) / 100, units[u]);
}

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

}  // namespace

nlohmann::json to_json(const FlowSimResult& r) {
  nlohmann::json j;
  j["fabric"] = r.fabric;
  j["pattern"] = r.pattern;
  j["routing"] = r.routing;
  j["placement"] = r.placement;
  j["qp_balance"] = r.balance;
  j["qps"] = r.qps;
  j["jobs"] = r.jobs;
  j["gpus"] = r.gpus;
  j["hosts"] = r.hosts;
  j["bytes_per_gpu"] = r.bytes_per_gpu;
  j["trials"] = r.trials;
  j["method"] = r.method;
  j["engine"] = r.engine;
  j["classes"] = r.classes;
  j["counted_classes"] = r.counted_classes;
  j["exact_connections"] = r.exact_connections;
  j["memory_estimate_gib"] = r.memory_estimate_gib;
  j["connections"] = r.connections;
  j["subflows"] = r.subflows;
  j["unroutable"] = r.unroutable;
  j["completion_s"] = finite_or_null(r.completion_s);
  j["completion_upper_s"] = finite_or_null(r.completion_upper_s);
  j["ideal_s"] = r.ideal_s;
  j["efficiency"] = r.efficiency;
  j["efficiency_stdev"] = r.efficiency_stdev;
  j["efficiency_min"] = r.efficiency_min;
  j["efficiency_max"] = r.efficiency_max;
  j["algbw_gbytes_s"] = r.algbw_gbytes_s;
  j["busbw_gbytes_s"] = r.busbw_gbytes_s;
  j["goodput_adaptive"] = r.goodput_adaptive ? nlohmann::json(*r.goodput_adaptive) : nullptr;
  j["goodput_equal_split"] = r.goodput_equal_split ? nlohmann::json(*r.goodput_equal_split) : nullptr;
  j["link_load"] = nlohmann::json::array();
  for (const auto& d : r.loads)
    j["link_load"].push_back({{"class", d.link_class},
                              {"resources", d.resources},
                              {"mean", d.mean},
                              {"p50", d.p50},
                              {"p90", d.p90},
                              {"p99", d.p99},
                              {"max", d.max}});
  j["job_outcomes"] = nlohmann::json::array();
  for (const auto& o : r.job_outcomes)
    j["job_outcomes"].push_back({{"hosts", o.hosts},
                                 {"gpus", o.gpus},
                                 {"completion_s", finite_or_null(o.completion_s)},
                                 {"ideal_s", o.ideal_s},
                                 {"efficiency", o.efficiency}});
  j["events"] = r.events;
  j["notes"] = r.notes;
  j["runtime_s"] = r.runtime_s;
  return j;
}

std::string format_result(const FlowSimResult& r) {
  std::string out;
  out += fmt::format("fabric      {}\n", r.fabric);
  out += fmt::format("traffic     {}, {} per GPU, {} job{} on {} hosts / {} GPUs, {}\n", r.pattern,
                     human_bytes(r.bytes_per_gpu), r.jobs, r.jobs > 1 ? "s" : "", r.hosts, r.gpus,
                     r.placement);
  out += fmt::format("routing     {}, {} QP{} per connection and port, {}\n", r.routing, r.qps,
                     r.qps > 1 ? "s" : "", r.balance);
  out += fmt::format("flows       {} connections, {} QP subflows{}\n", r.connections, r.subflows,
                     r.unroutable ? fmt::format(", {} unroutable", r.unroutable) : "");
  if (r.engine == "classes" || r.engine == "counted")
    out += fmt::format("engine      {}: {} leaf-pair classes ({} with ECMP counted), {} connections "
                       "routed one by one (faults)\n",
                       r.engine, r.classes, r.counted_classes, r.exact_connections);
  if (r.method == "bounds")
    out += fmt::format("completion  {} .. {} (bounds)   ideal {}\n", human_time(r.completion_s),
                       human_time(r.completion_upper_s), human_time(r.ideal_s));
  else
    out += fmt::format("completion  {} ({})   ideal {}\n", human_time(r.completion_s), r.method,
                       human_time(r.ideal_s));
  std::string spread = r.trials > 1 ? fmt::format("   over {} trials: sd {:.3f}, {:.3f}..{:.3f}",
                                                  r.trials, r.efficiency_stdev, r.efficiency_min,
                                                  r.efficiency_max)
                                    : "";
  out += fmt::format("efficiency  {:.3f} of ideal{}\n", r.efficiency, spread);
  out += fmt::format("bandwidth   algbw {:.2f} GB/s, busbw {:.2f} GB/s per GPU\n", r.algbw_gbytes_s,
                     r.busbw_gbytes_s);
  if (r.goodput_adaptive)
    out += fmt::format("goodput     t=0 max-min {:.3f} (adaptive QPs), {:.3f} (equal split)\n",
                       *r.goodput_adaptive, *r.goodput_equal_split);
  out += fmt::format("\n{:<14} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7}   (load x ideal time)\n",
                     "link load", "links", "mean", "p50", "p90", "p99", "max");
  for (const auto& d : r.loads)
    out += fmt::format("{:<14} {:>8} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f}\n", d.link_class,
                       d.resources, d.mean, d.p50, d.p90, d.p99, d.max);
  if (r.job_outcomes.size() > 1) {
    out += "\njob   hosts   gpus   completion   efficiency\n";
    for (size_t i = 0; i < r.job_outcomes.size(); ++i) {
      const auto& o = r.job_outcomes[i];
      out += fmt::format("{:<5} {:>5} {:>6} {:>12} {:>12.3f}\n", i, o.hosts, o.gpus,
                         human_time(o.completion_s), o.efficiency);
    }
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace astral::seer
