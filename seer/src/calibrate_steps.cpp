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

constexpr const char* kStepFactorNames[kStepFactors] = {"compute", "comm", "overhead", "straggler"};
constexpr double kMaxStragglerCv = 0.2;  // beyond a fifth of the compute time, something is broken

// The fit's variables are the inverse factors, the overhead and the straggler variation:
// x[0] = 1/compute, x[1] = 1/comm, x[2] = overhead seconds, x[3] = straggler_cv (linear: it adds
// compute x cv x E[max of N normals]). A step's compute time is proportional to 1/compute and its exposed
// communication roughly to 1/comm, so the step time is close to linear in x (exactly, while no
// efficiency reaches its cap of 1 and overlap does not change which part is exposed). The relative
// residuals are then a linear least-squares problem in x, solved exactly within the bounds at each
// Gauss-Newton step; the outer loop only corrects for what is not linear.
using FactorVector = std::array<double, kStepFactors>;
using FactorMatrix = std::array<std::array<double, kStepFactors>, kStepFactors>;

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

// Factors between a twentieth and what brings the largest efficiency to 1 (inverse factors from
// that efficiency to 20); overhead from 0 to the shortest measured step.
FactorBounds bounds_for(const HardwareSpec& hw, const StepRuns& runs) {
  double shortest = 1e300;
  for (const auto& r : runs.runs) shortest = std::min(shortest, r.measured);
  FactorBounds b;
  b.lo = {max_compute_efficiency(hw), max_comm_efficiency(hw, runs), 0.0, 0.0};
  b.hi = {20.0, 20.0, shortest, kMaxStragglerCv};
  return b;
}

Network scaled_network(const Network& n, double comm) {
  Network s = n;
  s.nvlink_efficiency = std::min(1.0, n.nvlink_efficiency * comm);
  s.nvls_efficiency = std::min(1.0, n.nvls_efficiency * comm);
  s.net_efficiency = std::min(1.0, n.net_efficiency * comm);
  return s;
}

double predicted_step(const HardwareSpec& hw, const MeasuredRun& run, double compute, double comm, double overhead,
                      double straggler_cv) {
  HardwareSpec h = apply_step_factors(hw, compute, comm, overhead, straggler_cv);
  return predict(run.model, h, scaled_network(run.network, comm), run.config, run.gpus).step_time;
}

// Solves the n x n system a x = b (n <= 3) by Gaussian elimination with partial pivoting.
bool solve_small_system(FactorMatrix a, FactorVector b, int n, FactorVector& x) {
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

// min |r + J d|^2 subject to lo <= d <= hi, for at most three columns: the minimum of a convex
// quadratic over a box is the unconstrained minimum on one of its faces, so every choice of free,
// at-lower and at-upper per variable (3^n faces) is tried and the best feasible one kept.
struct LinearFit {
  int n = 0;
  std::vector<std::array<double, kStepFactors>> jac;  // one row per run
  std::vector<double> residual;
  FactorVector lo{}, hi{};

  double cost_at(const FactorVector& d) const {
    double s = 0;
    for (size_t k = 0; k < residual.size(); ++k) {
      double v = residual[k];
      for (int q = 0; q < n; ++q) v += jac[k][q] * d[q];
      s += v * v;
    }
    return s;
  }

  // The free variables' minimum with the others pinned at `d`'s values; false when singular.
  bool solve_free(const std::array<bool, kStepFactors>& free, FactorVector& d) const {
    std::vector<int> idx;
    for (int q = 0; q < n; ++q)
      if (free[q]) idx.push_back(q);
    const int m = int(idx.size());
    FactorMatrix a{};
    FactorVector b{}, x{};
    for (size_t k = 0; k < residual.size(); ++k) {
      double fixed = residual[k];
      for (int q = 0; q < n; ++q)
        if (!free[q]) fixed += jac[k][q] * d[q];
      for (int i = 0; i < m; ++i) {
        b[i] -= jac[k][idx[i]] * fixed;
        for (int j = 0; j < m; ++j) a[i][j] += jac[k][idx[i]] * jac[k][idx[j]];
      }
    }
    if (m > 0 && !solve_small_system(a, b, m, x)) return false;
    for (int i = 0; i < m; ++i) d[idx[i]] = x[i];
    return true;
  }

  FactorVector solve() const {
    int faces = 1;
    for (int q = 0; q < n; ++q) faces *= 3;
    FactorVector best{};
    double best_cost = 1e300;
    for (int face = 0; face < faces; ++face) {
      std::array<bool, kStepFactors> free{};
      FactorVector d{};
      for (int q = 0, code = face; q < n; ++q, code /= 3) {
        free[q] = code % 3 == 0;
        d[q] = code % 3 == 1 ? lo[q] : hi[q];
      }
      if (!solve_free(free, d)) continue;
      bool inside = true;
      for (int q = 0; q < n; ++q) inside = inside && d[q] >= lo[q] - 1e-12 && d[q] <= hi[q] + 1e-12;
      double c = inside ? cost_at(d) : 1e300;
      if (c < best_cost) best_cost = c, best = d;
    }
    return best;
  }
};

// One fit: which factors move, on which runs.
class StepFitter {
 public:
  StepFitter(const HardwareSpec& hw, const StepRuns& runs, const std::vector<StepFactor>& fit,
             const std::vector<size_t>& use, const FactorBounds& bounds)
      : hw_(hw), runs_(runs), use_(use), bounds_(bounds) {
    for (int p = 0; p < kStepFactors; ++p)
      if (std::find(fit.begin(), fit.end(), StepFactor(p)) != fit.end()) params_.push_back(p);
    start_ = {1.0, 1.0, std::clamp(hw.eff.step_overhead, bounds.lo[2], bounds.hi[2]),
              std::clamp(hw.eff.straggler_cv, bounds.lo[3], bounds.hi[3])};
    for (int p = 0; p < 2; ++p) start_[p] = std::clamp(start_[p], bounds.lo[p], bounds.hi[p]);
  }

  // Bounded Gauss-Newton: a linear fit per step, halved until the true cost falls. `iterations`
  // is -1 when it did not settle within `max_iterations`.
  FactorVector solve(int max_iterations, int& iterations) const;
  // Throws (naming `origin`) when the runs cannot tell a fitted factor from the others.
  void check_identifiable(const std::string& origin) const;

 private:
  double work_seconds(size_t run, const FactorVector& x) const {
    return predicted_step(hw_, runs_.runs[run], 1.0 / x[0], 1.0 / x[1], 0.0, x[3]);
  }
  std::vector<double> work_all(const FactorVector& x) const {
    std::vector<double> w;
    for (size_t k : use_) w.push_back(work_seconds(k, x));
    return w;
  }
  double cost(const std::vector<double>& work, const FactorVector& x) const {
    double s = 0;
    for (size_t k = 0; k < use_.size(); ++k) {
      double r = (work[k] + x[2]) / runs_.runs[use_[k]].measured - 1.0;
      s += r * r;
    }
    return s;
  }
  LinearFit linearise(const FactorVector& x, const std::vector<double>& work) const;

  const HardwareSpec& hw_;
  const StepRuns& runs_;
  std::vector<size_t> use_;
  FactorBounds bounds_;
  std::vector<int> params_;
  FactorVector start_{};
};

LinearFit StepFitter::linearise(const FactorVector& x, const std::vector<double>& work) const {
  LinearFit f;
  f.n = int(params_.size());
  f.jac.resize(use_.size());
  for (size_t k = 0; k < use_.size(); ++k)
    f.residual.push_back((work[k] + x[2]) / runs_.runs[use_[k]].measured - 1.0);
  for (int q = 0; q < f.n; ++q) {
    const int p = params_[q];
    f.lo[q] = bounds_.lo[p] - x[p];
    f.hi[q] = bounds_.hi[p] - x[p];
    if (p == int(StepFactor::kOverhead)) {
      for (size_t k = 0; k < use_.size(); ++k) f.jac[k][q] = 1.0 / runs_.runs[use_[k]].measured;
      continue;
    }
    // A secant over 1 % of the variable (of its range for the straggler variation, which starts
    // at 0), inwards at the upper bound.
    FactorVector xs = x;
    const double span = p == int(StepFactor::kStraggler) ? 0.01 * bounds_.hi[p] : 0.01 * x[p];
    const double h = x[p] + span > bounds_.hi[p] ? -span : span;
    xs[p] += h;
    for (size_t k = 0; k < use_.size(); ++k)
      f.jac[k][q] = (work_seconds(use_[k], xs) - work[k]) / h / runs_.runs[use_[k]].measured;
  }
  return f;
}

FactorVector StepFitter::solve(int max_iterations, int& iterations) const {
  FactorVector x = start_;
  std::vector<double> work = work_all(x);
  double c = cost(work, x);
  for (int it = 1; it <= max_iterations; ++it) {
    LinearFit lin = linearise(x, work);
    FactorVector d = lin.solve();
    bool moved = false;
    for (double t = 1.0; t > 1e-3 && !moved; t /= 2) {
      FactorVector xn = x;
      for (int q = 0; q < lin.n; ++q) xn[params_[q]] = std::clamp(x[params_[q]] + t * d[q],
                                                                   bounds_.lo[params_[q]], bounds_.hi[params_[q]]);
      std::vector<double> wn = work_all(xn);
      double cn = cost(wn, xn);
      if (!std::isfinite(cn) || cn > c) continue;
      double change = 0;
      for (int q = 0; q < lin.n; ++q)
        change = std::max(change, std::fabs(xn[params_[q]] - x[params_[q]]) / std::max(1e-3, std::fabs(xn[params_[q]])));
      const double gain = c - cn;
      x = xn, work = wn, c = cn, moved = true;
      if (change < 1e-6 || gain <= 1e-12 * std::max(c, 1e-12)) {
        iterations = it;
        return x;
      }
    }
    if (!moved) {  // no step along the linear fit lowers the cost: a minimum within the bounds
      iterations = it;
      return x;
    }
  }
  iterations = -1;
  return x;
}

void StepFitter::check_identifiable(const std::string& origin) const {
  const FactorVector x = start_;
  LinearFit lin = linearise(x, work_all(x));
  const int n = lin.n;
  // Unit-length columns: the Gram matrix's inverse diagonal is how much a factor's effect is
  // explained by the others' (1 when independent, infinite when collinear).
  FactorVector norm{};
  for (int q = 0; q < n; ++q) {
    for (const auto& row : lin.jac) norm[q] += row[q] * row[q];
    norm[q] = std::sqrt(norm[q]);
    if (norm[q] < 1e-9)
      throw SpecError(fmt::format("{}: runs: no run's step time depends on {}; drop it from the fitted factors",
                                  origin, kStepFactorNames[params_[q]]));
  }
  FactorMatrix gram{};
  for (const auto& row : lin.jac)
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) gram[a][b] += row[a] / norm[a] * row[b] / norm[b];
  for (int q = 0; q < n; ++q) {
    FactorVector unit{}, column{};
    unit[q] = 1;
    const bool solved = solve_small_system(gram, unit, n, column);
    if (solved && column[q] < 1e6) continue;
    std::string others;
    for (int o = 0; o < n; ++o)
      if (o != q) others += (others.empty() ? "" : " and ") + std::string(kStepFactorNames[params_[o]]);
    throw SpecError(fmt::format("{}: runs: these runs cannot tell {} from {} (their step times change alike); add runs "
                                "with a different share of compute, communication and fixed time, or fit fewer factors",
                                origin, kStepFactorNames[params_[q]], others));
  }
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
    if (found < 0) throw SpecError(fmt::format("{}: unknown factor \"{}\" (compute, comm, overhead, straggler)", field, name));
    if (std::find(out.begin(), out.end(), StepFactor(found)) == out.end()) out.push_back(StepFactor(found));
  }
  if (out.empty()) throw SpecError(fmt::format("{}: name at least one factor (compute, comm, overhead, straggler)", field));
  return out;
}

HardwareSpec apply_step_factors(const HardwareSpec& hw, double compute, double comm, double overhead,
                                double straggler_cv) {
  HardwareSpec h = hw;
  auto& e = h.eff;
  for (double* v : {&e.gemm, &e.memory, &e.flash_fwd, &e.flash_bwd}) *v = std::min(1.0, *v * compute);
  for (double* v : {&e.nvlink, &e.nvls, &e.net}) *v = std::min(1.0, *v * comm);
  e.step_overhead = overhead;
  if (straggler_cv >= 0) e.straggler_cv = straggler_cv;
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
  StepFitter fitter(hw, runs, options.fit, all, bounds);
  fitter.check_identifiable(runs.origin);
  FactorVector x = fitter.solve(options.max_iterations, result.iterations);
  if (result.iterations < 0)
    throw SpecError(fmt::format("{}: runs: the fit of {} did not converge in {} iterations; check measured_s and the "
                                "layouts",
                                runs.origin, names, options.max_iterations));
  result.compute = 1.0 / x[0];
  result.comm = 1.0 / x[1];
  result.overhead = x[2];
  result.straggler_cv = x[3];
  for (auto f : options.fit)
    if (x[int(f)] <= bounds.lo[int(f)] + 1e-12 || x[int(f)] >= bounds.hi[int(f)] - 1e-12)
      result.at_bound.push_back(f);
  result.calibrated = apply_step_factors(hw, result.compute, result.comm, result.overhead, result.straggler_cv);

  for (size_t i = 0; i < n; ++i) {
    const auto& run = runs.runs[i];
    StepFitRow row{run.name, run.measured, predicted_step(hw, run, 1, 1, hw.eff.step_overhead, hw.eff.straggler_cv),
                   predicted_step(hw, run, result.compute, result.comm, result.overhead, result.straggler_cv),
                   std::nullopt};
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
      FactorVector xi = StepFitter(hw, runs, options.fit, others, bounds).solve(options.max_iterations, iterations);
      double held = predicted_step(hw, runs.runs[i], 1.0 / xi[0], 1.0 / xi[1], xi[2], xi[3]);
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
  std::vector<std::string> fitted, at_bound;
  for (auto f : r.fitted) fitted.push_back(to_string(f));
  for (auto f : r.at_bound) at_bound.push_back(to_string(f));
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"hardware", to_json(r.calibrated)},
          {"factors", {{"compute", r.compute}, {"comm", r.comm}, {"overhead_s", r.overhead},
                       {"straggler_cv", r.straggler_cv}}},
          {"fitted", fitted},
          {"at_bound", at_bound},
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
  o += fmt::format("factors: compute x{:.3f}, comm x{:.3f}, overhead {:.1f} ms per step, straggler cv {:.4f} "
                   "(fitted: {}; {} iterations)\n",
                   r.compute, r.comm, r.overhead * 1e3, r.straggler_cv, fitted, r.iterations);
  for (auto f : r.at_bound)
    o += fmt::format("note: {} ended at its bound (the runs would push it further; docs/seer.md, bounds)\n", to_string(f));
  return o;
}

}  // namespace astral::seer
