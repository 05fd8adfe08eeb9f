#pragma once
// Parallel-layout search: enumerate TP x PP x DP x EP x micro-batch x virtual stages x recompute x
// sequence parallel x distributed optimizer for a model on a GPU count, reject invalid layouts,
// prune those that do not fit in memory, rank the rest by predicted step time.
#include <cstddef>
#include <functional>
#include <vector>

#include "astral/seer/predict.hpp"

namespace astral::seer {

struct SearchOptions {
  int global_batch = 0;  // sequences per step; 0 picks ~4M tokens (GPT-3/Llama practice)
  int top_k = 10;
  // Candidate values per dimension; empty lists get defaults from the model and the GPU count.
  std::vector<int> tp, pp, micro_batch, vp, ep;
  // Context-parallel sizes; empty: 1, plus 2, 4 and 8 for sequences of 16K tokens or more.
  std::vector<int> cp;
  std::vector<Recompute> recompute{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<bool> sequence_parallel{false, true};
  std::vector<bool> distributed_optimizer{false, true};
  // GEMM precisions to try; empty: base.dtype only. FP8 is skipped on hardware without an FP8 peak.
  std::vector<DType> dtypes;
  // Also try pipelines whose first and last stages hold one layer fewer than the others (they
  // also carry the embedding and the output layer), which lets pp not divide the layer count.
  bool lighter_end_stages = true;
  TrainConfig base;  // switches that are not searched (dtype, flash attention, overlaps)
  // Called now and then with (layouts looked at, total layouts); may be empty.
  std::function<void(std::size_t, std::size_t)> progress;
};

struct Candidate {
  TrainConfig config;
  Prediction prediction;
};

struct SearchResult {
  std::vector<Candidate> top;      // best first, re-predicted with the exact schedule
  std::size_t enumerated = 0;      // layouts generated
  std::size_t invalid = 0;         // rejected by the consistency checks
  std::size_t out_of_memory = 0;   // valid but over the GPU's memory
  std::size_t bounded = 0;         // fits, but a lower bound on its step time loses to the top k
  std::size_t evaluated = 0;       // fully predicted
  double seconds = 0;              // wall time of the search
  int global_batch = 0;
  // The smallest memory overshoot seen, for the "nothing fits" message.
  MemoryEstimate closest_oom;
};

int default_global_batch(const ModelSpec& model);

// The layouts the search would look at, valid or not (for benchmarks and tests); with `hw`,
// precisions the hardware lacks are left out.
std::vector<TrainConfig> enumerate_layouts(const ModelSpec& model, const Network& net, int gpus,
                                           const SearchOptions& options, const HardwareSpec* hw = nullptr);

SearchResult search(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                    const SearchOptions& options);

}  // namespace astral::seer
