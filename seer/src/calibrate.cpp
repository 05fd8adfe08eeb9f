// Least-squares fit of the operator model's efficiencies to measured operator times.
#include "astral/seer/calibrate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "astral/seer/workload.hpp"

namespace astral::seer {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, ',')) {
    size_t a = cell.find_first_not_of(" \t\r"), b = cell.find_last_not_of(" \t\r");
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

double field(const std::vector<std::string>& cells, size_t i, const std::string& where, const char* what,
             bool required) {
  if (i >= cells.size() || cells[i].empty()) {
    if (required) throw SpecError(fmt::format("{}: missing {}", where, what));
    return 0;
  }
  try {
    size_t used = 0;
    double v = std::stod(cells[i], &used);
    if (used != cells[i].size() || !(v >= 0) || !std::isfinite(v)) throw std::invalid_argument(cells[i]);
    return v;
  } catch (const std::exception&) {
    throw SpecError(fmt::format("{}: {} must be a non-negative number, got \"{}\"", where, what, cells[i]));
  }
}

double flash_flops(const OperatorMeasurement& op) {
  // Causal attention: 4 b s^2 h d / 2 forward; the backward pass does 2.5x the forward's work.
  double f = 4.0 * op.batch * op.m * op.m * op.n * op.k * 0.5;
  return op.kind == MeasuredKind::kFlashBackward ? 2.5 * f : f;
}

double flash_bytes(const OperatorMeasurement& op) {
  double qkvo = 4.0 * op.batch * op.m * op.n * op.k * 2.0;
  return op.kind == MeasuredKind::kFlashBackward ? 2 * qkvo : qkvo;
}

double mean_abs_pct(const HardwareSpec& hw, const std::vector<OperatorMeasurement>& ops) {
  double s = 0;
  for (const auto& op : ops) s += std::fabs(model_seconds(hw, op) - op.seconds) / op.seconds;
  return ops.empty() ? 0 : s / ops.size() * 100.0;
}

double log_error(const HardwareSpec& hw, const std::vector<OperatorMeasurement>& ops) {
  double s = 0;
  for (const auto& op : ops) {
    double r = std::log(model_seconds(hw, op) / op.seconds);
    s += r * r;
  }
  return s;
}

// Golden-section search of one parameter on [lo, hi].
void fit_one(HardwareSpec& hw, double& param, double lo, double hi, const std::vector<OperatorMeasurement>& ops) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi;
  for (int i = 0; i < 60; ++i) {
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    param = x1;
    double f1 = log_error(hw, ops);
    param = x2;
    double f2 = log_error(hw, ops);
    if (f1 < f2) b = x2;
    else a = x1;
  }
  param = (a + b) / 2;
}

}  // namespace

std::vector<OperatorMeasurement> parse_operator_csv(const std::string& text, const std::string& origin) {
  std::vector<OperatorMeasurement> ops;
  std::stringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto cells = split(line);
    if (cells.empty() || cells[0].empty() || cells[0][0] == '#' || cells[0] == "kind") continue;
    const std::string where = fmt::format("{}:{}", origin, n);
    OperatorMeasurement op;
    op.line = n;
    const std::string& kind = cells[0];
    if (kind == "gemm") op.kind = MeasuredKind::kGemm;
    else if (kind == "memory" || kind == "elementwise") op.kind = MeasuredKind::kMemory;
    else if (kind == "flash_fwd") op.kind = MeasuredKind::kFlashForward;
    else if (kind == "flash_bwd") op.kind = MeasuredKind::kFlashBackward;
    else throw SpecError(fmt::format("{}: unknown kind \"{}\" (gemm, memory, flash_fwd, flash_bwd)", where, kind));
    const bool shaped = op.kind != MeasuredKind::kMemory;
    op.m = field(cells, 1, where, "m", shaped);
    op.n = field(cells, 2, where, "n", shaped);
    op.k = field(cells, 3, where, "k", shaped);
    op.batch = cells.size() > 4 && !cells[4].empty() ? field(cells, 4, where, "batch", false) : 1;
    op.bytes = field(cells, 5, where, "bytes", !shaped);
    if (cells.size() > 6 && !cells[6].empty()) op.dtype = dtype_from_string(cells[6], where + " dtype");
    op.seconds = field(cells, 7, where, "time_us", true) * 1e-6;
    op.name = cells.size() > 8 && !cells[8].empty() ? cells[8] : fmt::format("{} (line {})", kind, n);
    if (op.seconds <= 0) throw SpecError(fmt::format("{}: time_us must be > 0", where));
    if (shaped && (op.m <= 0 || op.n <= 0 || op.k <= 0 || op.batch <= 0))
      throw SpecError(fmt::format("{}: m, n, k and batch must be > 0", where));
    ops.push_back(op);
  }
  if (ops.empty()) throw SpecError(fmt::format("{}: no measurements (expected kind,m,n,k,batch,bytes,dtype,time_us[,name])", origin));
  return ops;
}

double model_seconds(const HardwareSpec& hw, const OperatorMeasurement& op) {
  switch (op.kind) {
    case MeasuredKind::kGemm: return gemm_seconds(hw, op.dtype, op.m, op.n, op.k, op.batch);
    case MeasuredKind::kMemory: return memory_seconds(hw, op.bytes);
    case MeasuredKind::kFlashForward:
    case MeasuredKind::kFlashBackward:
      return attention_seconds(hw, op.dtype, flash_flops(op), flash_bytes(op), op.kind == MeasuredKind::kFlashBackward);
  }
  return 0;
}

CalibrationResult calibrate(const HardwareSpec& hw, const std::vector<OperatorMeasurement>& ops) {
  CalibrationResult r;
  r.calibrated = hw;
  HardwareSpec& h = r.calibrated;
  int counts[4] = {0, 0, 0, 0};
  for (const auto& op : ops) ++counts[int(op.kind)];
  // Coordinate descent: each efficiency is constrained by its own rows; the overhead by all.
  for (int round = 0; round < 6; ++round) {
    if (counts[0]) fit_one(h, h.eff.gemm, 0.02, 1.0, ops);
    if (counts[1]) fit_one(h, h.eff.memory, 0.02, 1.0, ops);
    if (counts[2]) fit_one(h, h.eff.flash_fwd, 0.02, 1.0, ops);
    if (counts[3]) fit_one(h, h.eff.flash_bwd, 0.02, 1.0, ops);
    if (ops.size() >= 3) fit_one(h, h.eff.kernel_overhead, 0.0, 50e-6, ops);
  }
  if (counts[0]) r.fitted.push_back("gemm");
  if (counts[1]) r.fitted.push_back("memory");
  if (counts[2]) r.fitted.push_back("flash_fwd");
  if (counts[3]) r.fitted.push_back("flash_bwd");
  if (ops.size() >= 3) r.fitted.push_back("kernel_overhead_us");
  r.mean_abs_pct_before = mean_abs_pct(hw, ops);
  r.mean_abs_pct_after = mean_abs_pct(h, ops);
  for (const auto& op : ops) r.rows.push_back({op.name, op.seconds, model_seconds(hw, op), model_seconds(h, op)});
  return r;
}

}  // namespace astral::seer
