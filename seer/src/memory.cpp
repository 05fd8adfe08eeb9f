// Memory per GPU: model states (Megatron mixed precision: bf16 weights, fp32 gradient buffer,
// fp32 master weights and Adam moments, sharded across data-parallel ranks by the distributed
// optimizer) and activations (per-operator saved tensors x micro-batches in flight).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "astral/seer/predict.hpp"

namespace astral::seer {

MemoryEstimate estimate_memory(const Workload& work, int stage) {
  const TrainConfig& c = work.config();
  const HardwareSpec& hw = work.hardware();
  MemoryEstimate m;
  m.stage = stage;
  m.capacity = hw.hbm_capacity;
  m.reserved = hw.memory_reserved;

  const auto params = work.stage_params(stage);
  const double all = params.dense + params.expert;
  const int edp = c.tp * c.cp * c.dp / std::max(c.ep, 1);
  const int ddp = c.dp * c.cp;  // the distributed optimizer shards over the CP ranks too
  m.weights = all * 2.0;
  m.gradients = all * (c.fp32_grad_reduce ? 4.0 : 2.0);
  const double state = 12.0;  // fp32 master weights + Adam m and v
  m.optimizer = c.distributed_optimizer ? state * (params.dense / ddp + params.expert / edp) : state * all;
  // FP8 (Transformer Engine): each linear weight is cast once per step and the cast kept for
  // every micro-batch's forward and backward, in both layouts on Hopper, whose FP8 GEMMs take
  // only one: rowwise for the forward GEMM, a transposed (columnwise) copy for the data
  // gradient. 1 byte each.
  if (c.dtype == DType::kFp8) m.fp8_weights = params.linear * 2.0;

  // Activations: every chunk-micro-batch a stage has started forward but not yet finished
  // backward holds its saved tensors. In 1F1B that peaks right after the warm-up.
  const int in_flight = std::min(warmup_tasks(c.pp, c.vp, c.microbatches(), stage) + 1, c.microbatches() * c.vp);
  m.microbatches_in_flight = in_flight;
  double per_chunk = 0;
  for (int ch = 0; ch < c.vp; ++ch) {
    int moe = work.moe_layers_in_chunk(stage, ch);
    int layers = work.layers_in_chunk(stage, ch);
    per_chunk = std::max(per_chunk, (layers - moe) * work.dense_layer().saved_bytes + moe * work.moe_layer().saved_bytes);
  }
  m.activations = per_chunk * in_flight;
  if (stage == 0) m.activations += work.embedding().saved_bytes * std::min(in_flight, c.microbatches());
  m.workspace = std::max(work.dense_layer().working_bytes, work.moe_layer().working_bytes);
  if (stage == c.pp - 1)
    m.workspace = std::max(m.workspace, work.output().working_bytes) + work.output().saved_bytes;
  return m;
}

MemoryEstimate peak_memory(const Workload& work) {
  MemoryEstimate worst = estimate_memory(work, 0);
  const int S = work.config().pp;
  // Only the first stage (most activations) and the last (logits) can be the maximum.
  if (S > 1) {
    MemoryEstimate last = estimate_memory(work, S - 1);
    if (last.total() > worst.total()) worst = last;
  }
  return worst;
}

nlohmann::json to_json(const MemoryEstimate& m) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return {{"stage", m.stage},
          {"weights_gib", m.weights / kGiB},
          {"gradients_gib", m.gradients / kGiB},
          {"optimizer_gib", m.optimizer / kGiB},
          {"fp8_weights_gib", m.fp8_weights / kGiB},
          {"activations_gib", m.activations / kGiB},
          {"workspace_gib", m.workspace / kGiB},
          {"reserved_gib", m.reserved / kGiB},
          {"total_gib", m.total() / kGiB},
          {"capacity_gib", m.capacity / kGiB},
          {"microbatches_in_flight", m.microbatches_in_flight},
          {"fits", m.fits()}};
}

}  // namespace astral::seer
