#pragma once
// Pipeline schedules simulated as events per stage: Megatron-LM's 1F1B and interleaved 1F1B
// (virtual stages). Each stage runs its forward/backward tasks in the schedule's order; a task
// starts when its stage is free and its input (activation or gradient from the neighbouring
// stage) has arrived. The bubble is whatever idle time results, not a closed form.
#include <vector>

namespace astral::seer {

struct PipelineSpec {
  int stages = 1;
  int chunks = 1;        // virtual stages per stage (interleaving when > 1)
  int microbatches = 1;
  std::vector<double> forward;   // seconds per micro-batch, index stage * chunks + chunk
  std::vector<double> backward;  // same, including recomputation
  double p2p = 0;                // one activation or gradient transfer between stages
  bool blocking_p2p = true;      // the sender waits for its transfer (Megatron without overlap)
};

struct PipelineTask {
  int stage = 0;
  int chunk = 0;
  int microbatch = 0;
  bool backward = false;
  double start = 0;
  double end = 0;
};

struct PipelineRun {
  double makespan = 0;
  std::vector<double> stage_end;   // when each stage finished its last task
  std::vector<double> stage_p2p;   // blocking transfer time per stage
  // Per (stage, chunk): the last backward task (for overlapping gradient reduction) and the
  // first forward task (for overlapping the parameter all-gather).
  std::vector<double> last_backward_start;
  std::vector<double> last_backward_end;
  std::vector<double> first_forward_start;
};

// Megatron's task order for one stage: (is_backward, chunk, micro-batch) triples.
struct ScheduledTask {
  bool backward;
  int chunk;
  int microbatch;
};
std::vector<ScheduledTask> stage_order(int stages, int chunks, int microbatches, int stage);
// Forward chunk-micro-batches a stage runs before its first backward (its activations in flight).
int warmup_tasks(int stages, int chunks, int microbatches, int stage);

// Exact event simulation; `tasks` (optional) receives every task with its times.
PipelineRun simulate_pipeline(const PipelineSpec& spec, std::vector<PipelineTask>* tasks = nullptr);

// For long pipelines: simulates two prefixes of the micro-batch sequence and extrapolates the
// steady state, so the cost does not grow with the micro-batch count. Exact when
// microbatches <= prefix; the search uses it and re-checks its top results exactly.
PipelineRun simulate_pipeline_fast(const PipelineSpec& spec);

}  // namespace astral::seer
