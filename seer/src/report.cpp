// Terminal reports for predictions, searches, comparisons, validations and calibrations.
#include "astral/seer/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "units.hpp"

namespace astral::seer {
namespace {

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string pct(double part, double whole) { return whole > 0 ? fmt::format("{:5.1f} %", part / whole * 100) : ""; }

std::string signed_pct(double e) { return fmt::format("{:+.1f} %", e); }

}  // namespace

std::string describe_layout(const TrainConfig& c) {
  std::string s = fmt::format("tp {} x pp {} x dp {}", c.tp, c.pp, c.dp);
  if (c.cp > 1) s = fmt::format("tp {} x cp {} x pp {} x dp {}", c.tp, c.cp, c.pp, c.dp);
  if (c.ep > 1) s += fmt::format(" (ep {})", c.ep);
  if (c.vp > 1) s += fmt::format(", vp {}", c.vp);
  s += fmt::format(", mb {}", c.micro_batch);
  s += c.sequence_parallel ? ", sp" : "";
  s += fmt::format(", recompute {}", to_string(c.recompute));
  s += c.distributed_optimizer ? ", dist-opt" : "";
  return s;
}

std::string format_prediction(const ModelSpec& model, const HardwareSpec& hw, const Network& net,
                              const TrainConfig& c, int gpus, const Prediction& p) {
  std::string o;
  o += fmt::format("Seer: {} on {} x {} ({})\n", model.name, gpus, hw.name, net.name);
  o += fmt::format("layout      {}\n", describe_layout(c));
  o += fmt::format("            global batch {} = {} micro-batches x {} per pipeline x dp {}, {} tokens\n",
                   c.global_batch, c.microbatches(), c.micro_batch, c.dp,
                   double(c.global_batch) * model.seq_len);
  o += fmt::format("step time   {}   MFU {:.1f} %   HFU {:.1f} %   {:.0f} tokens/s\n", seconds(p.step_time),
                   p.mfu * 100, p.hfu * 100, p.tokens_per_second);
  const auto& m = p.memory;
  o += fmt::format("memory      {:.1f} GiB of {:.1f} GiB per GPU (stage {}{}){}\n", m.total() / kGiB, m.capacity / kGiB,
                   m.stage, m.stage == 0 ? ", most activations" : "", m.fits() ? "" : "  DOES NOT FIT");
  o += fmt::format("            weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, {}activations {:.1f} ({} in "
                   "flight), workspace {:.1f}, reserved {:.1f}\n",
                   m.weights / kGiB, m.gradients / kGiB, m.optimizer / kGiB,
                   m.fp8_weights > 0 ? fmt::format("fp8 weight casts {:.1f}, ", m.fp8_weights / kGiB) : "",
                   m.activations / kGiB, m.microbatches_in_flight, m.workspace / kGiB, m.reserved / kGiB);
  o += fmt::format("layer       {} forward, {} backward per micro-batch\n", seconds(p.layer_forward),
                   seconds(p.layer_backward));
  const auto& b = p.breakdown;
  o += fmt::format("breakdown   (critical stage {} of {})\n", p.critical_stage, c.pp);
  auto row = [&](const char* name, double v) {
    o += fmt::format("  {:<22} {:>12}  {}\n", name, seconds(v), pct(v, p.step_time));
  };
  row("compute", b.compute);
  row("exposed TP comm", b.tp);
  if (model.is_moe()) row("exposed EP all-to-all", b.ep);
  if (c.cp > 1) row("exposed CP K/V exchange", b.cp);
  row("exposed PP send/recv", b.pp);
  row("exposed DP comm", b.dp);
  row("optimizer step", b.optimizer);
  row("pipeline bubble", b.bubble);
  if (b.overhead > 0) row("fixed step overhead", b.overhead);
  if (b.straggler > 0) row("slowest rank (straggler)", b.straggler);
  return o;
}

std::string format_search(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                          const SearchResult& r) {
  std::string o;
  o += fmt::format("Seer search: {} on {} x {} ({}), global batch {}\n", model.name, gpus, hw.name, net.name,
                   r.global_batch);
  o += fmt::format("{} layouts: {} invalid, {} over memory, {} bounded out, {} predicted in {:.2f} s ({:.0f} layouts/s)\n",
                   r.enumerated, r.invalid, r.out_of_memory, r.bounded, r.evaluated, r.seconds,
                   r.seconds > 0 ? r.enumerated / r.seconds : 0.0);
  if (r.top.empty()) {
    o += "no layout fits in memory";
    if (r.closest_oom.capacity > 0)
      o += fmt::format(" (closest needs {:.1f} GiB of {:.1f} GiB)", r.closest_oom.total() / kGiB,
                       r.closest_oom.capacity / kGiB);
    return o + "\n";
  }
  o += fmt::format("\n{:>3}  {:<64} {:>9} {:>6} {:>8}  {:>7} {:>7} {:>7} {:>7} {:>7}\n", "#", "layout", "step", "MFU",
                   "mem GiB", "compute", "tp", "pp", "dp", "bubble");
  for (size_t i = 0; i < r.top.size(); ++i) {
    const auto& c = r.top[i];
    const auto& p = c.prediction;
    const auto& b = p.breakdown;
    o += fmt::format("{:>3}  {:<64} {:>9} {:>5.1f}% {:>8.1f}  {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f}\n", i + 1,
                     describe_layout(c.config), seconds(p.step_time), p.mfu * 100, p.memory.total() / kGiB,
                     b.compute, b.tp + b.ep, b.pp, b.dp, b.bubble);
  }
  o += "(breakdown columns in seconds on the critical stage; tp includes EP all-to-all)\n";
  return o;
}

std::string format_comparison(const Comparison& c) {
  std::string o;
  o += fmt::format("Seer vs measured: predicted rank {}, {} measured step(s)\n", c.predicted_rank, c.measured_steps);
  o += fmt::format("step time   predicted {}  measured {}  error {}\n", seconds(c.predicted_step),
                   seconds(c.measured_step), signed_pct(c.step_error_pct()));
  o += fmt::format("GPU busy    predicted {}  measured {}  error {}\n", seconds(c.predicted_busy),
                   seconds(c.measured_busy), signed_pct(c.busy_error_pct()));
  o += fmt::format("\n{:<15} {:>12} {:>12} {:>9} {:>10} {:>10}\n", "kind", "predicted", "measured", "error",
                   "pred ops", "meas ops");
  for (const auto& k : c.kinds)
    o += fmt::format("{:<15} {:>12} {:>12} {:>9} {:>10} {:>10.0f}\n", k.kind, seconds(k.predicted),
                     seconds(k.measured), k.measured > 0 ? signed_pct(k.error_pct()) : std::string("-"),
                     k.predicted_count, k.measured_count);
  o += fmt::format("time-weighted error over kinds {:.1f} %; {} measured kernels not classified\n",
                   c.weighted_kind_error_pct(), c.unmatched_kernels);
  return o;
}

std::string format_validation(const ValidationReport& r) {
  std::string o = fmt::format("Seer validation: {}\n\n", r.name);
  auto table = [&](const char* title, const std::vector<ValidationRow>& rows, bool ms) {
    if (rows.empty()) return;
    o += fmt::format("{:<44} {:>11} {:>11} {:>8}\n", title, "measured", "predicted", "error");
    for (const auto& x : rows) {
      double k = ms ? 1e3 : 1;
      o += fmt::format("{:<44} {:>9.2f} {} {:>9.2f} {} {:>8}\n", x.name, x.measured * k, ms ? "ms" : " s",
                       x.predicted * k, ms ? "ms" : " s", signed_pct(x.error_pct()));
    }
    o += "\n";
  };
  table("step", r.steps, false);
  table("layer (one micro-batch)", r.layers, true);
  o += fmt::format("step time error: mean {:.2f} %, max {:.2f} %", r.mean_abs_pct(), r.max_abs_pct());
  if (r.tolerance_mean_pct > 0 || r.tolerance_max_pct > 0)
    o += fmt::format(" (tolerance mean {:.1f} %, max {:.1f} %: {})", r.tolerance_mean_pct, r.tolerance_max_pct,
                     r.within_tolerance() ? "within" : "EXCEEDED");
  return o + "\n";
}

std::string format_calibration(const CalibrationResult& r) {
  std::string o = fmt::format("Seer calibration of {}: {} measurements\n", r.calibrated.name, r.rows.size());
  o += fmt::format("{:<40} {:>12} {:>12} {:>12}\n", "operator", "measured", "before", "after");
  for (const auto& x : r.rows)
    o += fmt::format("{:<40} {:>12} {:>12} {:>12}\n", x.name, seconds(x.measured), seconds(x.before), seconds(x.after));
  const auto& e = r.calibrated.eff;
  o += fmt::format("\nmean absolute error {:.1f} % -> {:.1f} %\n", r.mean_abs_pct_before, r.mean_abs_pct_after);
  o += fmt::format("efficiency: gemm {:.3f}, memory {:.3f}, flash_fwd {:.3f}, flash_bwd {:.3f}, kernel overhead {:.1f} us\n",
                   e.gemm, e.memory, e.flash_fwd, e.flash_bwd, e.kernel_overhead * 1e6);
  std::string fitted;
  for (const auto& f : r.fitted) fitted += (fitted.empty() ? "" : ", ") + f;
  o += fmt::format("fitted: {}\n", fitted.empty() ? "nothing" : fitted);
  return o;
}

std::string format_cost_table(Collective c, double bytes, const Group& g, const CostTable& t) {
  std::string o = fmt::format("{} of {:.0f} bytes on {} ranks ({} per host, {} hosts)\n", to_string(c), bytes, g.ranks,
                              g.per_host, g.hosts());
  o += fmt::format("{:<16} {:>12} {:>12} {:>12}\n", "algorithm", "LL", "LL128", "Simple");
  for (int a = 0; a < kAlgorithms; ++a) {
    bool any = false;
    for (int p = 0; p < kProtocols; ++p) any |= t[a][p] >= 0;
    if (!any) continue;
    o += fmt::format("{:<16}", to_string(static_cast<Algorithm>(a)));
    for (int p = 0; p < kProtocols; ++p) o += fmt::format(" {:>12}", t[a][p] >= 0 ? seconds(t[a][p]) : std::string("-"));
    o += "\n";
  }
  return o;
}

nlohmann::json to_json(const SearchResult& r) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& c : r.top) top.push_back({{"config", to_json(c.config)}, {"prediction", to_json(c.prediction)}});
  return {{"global_batch", r.global_batch}, {"enumerated", r.enumerated}, {"invalid", r.invalid},
          {"out_of_memory", r.out_of_memory}, {"bounded", r.bounded}, {"evaluated", r.evaluated},
          {"seconds", r.seconds},
          {"top", top}};
}

std::string format_collective(Collective c, double bytes, const Group& g, const CostTable& t,
                              const CollectiveCost& best) {
  return format_cost_table(c, bytes, g, t) +
         fmt::format("best: {} / {}, {:.1f} us, algorithm bandwidth {:.1f} GB/s\n", to_string(best.algorithm),
                     to_string(best.protocol), best.seconds * 1e6, best.seconds > 0 ? bytes / best.seconds / 1e9 : 0.0);
}

std::string format_bundled_list() {
  std::string o;
  for (const char* category : {"models", "hardware", "configs", "networks", "validation"}) {
    o += fmt::format("{}:", category);
    for (const auto& name : bundled_names(category)) o += " " + name;
    o += "\n";
  }
  return o;
}

nlohmann::json to_json(const CalibrationResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"name", x.name}, {"measured_s", x.measured}, {"before_s", x.before}, {"after_s", x.after}});
  return {{"hardware", to_json(r.calibrated)}, {"mean_abs_error_pct_before", r.mean_abs_pct_before},
          {"mean_abs_error_pct_after", r.mean_abs_pct_after}, {"fitted", r.fitted}, {"rows", rows}};
}

nlohmann::json prediction_report(const ModelSpec& model, const HardwareSpec& hw, const TrainConfig& config, int gpus,
                                 const Prediction& p) {
  nlohmann::json j = to_json(p);
  j["model"] = model.name;
  j["hardware"] = hw.name;
  j["gpus"] = gpus;
  j["config"] = to_json(config);
  return j;
}

nlohmann::json timeline_metadata(const ModelSpec& model, const HardwareSpec& hw, const TrainConfig& config, int gpus,
                                 const Prediction& p) {
  return {{"seer", {{"model", model.name}, {"hardware", hw.name}, {"gpus", gpus}, {"step_time_s", p.step_time},
                    {"tp", config.tp}, {"pp", config.pp}, {"dp", config.dp}, {"config", to_json(config)}}}};
}

nlohmann::json search_report(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                             const SearchResult& r) {
  nlohmann::json j = to_json(r);
  j["model"] = model.name;
  j["hardware"] = hw.name;
  j["gpus"] = gpus;
  j["network"] = net.name;
  return j;
}

nlohmann::json collective_report(Collective c, double bytes, const Group& g, const CostTable& t,
                                 const CollectiveCost& best) {
  nlohmann::json table = nlohmann::json::object();
  for (int a = 0; a < kAlgorithms; ++a)
    for (int p = 0; p < kProtocols; ++p)
      if (t[a][p] >= 0) table[to_string(static_cast<Algorithm>(a))][to_string(static_cast<Protocol>(p))] = t[a][p];
  return {{"op", to_string(c)}, {"bytes", bytes}, {"ranks", g.ranks}, {"per_host", g.per_host}, {"hosts", g.hosts()},
          {"seconds", table},
          {"best", {{"algorithm", to_string(best.algorithm)}, {"protocol", to_string(best.protocol)},
                    {"seconds", best.seconds}}}};
}

}  // namespace astral::seer
