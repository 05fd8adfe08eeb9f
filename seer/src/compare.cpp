// Predicted vs measured timelines, per operator kind.
#include "astral/seer/compare.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace astral::seer {
namespace {

std::string lower(std::string s) {
  for (auto& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// Seer's predicted comm kinds, folded the way NCCL names its kernels.
std::string fold_predicted(const std::string& kind) {
  if (kind == "alltoall") return "sendrecv";  // NCCL runs all-to-all as grouped send/recv
  return kind;
}

bool is_kernel(const nlohmann::json& e) {
  if (!e.is_object() || e.value("ph", "") != "X") return false;
  std::string cat = lower(e.value("cat", ""));
  return cat == "kernel";
}

}  // namespace

std::string classify_kernel(const std::string& raw) {
  const std::string n = lower(raw);
  if (has(n, "nccl")) {
    if (has(n, "allreduce")) return "allreduce";
    if (has(n, "allgather")) return "allgather";
    if (has(n, "reducescatter")) return "reducescatter";
    if (has(n, "broadcast")) return "broadcast";
    if (has(n, "sendrecv") || has(n, "send") || has(n, "recv") || has(n, "alltoall")) return "sendrecv";
    if (has(n, "reduce")) return "allreduce";
    return "other";
  }
  if (has(n, "flash") || has(n, "fmha") || has(n, "sdpa") || has(n, "attention")) return "attention";
  if (has(n, "softmax")) return "softmax";
  if (has(n, "dropout") || has(n, "masked_scale")) return "dropout";  // masked_scale: dropout backward
  if (has(n, "layernorm") || has(n, "layer_norm") || has(n, "rmsnorm") || has(n, "rms_norm") ||
      has(n, "cuapplylayernorm") || has(n, "cucomputegradinput") || has(n, "cucomputepartgradgammabeta") ||
      has(n, "cucomputegradgammabeta"))
    return "norm";
  if (has(n, "adam") || has(n, "multi_tensor") || has(n, "l2norm") || has(n, "optimizer")) return "optimizer";
  if (has(n, "cross_entropy") || has(n, "nll_loss") || has(n, "log_softmax") || has(n, "crossentropy")) return "loss";
  if (has(n, "embedding") || has(n, "index_select") || has(n, "indexselect") || has(n, "indexing_backward"))
    return "embedding";
  if (has(n, "gemm") || has(n, "xmma") || has(n, "cutlass") || has(n, "cublas") || has(n, "nvjet") ||
      has(n, "matmul") || has(n, "s16816") || has(n, "s1688") || has(n, "wgmma"))
    return "gemm";
  if (has(n, "elementwise") || has(n, "vectorized") || has(n, "gelu") || has(n, "silu") || has(n, "swiglu") ||
      has(n, "rotary") || has(n, "rope") || has(n, "bias") || has(n, "add") || has(n, "mul") || has(n, "copy") ||
      has(n, "cat") || has(n, "fill") || has(n, "reduce") || has(n, "permute") || has(n, "transpose"))
    return "elementwise";
  return "other";
}

double KindComparison::error_pct() const { return measured > 0 ? (predicted - measured) / measured * 100.0 : 0.0; }
double Comparison::step_error_pct() const {
  return measured_step > 0 ? (predicted_step - measured_step) / measured_step * 100.0 : 0.0;
}
double Comparison::busy_error_pct() const {
  return measured_busy > 0 ? (predicted_busy - measured_busy) / measured_busy * 100.0 : 0.0;
}
double Comparison::weighted_kind_error_pct() const {
  double w = 0, e = 0;
  for (const auto& k : kinds) {
    if (k.measured <= 0) continue;
    w += k.measured;
    e += std::fabs(k.predicted - k.measured);
  }
  return w > 0 ? e / w * 100.0 : 0.0;
}

Comparison compare_timelines(const nlohmann::json& predicted, const nlohmann::json& measured,
                             const CompareOptions& options) {
  auto events_of = [](const nlohmann::json& j, const char* what) -> const nlohmann::json& {
    if (j.is_object() && j.contains("traceEvents") && j["traceEvents"].is_array()) return j["traceEvents"];
    if (j.is_array()) return j;
    throw std::runtime_error(std::string(what) + ": not a Chrome trace (no traceEvents array)");
  };
  const auto& pev = events_of(predicted, "predicted timeline");
  const auto& mev = events_of(measured, "measured trace");
  if (!predicted.is_object() || !predicted.contains("otherData") || !predicted["otherData"].contains("seer"))
    throw std::runtime_error("predicted timeline: no otherData.seer block (write it with astral seer predict --timeline)");
  const auto& meta = predicted["otherData"]["seer"];

  Comparison c;
  c.predicted_step = meta.value("step_time_s", 0.0);
  // Which predicted rank: the one asked for, the measured trace's rank mapped to its stage, or
  // the first stage.
  const int tp = meta.value("tp", 1), dp = meta.value("dp", 1);
  int rank = options.rank;
  if (rank < 0 && measured.is_object() && measured.contains("distributedInfo"))
    rank = measured["distributedInfo"].value("rank", -1);
  if (rank < 0) rank = 0;
  c.predicted_rank = (rank / std::max(tp * dp, 1)) * tp * dp;

  std::map<std::string, KindComparison> kinds;
  for (const auto& e : pev) {
    if (!e.is_object() || e.value("ph", "") != "X" || e.value("pid", -1) != c.predicted_rank) continue;
    std::string kind = fold_predicted(e.value("cat", "other"));
    auto& k = kinds[kind];
    k.kind = kind;
    k.predicted += e.value("dur", 0.0) * 1e-6;
    k.predicted_count += 1;
  }
  if (kinds.empty())
    throw std::runtime_error("predicted timeline: no events for rank " + std::to_string(c.predicted_rank));

  // Measured: kernels of the first GPU seen (one rank's trace), steps from ProfilerStep#N.
  int device = -1;
  std::vector<std::pair<double, double>> gpu_steps, cpu_steps;
  double first = 1e300, last = -1e300;
  long kernels = 0;
  std::map<std::string, double> measured_time, measured_count;
  for (const auto& e : mev) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0) * 1e-6, dur = e.value("dur", 0.0) * 1e-6;
    if (name.rfind("ProfilerStep#", 0) == 0) {
      std::string cat = lower(e.value("cat", ""));
      (cat == "gpu_user_annotation" ? gpu_steps : cpu_steps).emplace_back(ts, dur);
      continue;
    }
    if (!is_kernel(e)) continue;
    int dev = e.contains("args") && e["args"].is_object() ? e["args"].value("device", 0) : 0;
    if (device < 0) device = dev;
    if (dev != device) continue;
    ++kernels;
    std::string kind = classify_kernel(name);
    if (kind == "other") ++c.unmatched_kernels;
    measured_time[kind] += dur;
    measured_count[kind] += 1;
    first = std::min(first, ts);
    last = std::max(last, ts + dur);
  }
  if (kernels == 0) throw std::runtime_error("measured trace: no GPU kernel events (cat \"kernel\")");
  const auto& steps = !gpu_steps.empty() ? gpu_steps : cpu_steps;
  c.measured_steps = std::max<int>(1, int(steps.size()));
  if (!steps.empty()) {
    double sum = 0;
    for (const auto& s : steps) sum += s.second;
    c.measured_step = sum / steps.size();
  } else {
    c.measured_step = last - first;
  }
  for (const auto& [kind, t] : measured_time) {
    if (kind == "other") continue;
    auto& k = kinds[kind];
    k.kind = kind;
    k.measured = t / c.measured_steps;
    k.measured_count = measured_count[kind] / c.measured_steps;
  }
  for (auto& [name, k] : kinds) {
    c.predicted_busy += k.predicted;
    c.measured_busy += k.measured;
    c.kinds.push_back(k);
  }
  std::sort(c.kinds.begin(), c.kinds.end(), [](const auto& a, const auto& b) { return a.measured > b.measured; });
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : c.kinds)
    kinds.push_back({{"kind", k.kind}, {"predicted_s", k.predicted}, {"measured_s", k.measured},
                     {"predicted_count", k.predicted_count}, {"measured_count", k.measured_count},
                     {"error_pct", k.measured > 0 ? nlohmann::json(k.error_pct()) : nlohmann::json(nullptr)}});
  return {{"predicted_rank", c.predicted_rank},
          {"measured_steps", c.measured_steps},
          {"step", {{"predicted_s", c.predicted_step}, {"measured_s", c.measured_step}, {"error_pct", c.step_error_pct()}}},
          {"kernel_time", {{"predicted_s", c.predicted_busy}, {"measured_s", c.measured_busy}, {"error_pct", c.busy_error_pct()}}},
          {"weighted_kind_error_pct", c.weighted_kind_error_pct()},
          {"unmatched_kernels", c.unmatched_kernels},
          {"kinds", kinds}};
}

}  // namespace astral::seer
