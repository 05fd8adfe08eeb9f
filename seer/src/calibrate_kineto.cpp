// From a Kineto trace's kernels and their operators' input shapes to operator measurements, and
// the efficiency fit over them.
#include "astral/seer/calibrate_kineto.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "astral/seer/compare.hpp"

namespace astral::seer {
namespace {

using Shape = std::vector<std::int64_t>;

bool is_comm_kind(const std::string& kind) {
  return kind == "allreduce" || kind == "allgather" || kind == "reducescatter" || kind == "sendrecv" ||
         kind == "broadcast";
}

bool is_memory_kind(const std::string& kind) {
  return kind == "elementwise" || kind == "norm" || kind == "softmax" || kind == "dropout";
}

// PyTorch's "Input type" strings for the dtypes Seer models.
std::optional<DType> dtype_of_torch(const std::string& t) {
  if (t == "c10::BFloat16") return DType::kBf16;
  if (t == "c10::Half") return DType::kFp16;
  if (t == "float") return DType::kFp32;
  if (t.rfind("c10::Float8_", 0) == 0) return DType::kFp8;
  return std::nullopt;
}

double element_bytes(const std::string& t) {
  if (t == "double" || t == "long int" || t == "int64_t") return 8;
  if (t == "float" || t == "int") return 4;
  if (t == "c10::BFloat16" || t == "c10::Half" || t == "short int") return 2;
  if (t == "bool" || t == "unsigned char" || t == "signed char" || t.rfind("c10::Float8_", 0) == 0) return 1;
  return 0;  // not a tensor type Seer knows: the input is not counted
}

double numel(const Shape& s) {
  double n = 1;
  for (auto d : s) n *= double(d);
  return n;
}

double leading(const Shape& s, size_t keep) {
  double n = 1;
  for (size_t i = 0; i + keep < s.size(); ++i) n *= double(s[i]);
  return n;
}

// GEMM shape from the operator's inputs; false when the operator is not a GEMM Seer reads.
bool gemm_shape(const KinetoCpuOp& op, OperatorMeasurement& m) {
  const auto& d = op.dims;
  auto set = [&](double rows, double cols, double inner, double batch) {
    m.m = rows, m.n = cols, m.k = inner, m.batch = batch;
    return rows > 0 && cols > 0 && inner > 0 && batch > 0;
  };
  const std::string& n = op.name;
  if ((n == "aten::mm" || n == "aten::_scaled_mm") && d.size() >= 2 && d[0].size() == 2 && d[1].size() == 2)
    return set(d[0][0], d[1][1], d[0][1], 1);
  if (n == "aten::addmm" && d.size() >= 3 && d[1].size() == 2 && d[2].size() == 2)
    return set(d[1][0], d[2][1], d[1][1], 1);
  if (n == "aten::bmm" && d.size() >= 2 && d[0].size() == 3 && d[1].size() == 3)
    return set(d[0][1], d[1][2], d[0][2], d[0][0]);
  if (n == "aten::baddbmm" && d.size() >= 3 && d[1].size() == 3 && d[2].size() == 3)
    return set(d[1][1], d[2][2], d[1][2], d[1][0]);
  if (n == "aten::linear" && d.size() >= 2 && d[0].size() >= 2 && d[1].size() == 2)
    return set(leading(d[0], 1), d[1][0], double(d[0].back()), 1);
  if (n == "aten::matmul" && d.size() >= 2 && d[0].size() >= 2 && d[1].size() >= 2) {
    if (d[1].size() == 2) return set(leading(d[0], 1), d[1][1], double(d[0].back()), 1);
    return set(double(d[0][d[0].size() - 2]), double(d[1].back()), double(d[0].back()), leading(d[0], 2));
  }
  return false;
}

// Fused attention: forward or backward by name; the query's layout by operator (the SDPA entry
// points take batch, heads, sequence, head dim; the flash kernels' own entry points batch,
// sequence, heads, head dim).
bool attention_shape(const KinetoCpuOp& op, OperatorMeasurement& m) {
  const std::string& n = op.name;
  const bool sdpa = n.find("scaled_dot_product") != std::string::npos;
  if (!sdpa && n.find("flash_attention") == std::string::npos && n.find("efficient_attention") == std::string::npos)
    return false;
  if (op.dims.empty() || op.dims[0].size() != 4) return false;
  const Shape& q = op.dims[0];
  m.kind = n.find("backward") != std::string::npos ? MeasuredKind::kFlashBackward : MeasuredKind::kFlashForward;
  m.batch = double(q[0]);
  m.m = double(sdpa ? q[2] : q[1]);  // sequence
  m.n = double(sdpa ? q[1] : q[2]);  // heads
  m.k = double(q[3]);
  return m.batch > 0 && m.m > 0 && m.n > 0 && m.k > 0;
}

// Bytes an element-wise operator moves: its inputs, and an output as large as the first input.
double memory_bytes(const KinetoCpuOp& op) {
  double bytes = 0;
  for (size_t i = 0; i < op.dims.size() && i < op.types.size(); ++i) {
    if (op.dims[i].empty()) continue;  // a scalar argument
    bytes += numel(op.dims[i]) * element_bytes(op.types[i]);
  }
  if (!op.dims.empty() && !op.types.empty()) bytes += numel(op.dims[0]) * element_bytes(op.types[0]);
  return bytes;
}

// One operator call's measurement (its kernels of one kind summed), or nothing.
std::optional<OperatorMeasurement> measurement_of(const KinetoCpuOp& op, const std::string& kind, double seconds) {
  OperatorMeasurement m;
  m.seconds = seconds;
  if (kind == "gemm") {
    m.kind = MeasuredKind::kGemm;
    if (!gemm_shape(op, m) || op.types.empty()) return std::nullopt;
    auto dt = dtype_of_torch(op.types[0]);
    if (!dt) return std::nullopt;
    m.dtype = *dt;
    return m;
  }
  if (kind == "attention") {
    if (!attention_shape(op, m) || op.types.empty()) return std::nullopt;
    auto dt = dtype_of_torch(op.types[0]);
    if (!dt) return std::nullopt;
    m.dtype = *dt;
    return m;
  }
  if (is_memory_kind(kind)) {
    m.kind = MeasuredKind::kMemory;
    m.bytes = memory_bytes(op);
    if (m.bytes <= 0) return std::nullopt;
    return m;
  }
  return std::nullopt;
}

// Identical shapes averaged into one measurement each, named by operator and shape.
std::vector<OperatorMeasurement> average_by_shape(const std::vector<std::pair<std::string, OperatorMeasurement>>& all) {
  using Key = std::tuple<int, double, double, double, double, double, int, std::string>;
  std::map<Key, std::pair<OperatorMeasurement, long>> groups;
  for (const auto& [op_name, m] : all) {
    Key key{int(m.kind), m.m, m.n, m.k, m.batch, m.bytes, int(m.dtype), op_name};
    auto [it, added] = groups.try_emplace(key, m, 0);
    if (!added) it->second.first.seconds += m.seconds;
    it->second.second += 1;
  }
  std::vector<OperatorMeasurement> out;
  for (auto& [key, group] : groups) {
    OperatorMeasurement m = group.first;
    m.seconds /= double(group.second);
    const std::string& op_name = std::get<7>(key);
    m.name = m.kind == MeasuredKind::kMemory
                 ? fmt::format("{} {:.0f} B x{}", op_name, m.bytes, group.second)
                 : fmt::format("{} {}x{}x{}{} {} x{}", op_name, m.m, m.n, m.k,
                               m.batch > 1 ? fmt::format(" b{}", m.batch) : "", to_string(m.dtype), group.second);
    out.push_back(m);
  }
  return out;
}

template <typename T>
void sort_by_time(std::vector<T>& v) {
  std::sort(v.begin(), v.end(), [](const T& a, const T& b) { return a.seconds > b.seconds; });
}

}  // namespace

KinetoCalibration calibrate_kineto(const HardwareSpec& hw, const KinetoTrace& trace,
                                   const KinetoCalibrationOptions& options) {
  if (options.rank >= 0 && trace.rank >= 0 && trace.rank != options.rank)
    throw std::runtime_error(fmt::format("{}: distributedInfo.rank: the trace is rank {}, not rank {} (--rank)",
                                         trace.origin, trace.rank, options.rank));
  if (trace.kernels.empty())
    throw std::runtime_error(fmt::format("{}: traceEvents: no GPU kernel events", trace.origin));
  KinetoCalibration c;
  c.device = trace.kernels.front().device;
  const auto& steps = trace.gpu_steps.empty() ? trace.cpu_steps : trace.gpu_steps;
  c.steps = int(steps.size());
  if (!steps.empty()) c.step_seconds = std::accumulate(steps.begin(), steps.end(), 0.0) / steps.size() * 1e-6;

  std::vector<std::string> kind_of(trace.names.size());
  for (size_t i = 0; i < trace.names.size(); ++i) kind_of[i] = classify_kernel(trace.names[i]);
  std::map<std::string, KinetoKindTally> kinds;
  std::map<int, KinetoUnclassified> unclassified;
  // One operator call's kernels of one kind, summed: (operator, kind) -> seconds, kernels.
  std::map<std::pair<const KinetoCpuOp*, std::string>, std::pair<double, long>> calls;
  for (const auto& k : trace.kernels) {
    if (k.device != c.device) continue;
    ++c.kernels;
    const std::string& kind = kind_of[k.name];
    const double seconds = k.dur * 1e-6;
    if (kind == "other") {
      auto& u = unclassified[k.name];
      u.name = trace.names[k.name];
      u.count += 1, u.seconds += seconds;
      ++c.unclassified;
      continue;
    }
    auto& tally = kinds[kind];
    tally.kind = kind;
    tally.kernels += 1, tally.seconds += seconds;
    if (is_comm_kind(kind)) continue;
    const KinetoCpuOp* op = trace.launcher(k);
    if (!op) {
      ++c.without_shapes;
      continue;
    }
    auto& call = calls[{op, kind}];
    call.first += seconds, call.second += 1;
  }
  std::vector<std::pair<std::string, OperatorMeasurement>> measured;
  for (const auto& [key, call] : calls) {
    auto m = measurement_of(*key.first, key.second, call.first);
    if (!m) {
      c.without_shapes += call.second;
      continue;
    }
    kinds[key.second].measured += call.second;
    measured.emplace_back(key.first->name, *m);
  }
  for (auto& [name, t] : kinds) c.kinds.push_back(t);
  for (auto& [index, u] : unclassified) c.unclassified_names.push_back(u);
  sort_by_time(c.kinds);
  sort_by_time(c.unclassified_names);
  if (measured.empty())
    throw std::runtime_error(fmt::format(
        "{}: traceEvents: no kernel is tied to a CPU operator with input shapes (args.\"Input Dims\"; profile with "
        "record_shapes=True); {} kernels read, nothing to fit",
        trace.origin, c.kernels));
  c.fit = calibrate(hw, average_by_shape(measured));
  return c;
}

nlohmann::json to_json(const KinetoCalibration& c) {
  nlohmann::json kinds = nlohmann::json::array(), unknown = nlohmann::json::array(), rows = nlohmann::json::array();
  for (const auto& k : c.kinds)
    kinds.push_back({{"kind", k.kind}, {"kernels", k.kernels}, {"seconds", k.seconds}, {"measured", k.measured}});
  for (const auto& u : c.unclassified_names)
    unknown.push_back({{"name", u.name}, {"count", u.count}, {"seconds", u.seconds}});
  for (const auto& r : c.fit.rows)
    rows.push_back({{"name", r.name}, {"measured_s", r.measured}, {"before_s", r.before}, {"after_s", r.after}});
  return {{"hardware", to_json(c.fit.calibrated)},
          {"device", c.device},
          {"steps", c.steps},
          {"step_s", c.step_seconds},
          {"kernels", c.kernels},
          {"kinds", kinds},
          {"unclassified_kernels", c.unclassified},
          {"unclassified", unknown},
          {"without_shapes", c.without_shapes},
          {"fitted", c.fit.fitted},
          {"mean_abs_error_pct_before", c.fit.mean_abs_pct_before},
          {"mean_abs_error_pct_after", c.fit.mean_abs_pct_after},
          {"measurements", rows}};
}

std::string format_kineto_calibration(const KinetoCalibration& c, const std::string& origin) {
  std::string o = fmt::format("Seer calibration of {} from a profiler trace ({}): device {}, {} kernels, {} step(s)",
                              c.fit.calibrated.name, origin, c.device, c.kernels, c.steps);
  o += c.steps > 0 ? fmt::format(" of {:.2f} ms\n", c.step_seconds * 1e3) : "\n";
  o += fmt::format("{:<14} {:>9} {:>12} {:>10}\n", "kind", "kernels", "time", "measured");
  for (const auto& k : c.kinds)
    o += fmt::format("{:<14} {:>9} {:>9.3f} ms {:>10}\n", k.kind, k.kernels, k.seconds * 1e3,
                     is_comm_kind(k.kind) ? std::string("(comm)") : std::to_string(k.measured));
  o += fmt::format("\n{} distinct shapes fitted; mean absolute error {:.1f} % -> {:.1f} %\n", c.fit.rows.size(),
                   c.fit.mean_abs_pct_before, c.fit.mean_abs_pct_after);
  const auto& e = c.fit.calibrated.eff;
  o += fmt::format("efficiency: gemm {:.3f}, memory {:.3f}, flash_fwd {:.3f}, flash_bwd {:.3f}, kernel overhead {:.1f} us\n",
                   e.gemm, e.memory, e.flash_fwd, e.flash_bwd, e.kernel_overhead * 1e6);
  std::string fitted;
  for (const auto& f : c.fit.fitted) fitted += (fitted.empty() ? "" : ", ") + f;
  o += fmt::format("fitted: {}\n", fitted.empty() ? "nothing" : fitted);
  if (c.without_shapes > 0)
    o += fmt::format("{} compute kernels had no operator shapes (not fitted)\n", c.without_shapes);
  o += fmt::format("{} kernels unclassified (not fitted, not guessed){}\n", c.unclassified,
                   c.unclassified_names.empty() ? "" : ":");
  for (size_t i = 0; i < c.unclassified_names.size() && i < 10; ++i) {
    const auto& u = c.unclassified_names[i];
    o += fmt::format("  {:>6} x {:>9.3f} ms  {}\n", u.count, u.seconds * 1e3, u.name.substr(0, 100));
  }
  if (c.unclassified_names.size() > 10) o += fmt::format("  ... and {} more names\n", c.unclassified_names.size() - 10);
  return o;
}

}  // namespace astral::seer
