#pragma once
// Step-time prediction: the operator model per block, the pipeline schedule per stage, data
// parallel reduction and the optimizer step, combined into one step's timeline; plus the memory
// model and the FLOP counts behind MFU and HFU.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "astral/seer/network.hpp"
#include "astral/seer/schedule.hpp"
#include "astral/seer/spec.hpp"
#include "astral/seer/workload.hpp"

namespace astral::seer {

// Where the step time of the critical (last-finishing) stage goes; the parts sum to step_time.
struct Breakdown {
  double compute = 0;    // operators, including recomputation
  double tp = 0;         // exposed tensor-parallel communication
  double ep = 0;         // exposed expert-parallel all-to-all
  double pp = 0;         // blocking pipeline send/receive
  double dp = 0;         // exposed gradient reduction and parameter gather
  double optimizer = 0;
  double bubble = 0;     // idle: pipeline fill/drain and waiting for neighbours
  double overhead = 0;   // the profile's fixed per-step overhead (efficiency.step_overhead_ms)
  double straggler = 0;  // waiting for the slowest rank (efficiency.straggler_cv)
  double cp = 0;         // exposed context-parallel K/V exchange (ring attention)
};

// E[max of n independent standard normals]: exact for n <= 2, Blom's approximation beyond,
// within 1 % of the tabulated values from n = 3 to 10^6. Grows as sqrt(2 ln n).
double expected_max_of_normals(int n);

struct MemoryEstimate {
  int stage = 0;            // the stage this estimate is for
  double weights = 0;       // bytes
  double gradients = 0;
  double optimizer = 0;
  double fp8_weights = 0;   // dtype fp8: the cached casts of the linear weights
  double activations = 0;   // saved for backward, all micro-batches in flight
  double workspace = 0;     // transient peak (recompute working set, logits)
  double reserved = 0;      // CUDA context, NCCL buffers, allocator slack
  double capacity = 0;
  int microbatches_in_flight = 0;
  double total() const {
    return weights + gradients + optimizer + fp8_weights + activations + workspace + reserved;
  }
  bool fits() const { return total() <= capacity; }
};

// Memory per GPU on `stage` (the first stage holds the most activations in 1F1B).
MemoryEstimate estimate_memory(const Workload& work, int stage);
// The stage with the highest estimate.
MemoryEstimate peak_memory(const Workload& work);

// FLOPs per step over all GPUs. Model FLOPs follow Megatron's convention (full attention score
// matrix, no recomputation); hardware FLOPs add what recomputation executes again.
double model_flops_per_step(const ModelSpec& model, int global_batch);
double hardware_flops_per_step(const ModelSpec& model, const TrainConfig& config);

struct StageTimes {
  double end = 0;        // step time as seen by this stage (after DP and optimizer)
  double compute = 0, tp = 0, ep = 0, pp = 0, dp = 0, optimizer = 0, cp = 0;
};

struct Prediction {
  double step_time = 0;  // seconds
  double mfu = 0;
  double hfu = 0;
  double tokens_per_second = 0;
  double model_flops = 0;
  double hardware_flops = 0;
  Breakdown breakdown;
  int critical_stage = 0;
  std::vector<StageTimes> stages;
  MemoryEstimate memory;
  double layer_forward = 0;   // the first transformer layer, one micro-batch, seconds
  double layer_backward = 0;
  bool skipped = false;  // only a lower bound was computed (PredictOptions::skip_above)
};

// One step's events for the timeline (Chrome trace) and for `compare`.
struct TimelineEvent {
  std::string name;
  const char* kind = "";   // operator kind or "comm"
  const char* lane = "";   // compute | tp | ep | pp | dp
  int stage = 0;
  int rank = 0;            // global rank of the stage's representative (tp 0, dp 0)
  int microbatch = -1;
  int chunk = -1;
  int layer = -1;
  const char* phase = "";
  double start = 0;        // seconds from the step's start
  double duration = 0;
};

struct PredictOptions {
  bool fast_schedule = false;  // extrapolate long pipelines (search); exact otherwise
  std::vector<TimelineEvent>* timeline = nullptr;  // filled when set (exact schedule only)
  bool timeline_layers_only = false;  // one compute event per layer (big models, long pipelines)
  // When > 0 and the busiest stage's work alone exceeds it, stop early: the result has
  // skipped = true and step_time = that lower bound (used by search against its k-th best).
  double skip_above = 0;
};

// Predicts one step. `config.dp` may be 0 (derived from gpus). Throws SpecError for input that
// does not fit together.
Prediction predict(const ModelSpec& model, const HardwareSpec& hw, const Network& net,
                   TrainConfig config, int gpus, const PredictOptions& options = {});
// The same from an already built workload (its config validated, dp filled in).
Prediction predict(const Workload& work, int gpus, const PredictOptions& options = {});

nlohmann::json to_json(const Prediction& p);
nlohmann::json to_json(const MemoryEstimate& m);
// Chrome trace JSON (chrome://tracing, Perfetto): one process per pipeline stage's representative
// rank, threads per lane; `metadata` goes into otherData.
nlohmann::json chrome_trace(const std::vector<TimelineEvent>& events, const nlohmann::json& metadata);

}  // namespace astral::seer
