#pragma once
// Comparing Seer's predicted timeline with a measured PyTorch profiler (Kineto) trace: GPU kernels
// are classified into Seer's operator kinds by name (cuBLAS/CUTLASS GEMMs, flash attention, NCCL
// collectives, norms, softmax, ...), both sides are reduced to time per step on one rank, and the
// error is reported per kind and for the whole step.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace astral::seer {

// Seer's kind for a GPU kernel name: gemm, attention, softmax, dropout, norm, elementwise,
// embedding, loss, optimizer, allreduce, allgather, reducescatter, sendrecv (NCCL's point-to-point
// and all-to-all kernels), broadcast, or "other".
std::string classify_kernel(const std::string& name);

struct KindComparison {
  std::string kind;
  double predicted = 0;  // seconds per step
  double measured = 0;
  long predicted_count = 0;  // operators per step
  double measured_count = 0; // kernels per step (mean over steps)
  double error_pct() const;  // (predicted - measured) / measured; 0 when nothing was measured
};

struct Comparison {
  int predicted_rank = 0;
  int measured_steps = 0;
  double predicted_step = 0;  // seconds
  double measured_step = 0;
  double predicted_busy = 0;  // sum over kinds (kernel time), seconds per step
  double measured_busy = 0;
  long unmatched_kernels = 0; // measured kernels of kind "other" (per trace, not per step)
  std::vector<KindComparison> kinds;
  double step_error_pct() const;
  double busy_error_pct() const;
  // Mean absolute error over kinds, weighted by measured time.
  double weighted_kind_error_pct() const;
};

struct CompareOptions {
  int rank = -1;  // predicted rank to compare; -1: the measured trace's rank, else the first stage
};

// `predicted`: a timeline written by `astral seer predict --timeline`; `measured`: a Kineto trace
// (torch.profiler export_chrome_trace). Throws std::runtime_error naming what is missing.
Comparison compare_timelines(const nlohmann::json& predicted, const nlohmann::json& measured,
                             const CompareOptions& options = {});
nlohmann::json to_json(const Comparison& c);

}  // namespace astral::seer
