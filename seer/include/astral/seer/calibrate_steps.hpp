#pragma once
// Calibrating the stack from measured step times (`astral seer calibrate --steps runs.json`). A few
// runs of the user's own stack (model, layout, GPUs, network, measured seconds per step) fit at most
// three factors of the hardware profile, each with one meaning:
//   compute   multiplies every compute efficiency (gemm, memory, flash_fwd, flash_bwd): how fast
//             this stack's kernels run relative to the profile;
//   comm      multiplies the NCCL bandwidth efficiencies (nvlink, nvls, net): how much of the
//             links this stack's collectives get;
//   overhead  seconds added to every step that the model does not see (data loading, Python,
//             logging, host synchronisation);
//   straggler the per-rank compute-time variation (efficiency.straggler_cv) that makes every
//             step wait for its slowest rank; only runs at different scales tell it from
//             compute, so it is fitted only when asked for.
// The fit minimises the squared relative error of the step times. In the variables 1/compute,
// 1/comm and overhead a step time is nearly linear, so each Gauss-Newton step is an exact bounded
// linear least-squares solve, halved until the full prediction's error falls. Before fitting, the
// runs must tell the factors apart (no factor's effect on the step times explained by the others'),
// else it is an error naming them. It reports the leave-one-out error: each run predicted by a fit
// to the others.
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

#include "astral/seer/network.hpp"
#include "astral/seer/spec.hpp"

namespace astral::seer {

struct MeasuredRun {
  std::string name;
  ModelSpec model;
  TrainConfig config;  // validated, dp filled in
  int gpus = 0;
  Network network;     // built from the starting profile
  double measured = 0; // seconds per step
};

struct StepRuns {
  std::string origin;  // the input's name, for messages
  std::string hardware;  // the file's `hardware` (may be empty)
  std::vector<MeasuredRun> runs;
};

// Parses runs JSON (docs/seer.md, "Measured runs"); `hw` builds each run's network. Errors name
// `origin` and the field: "runs.json: runs[2].config: config.tp: 7 does not divide model.heads 96".
StepRuns parse_step_runs(const nlohmann::json& j, const std::string& origin, const HardwareSpec& hw);
// The `hardware` entry of runs JSON, or empty.
std::string step_runs_hardware(const nlohmann::json& j);

enum class StepFactor { kCompute, kComm, kOverhead, kStraggler };
inline constexpr int kStepFactors = 4;
const char* to_string(StepFactor f);
// Parses "compute,comm,overhead,straggler" (any subset); throws SpecError naming `field`.
std::vector<StepFactor> step_factors_from_string(const std::string& list, const std::string& field);

struct StepFitOptions {
  std::vector<StepFactor> fit{StepFactor::kCompute, StepFactor::kComm, StepFactor::kOverhead};
  int max_iterations = 60;
};

struct StepFitRow {
  std::string name;
  double measured = 0, before = 0, after = 0;
  std::optional<double> held_out;  // predicted by a fit to the other runs
};

struct StepFitResult {
  HardwareSpec calibrated;
  double compute = 1, comm = 1, overhead = 0;  // the factors (1, 1, 0 = the starting profile)
  double straggler_cv = 0;                      // efficiency.straggler_cv after the fit
  std::vector<StepFactor> fitted;
  std::vector<StepFactor> at_bound;  // fitted factors the fit pinned at a bound (see bounds in docs/seer.md)
  std::vector<StepFitRow> rows;
  int iterations = 0;
  double mean_abs_pct_before = 0, mean_abs_pct_after = 0;
  // Leave-one-out over the runs; absent when there are not more runs than fitted factors.
  std::optional<double> loo_mean_abs_pct, loo_max_abs_pct;
};

// Fits `options.fit` to the runs. Throws SpecError naming `runs.origin` when there are fewer runs
// than factors, when the runs do not constrain a factor or cannot tell two apart, or when the fit
// does not converge.
StepFitResult calibrate_steps(const HardwareSpec& hw, const StepRuns& runs, const StepFitOptions& options = {});

// The profile with the factors applied (efficiencies capped at 1); a negative straggler_cv keeps
// the profile's own.
HardwareSpec apply_step_factors(const HardwareSpec& hw, double compute, double comm, double overhead,
                                double straggler_cv = -1);

nlohmann::json to_json(const StepFitResult& r);
std::string format_step_fit(const StepFitResult& r, const std::string& origin);

}  // namespace astral::seer
