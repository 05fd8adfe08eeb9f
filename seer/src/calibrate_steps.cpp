// Fitting the stack's compute, communication and per-step overhead factors to measured step times.
#include "astral/seer/calibrate_steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"
#include "json_fields.hpp"

namespace astral::seer {
namespace {

constexpr const char* kStepFactorNames[kStepFactors] = {"compute", "comm", "overhead"};

// The search space: x[0] = log compute factor, x[1] = log comm factor, x[2] = overhead seconds.
using FactorVector = std::array<double, kStepFactors>;

struct FactorBounds {
  FactorVector lo{}, hi{};
};

double max_compute_efficiency(const HardwareSpec& hw) {
  const auto& e = hw.eff;
  return std::max({e.gemm, e.memory, e.flash_fwd, e.flash_bwd});
}

double max_comm_efficiency(const HardwareSpec& hw, const StepRuns& runs) {
  double m = std::max({hw.eff.nvlink, hw.eff.nvls, hw.eff.net});
  for (const auto& r : runs.runs)
    m = std::max({m, r.network.nvlink_efficiency, r.network.nvls_efficiency, r.network.net_efficiency});
  return m;
}

// Factors between a twentieth and what brings the largest efficiency to 1; overhead up to the
// shortest measured step.
FactorBounds bounds_for(const HardwareSpec& hw, const StepRuns& runs) {
  double shortest = 1e300;
  for (const auto& r : runs.runs) shortest = std::min(shortest, r.measured);
  FactorBounds b;
  b.lo = {std::log(0.05), std::log(0.05), 0.0};
  b.hi = {-std::log(max_compute_efficiency(hw)), -std::log(max_comm_efficiency(hw, runs)), shortest};
  return b;
}

Network scaled_network(const Network& n, double comm) {
  Network s = n;
  s.nvlink_efficiency = std::min(1.0, n.nvlink_efficiency * comm);
  s.nvls_efficiency = std::min(1.0, n.nvls_efficiency * comm);
  s.net_efficiency = std::min(1.0, n.net_efficiency * comm);
  return s;
}

double predicted_step(const HardwareSpec& hw, const MeasuredRun& run, double compute, double comm, double overhead) {
  HardwareSpec h = apply_step_factors(hw, compute, comm, overhead);
  return predict(run.model, h, scaled_network(run.network, comm), run.config, run.gpus).step_time;
}

// One fit: which factors move, on which runs.
class StepFitter {
 public:
  StepFitter(const HardwareSpec& hw, const StepRuns& runs, const std::vector<StepFactor>& fit,
             const std::vector<size_t>& use, const FactorBounds& bounds)
      : hw_(hw), runs_(runs), use_(use), bounds_(bounds) {
    for (auto f : fit) active_[int(f)] = true;
    start_ = {0.0, 0.0, hw.eff.step_overhead};
  }

  // The step time of run `i` for the factors `x`, overhead excluded (it is added exactly).
  double work_seconds(size_t i, const FactorVector& x) const {
    return predicted_step(hw_, runs_.runs[i], std::exp(x[0]), std::exp(x[1]), 0.0);
  }

  std::vector<double> residuals(const FactorVector& x, std::vector<double>* work = nullptr) const {
    std::vector<double> r;
    for (size_t k = 0; k < use_.size(); ++k) {
      const auto& run = runs_.runs[use_[k]];
      double w = work ? (*work)[k] : work_seconds(use_[k], x);
      r.push_back(std::log((w + x[2]) / run.measured));
    }
    return r;
  }

  static double cost(const std::vector<double>& r) {
    double s = 0;
    for (double v : r) s += v * v;
    return s;
  }

  FactorVector clamp(FactorVector x) const {
    for (int p = 0; p < kStepFactors; ++p) x[p] = std::clamp(x[p], bounds_.lo[p], bounds_.hi[p]);
    return x;
  }

  // Levenberg-Marquardt with forward-difference derivatives for compute and comm (the overhead's
  // is exact). Returns the factors; `iterations` < 0 when it did not converge.
  FactorVector solve(int max_iterations, int& iterations, std::vector<std::string>* unconstrained) const;

 private:
  const HardwareSpec& hw_;
  const StepRuns& runs_;
  std::vector<size_t> use_;
  FactorBounds bounds_;
  std::array<bool, kStepFactors> active_{};
  FactorVector start_{};
};

// Solves the (at most 3 x 3) system a x = b by Gaussian elimination with partial pivoting.
bool solve_linear(std::array<std::array<double, kStepFactors>, kStepFactors> a, FactorVector b, int n,
                  FactorVector& x) {
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    if (std::fabs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < n; ++r) {
      double f = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

FactorVector StepFitter::solve(int max_iterations, int& iterations, std::vector<std::string>* unconstrained) const {
  std::vector<int> params;
  for (int p = 0; p < kStepFactors; ++p)
    if (active_[p]) params.push_back(p);
  const int n = int(params.size());
  FactorVector x = start_;
  std::vector<double> work(use_.size());
  for (size_t k = 0; k < use_.size(); ++k) work[k] = work_seconds(use_[k], x);
  std::vector<double> r = residuals(x, &work);
  double c = cost(r), lambda = 1e-3;
  const double h = 1e-4;
  for (int it = 1; it <= max_iterations; ++it) {
    // Jacobian of the log residuals, one column per active factor.
    std::vector<std::array<double, kStepFactors>> jac(use_.size());
    for (int q = 0; q < n; ++q) {
      const int p = params[q];
      if (p == int(StepFactor::kOverhead)) {
        for (size_t k = 0; k < use_.size(); ++k) jac[k][q] = 1.0 / (work[k] + x[2]);
        continue;
      }
      FactorVector xs = x;
      // Step inwards at the upper bound so the derivative stays inside the box.
      const double step = x[p] + h > bounds_.hi[p] ? -h : h;
      xs[p] += step;
      for (size_t k = 0; k < use_.size(); ++k) jac[k][q] = (std::log(work_seconds(use_[k], xs) + xs[2]) -
                                                            std::log(work[k] + x[2])) / step;
    }
    std::array<std::array<double, kStepFactors>, kStepFactors> jtj{};
    FactorVector jtr{};
    for (size_t k = 0; k < use_.size(); ++k)
      for (int a = 0; a < n; ++a) {
        jtr[a] -= jac[k][a] * r[k];
        for (int b = 0; b < n; ++b) jtj[a][b] += jac[k][a] * jac[k][b];
      }
    if (it == 1 && unconstrained) {
      for (int q = 0; q < n; ++q)
        if (jtj[q][q] < 1e-12) unconstrained->push_back(kStepFactorNames[params[q]]);
      if (!unconstrained->empty()) return x;
    }
    bool improved = false;
    double moved = 0;
    for (int attempt = 0; attempt < 12 && !improved; ++attempt) {
      auto damped = jtj;
      for (int a = 0; a < n; ++a) damped[a][a] *= 1.0 + lambda;
      FactorVector delta{};
      if (!solve_linear(damped, jtr, n, delta)) break;
      FactorVector xn = x;
      for (int q = 0; q < n; ++q) xn[params[q]] += delta[q];
      xn = clamp(xn);
      std::vector<double> wn(use_.size());
      for (size_t k = 0; k < use_.size(); ++k) wn[k] = work_seconds(use_[k], xn);
      std::vector<double> rn = residuals(xn, &wn);
      double cn = cost(rn);
      if (std::isfinite(cn) && cn <= c) {
        moved = 0;
        for (int q = 0; q < n; ++q) moved = std::max(moved, std::fabs(xn[params[q]] - x[params[q]]) /
                                                                (params[q] == 2 ? std::max(1e-3, xn[2]) : 1.0));
        const double gain = c - cn;
        x = xn, work = wn, r = rn, c = cn;
        lambda = std::max(lambda / 3, 1e-9);
        improved = true;
        if (moved < 1e-5 || gain < 1e-14) {
          iterations = it;
          return x;
        }
      } else {
        lambda *= 4;
      }
    }
    if (!improved) {  // no step lowers the cost: a minimum (within the bounds)
      iterations = it;
      return x;
    }
  }
  iterations = -1;
  return x;
}

double abs_pct(double predicted, double measured) { return std::fabs(predicted - measured) / measured * 100.0; }

}  // namespace

const char* to_string(StepFactor f) { return kStepFactorNames[int(f)]; }

std::vector<StepFactor> step_factors_from_string(const std::string& list, const std::string& field) {
  std::vector<StepFactor> out;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');) {
    int found = -1;
    for (int i = 0; i < kStepFactors; ++i)
      if (name == kStepFactorNames[i]) found = i;
    if (found < 0) throw SpecError(fmt::format("{}: unknown factor \"{}\" (compute, comm, overhead)", field, name));
    if (std::find(out.begin(), out.end(), StepFactor(found)) == out.end()) out.push_back(StepFactor(found));
  }
  if (out.empty()) throw SpecError(fmt::format("{}: name at least one factor (compute, comm, overhead)", field));
  return out;
}

HardwareSpec apply_step_factors(const HardwareSpec& hw, double compute, double comm, double overhead) {
  HardwareSpec h = hw;
  auto& e = h.eff;
  for (double* v : {&e.gemm, &e.memory, &e.flash_fwd, &e.flash_bwd}) *v = std::min(1.0, *v * compute);
  for (double* v : {&e.nvlink, &e.nvls, &e.net}) *v = std::min(1.0, *v * comm);
  e.step_overhead = overhead;
  return h;
}

std::string step_runs_hardware(const nlohmann::json& j) {
  return j.is_object() && j.contains("hardware") && j["hardware"].is_string() ? j["hardware"].get<std::string>() : "";
}

StepRuns parse_step_runs(const nlohmann::json& j, const std::string& origin, const HardwareSpec& hw) {
  StepRuns out;
  out.origin = origin;
  out.hardware = step_runs_hardware(j);
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array())
    throw SpecError(fmt::format("{}: runs: missing (a list of {{name, model, config, gpus, measured_s}})", origin));
  const auto& list = j["runs"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("runs[{}]", i);
    try {
      detail::Fields f(list[i], where);
      if (!list[i].contains("model")) throw SpecError(where + ".model: missing");
      if (!list[i].contains("config")) throw SpecError(where + ".config: missing");
      MeasuredRun run;
      run.name = f.string("name", where);
      run.gpus = f.positive_int("gpus");
      run.measured = f.number("measured_s");
      if (run.measured <= 0) throw SpecError(where + ".measured_s: must be > 0");
      try {
        run.model = model_from_entry(list[i]["model"]);
        run.config = config_from_entry(list[i]["config"]);
      } catch (const SpecError& e) {
        throw SpecError(fmt::format("{}: {}", where, e.what()));
      }
      std::string bad = validation_error(run.model, run.config, run.gpus);
      if (!bad.empty()) throw SpecError(fmt::format("{}.config: {}", where, bad));
      std::string net = f.string("network", "");
      run.network = net.empty() ? uniform_network(hw, run.gpus) : load_network(net, hw);
      out.runs.push_back(std::move(run));
    } catch (const SpecError& e) {
      throw SpecError(fmt::format("{}: {}", origin, e.what()));
    }
  }
  return out;
}

StepFitResult calibrate_steps(const HardwareSpec& hw, const StepRuns& runs, const StepFitOptions& options) {
  const size_t n = runs.runs.size(), params = options.fit.size();
  std::string names;
  for (auto f : options.fit) names += (names.empty() ? "" : ", ") + std::string(to_string(f));
  if (n < params)
    throw SpecError(fmt::format("{}: runs: {} run(s) cannot determine {} factors ({}); give at least {} runs or fit "
                                "fewer factors",
                                runs.origin, n, params, names, params));
  const FactorBounds bounds = bounds_for(hw, runs);
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;

  StepFitResult result;
  result.fitted = options.fit;
  std::vector<std::string> unconstrained;
  FactorVector x = StepFitter(hw, runs, options.fit, all, bounds).solve(options.max_iterations, result.iterations,
                                                                        &unconstrained);
  if (!unconstrained.empty())
    throw SpecError(fmt::format("{}: runs: no run's step time depends on {}; drop it from the fitted factors",
                                runs.origin, unconstrained.front()));
  if (result.iterations < 0)
    throw SpecError(fmt::format("{}: runs: the fit of {} did not converge in {} iterations; check measured_s and the "
                                "layouts",
                                runs.origin, names, options.max_iterations));
  result.compute = std::exp(x[0]);
  result.comm = std::exp(x[1]);
  result.overhead = x[2];
  result.calibrated = apply_step_factors(hw, result.compute, result.comm, result.overhead);

  for (size_t i = 0; i < n; ++i) {
    const auto& run = runs.runs[i];
    StepFitRow row{run.name, run.measured, predicted_step(hw, run, 1, 1, hw.eff.step_overhead),
                   predicted_step(hw, run, result.compute, result.comm, result.overhead), std::nullopt};
    result.rows.push_back(row);
    result.mean_abs_pct_before += abs_pct(row.before, row.measured) / n;
    result.mean_abs_pct_after += abs_pct(row.after, row.measured) / n;
  }
  // Leave one out: needs at least as many remaining runs as factors.
  if (n > params) {
    double sum = 0, worst = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<size_t> others;
      for (size_t k = 0; k < n; ++k)
        if (k != i) others.push_back(k);
      int iterations = 0;
      FactorVector xi = StepFitter(hw, runs, options.fit, others, bounds).solve(options.max_iterations, iterations,
                                                                                nullptr);
      double held = predicted_step(hw, runs.runs[i], std::exp(xi[0]), std::exp(xi[1]), xi[2]);
      result.rows[i].held_out = held;
      double e = abs_pct(held, runs.runs[i].measured);
      sum += e;
      worst = std::max(worst, e);
    }
    result.loo_mean_abs_pct = sum / n;
    result.loo_max_abs_pct = worst;
  }
  return result;
}

nlohmann::json to_json(const StepFitResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows) {
    nlohmann::json row = {{"name", x.name}, {"measured_s", x.measured}, {"before_s", x.before}, {"after_s", x.after}};
    row["held_out_s"] = x.held_out ? nlohmann::json(*x.held_out) : nlohmann::json();
    rows.push_back(row);
  }
  std::vector<std::string> fitted;
  for (auto f : r.fitted) fitted.push_back(to_string(f));
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"hardware", to_json(r.calibrated)},
          {"factors", {{"compute", r.compute}, {"comm", r.comm}, {"overhead_s", r.overhead}}},
          {"fitted", fitted},
          {"iterations", r.iterations},
          {"mean_abs_error_pct_before", r.mean_abs_pct_before},
          {"mean_abs_error_pct_after", r.mean_abs_pct_after},
          {"leave_one_out", {{"mean_abs_error_pct", optional(r.loo_mean_abs_pct)},
                             {"max_abs_error_pct", optional(r.loo_max_abs_pct)}}},
          {"rows", rows}};
}

std::string format_step_fit(const StepFitResult& r, const std::string& origin) {
  std::string o = fmt::format("Seer calibration of {} from {} measured step times ({})\n", r.calibrated.name,
                              r.rows.size(), origin);
  o += fmt::format("{:<40} {:>10} {:>10} {:>10} {:>12}\n", "run", "measured", "before", "after", "held out");
  for (const auto& x : r.rows)
    o += fmt::format("{:<40} {:>8.3f} s {:>8.3f} s {:>8.3f} s {:>12}\n", x.name, x.measured, x.before, x.after,
                     x.held_out ? fmt::format("{:+.1f} %", (*x.held_out - x.measured) / x.measured * 100) : "-");
  o += fmt::format("\nmean absolute error {:.1f} % -> {:.1f} % (fitted runs)\n", r.mean_abs_pct_before,
                   r.mean_abs_pct_after);
  if (r.loo_mean_abs_pct)
    o += fmt::format("leave-one-out error: mean {:.1f} %, max {:.1f} % (each run predicted by a fit to the others)\n",
                     *r.loo_mean_abs_pct, *r.loo_max_abs_pct);
  else
    o += fmt::format("leave-one-out error: needs more runs than fitted factors ({})\n", r.fitted.size());
  std::string fitted;
  for (auto f : r.fitted) fitted += (fitted.empty() ? "" : ", ") + std::string(to_string(f));
  o += fmt::format("factors: compute x{:.3f}, comm x{:.3f}, overhead {:.1f} ms per step (fitted: {}; {} iterations)\n",
                   r.compute, r.comm, r.overhead * 1e3, fitted, r.iterations);
  return o;
}

}  // namespace astral::seer
