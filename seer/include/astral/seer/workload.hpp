#pragma once
// The operator model: what one GPU executes for one micro-batch of one transformer layer (and for
// the embedding, the output layer and the optimizer step), each operator costed by a roofline with
// shape-dependent efficiency, each TP/EP collective by the collective model on the network.
//
// Operators follow Megatron-LM's execution order. Dense layers use Megatron tensor parallelism
// (column-parallel QKV/FC1, row-parallel projection/FC2; sequence parallelism turns each all-reduce
// into an all-gather + reduce-scatter pair). MoE layers use expert parallelism with full-width
// experts (expert TP = 1) and an all-to-all token dispatcher (Megatron-core's alltoall).
#include <cstdint>
#include <string>
#include <vector>

#include "astral/seer/network.hpp"
#include "astral/seer/spec.hpp"

namespace astral::seer {

enum class OpKind : std::uint8_t {
  kGemm,
  kAttention,    // fused (flash) attention
  kSoftmax,
  kDropout,
  kNorm,
  kElementwise,  // activations, residual adds, RoPE, permutes
  kEmbedding,
  kLoss,
  kOptimizer,
  kComm,
};
const char* to_string(OpKind k);

// The parallel dimension a collective runs on.
enum class CommDim : std::uint8_t { kNone, kTp, kEp, kPp, kDp, kCp };
const char* to_string(CommDim d);

enum class Phase : std::uint8_t { kForward, kBackward, kRecompute };

struct Op {
  const char* name = "";
  OpKind kind = OpKind::kElementwise;
  Phase phase = Phase::kForward;
  double flops = 0;   // arithmetic work
  double bytes = 0;   // HBM traffic for compute ops; payload for collectives
  // GEMM shape (batch GEMMs: `batch` independent m x n x k products).
  int m = 0, n = 0, k = 0, batch = 1;
  CommDim dim = CommDim::kNone;
  Collective collective = Collective::kAllReduce;
  // Share of this collective hidden behind compute on another stream (0 = on the critical path).
  double hidden = 0;
  double seconds = 0;  // cost, filled by the model
  double exposed() const { return seconds * (1.0 - hidden); }
  bool is_comm() const { return kind == OpKind::kComm; }
};

// Work of one block for one micro-batch on one GPU.
struct BlockWork {
  std::vector<Op> forward;
  std::vector<Op> backward;  // recomputation first, then the gradient operators
  double saved_bytes = 0;    // activations kept from forward to backward
  double working_bytes = 0;  // extra live memory while this block runs backward
  double forward_flops = 0;  // model FLOPs (no recomputation)
  double recompute_flops = 0;

  double forward_seconds() const;   // critical-path time: compute + exposed comm
  double backward_seconds() const;
};

// Roofline costs (seconds) of single operators on one GPU.
double gemm_seconds(const HardwareSpec& hw, DType dtype, double m, double n, double k, double batch = 1);
double memory_seconds(const HardwareSpec& hw, double bytes);
double attention_seconds(const HardwareSpec& hw, DType dtype, double flops, double bytes, bool backward);

// Everything one GPU runs in a step, per block type, for one configuration.
class Workload {
 public:
  Workload(const ModelSpec& model, const HardwareSpec& hw, const Network& net, const TrainConfig& config);

  const BlockWork& dense_layer() const { return dense_; }
  const BlockWork& moe_layer() const { return moe_; }
  const BlockWork& embedding() const { return embedding_; }
  const BlockWork& output() const { return output_; }

  // Parameters held by one GPU of pipeline stage `stage` (dense and expert parts separately,
  // because they reduce over different data-parallel groups).
  struct StageParams {
    double dense = 0;
    double expert = 0;
    double linear = 0;  // of those, the layers' linear weights (FP8 casts them; not embedding,
                        // output or router)
  };
  StageParams stage_params(int stage) const;
  // Layers of chunk `chunk` on `stage` (interleaved order; first and last stages may differ,
  // TrainConfig::first_stage_layers), the index of its first layer, and how many are MoE.
  int layers_in_chunk(int stage, int chunk) const;
  int first_layer(int stage, int chunk) const;
  int moe_layers_in_chunk(int stage, int chunk) const;

  // Optimizer step over `params` parameters of which `sharded_share` are updated locally.
  double optimizer_seconds(double params) const;
  // Data-parallel gradient reduction / parameter gather for `dense` and `expert` parameters.
  double grad_reduce_seconds(const StageParams& p) const;
  double param_gather_seconds(const StageParams& p) const;
  // Pipeline activation transfer between neighbouring stages (one direction, one micro-batch).
  double p2p_seconds() const { return p2p_seconds_; }
  double p2p_bytes() const { return p2p_bytes_; }
  bool p2p_cross_host() const { return p2p_cross_host_; }

  const TrainConfig& config() const { return config_; }
  const ModelSpec& model() const { return model_; }
  const HardwareSpec& hardware() const { return hw_; }

 private:
  BlockWork build_layer(bool moe) const;
  BlockWork build_embedding() const;
  BlockWork build_output() const;
  void cost(BlockWork& w) const;
  double gemm_op_seconds(const Op& op) const;  // with FP8's casts when config.dtype is fp8
  static void hide_kv_exchange(std::vector<Op>& ops);

  const ModelSpec& model_;
  const HardwareSpec& hw_;
  const TrainConfig& config_;
  CollectiveModel tp_;
  CollectiveModel cp_;
  CollectiveModel ep_;
  CollectiveModel dp_;
  CollectiveModel edp_;  // data parallel for expert weights
  CollectiveModel pp_;
  int layers_per_chunk_ = 0;
  double p2p_seconds_ = 0;
  double p2p_bytes_ = 0;
  bool p2p_cross_host_ = false;
  BlockWork dense_, moe_, embedding_, output_;
};

}  // namespace astral::seer
