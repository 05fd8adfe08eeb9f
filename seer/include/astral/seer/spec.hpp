#pragma once
// Seer's inputs: the model, the GPU and the training configuration. Each has a documented JSON form
// (docs/seer.md); parsing checks every field and throws SpecError naming it. Values are in SI units
// inside the program (bytes, seconds, FLOP/s, bytes/s); the JSON uses the units people quote
// (GB/s, TFLOP/s, µs, GiB) and says so in the field names.
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace astral::seer {

// Bad or inconsistent input. The message names the field ("config.tp", "model.heads") and what is
// wrong with it, so the CLI can print it as one line.
struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType : std::uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };
inline constexpr int kDTypeCount = 5;
const char* to_string(DType d);
DType dtype_from_string(const std::string& s, const std::string& field);
double dtype_bytes(DType d);

enum class Activation : std::uint8_t { kGelu, kSwiglu };
enum class Norm : std::uint8_t { kLayerNorm, kRmsNorm };

// A decoder-only transformer. MoE layers replace the dense MLP of every `moe_every`-th layer.
struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;   // == heads for multi-head attention; fewer for GQA/MQA
  int head_dim = 0;   // hidden / heads unless given
  int ffn = 0;        // MLP inner size (per expert for MoE layers unless expert_ffn is set)
  int vocab = 0;
  int seq_len = 0;
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  bool rope = false;
  bool tied_embeddings = true;
  double dropout = 0.1;  // 0 removes dropout kernels and masks
  int experts = 0;       // 0 = dense model
  int top_k = 0;
  int expert_ffn = 0;
  int moe_every = 1;     // every n-th layer is MoE (1 = all layers)
  double capacity_factor = 1.0;

  bool is_moe() const { return experts > 0; }
  bool layer_is_moe(int layer) const { return is_moe() && (layer % moe_every) == moe_every - 1; }
  int moe_layers() const { return is_moe() ? layers / moe_every : 0; }
  // Parameter counts (whole model, not per GPU).
  double attention_params() const;
  double dense_mlp_params() const;
  double expert_params() const;  // one expert
  double embedding_params() const;  // one copy of the word embedding
  double total_params() const;
  double active_params() const;  // per token (top_k experts), for MoE FLOP counts
};

// One GPU model plus what surrounds it in a node. Efficiencies are the few calibrated constants of
// the cost model (docs/seer.md gives the source of every default).
struct HardwareSpec {
  std::string name;
  std::array<double, kDTypeCount> peak_flops{};  // dense, FLOP/s; 0 = not supported
  double hbm_bandwidth = 0;   // bytes/s
  double hbm_capacity = 0;    // bytes
  double memory_reserved = 0; // bytes the framework, CUDA context and NCCL keep (not for tensors)
  int sm_count = 0;
  int gpus_per_node = 8;
  double nvlink_bandwidth = 0;  // per GPU and direction, bytes/s
  double nvlink_latency = 0;    // per hop, s
  bool nvls = false;            // NVLink SHARP (NVSwitch in-network reduction)
  int nics_per_node = 8;
  double nic_bandwidth = 0;     // per NIC and direction, bytes/s
  double net_latency = 0;       // per inter-node hop (NIC + switch), s

  struct Efficiency {
    double gemm = 0.76;          // of peak, for large GEMMs (before tile/wave quantisation)
    double memory = 0.85;        // of HBM bandwidth, for element-wise kernels
    double flash_fwd = 0.65;     // of peak, fused attention forward
    double flash_bwd = 0.55;     // of peak, fused attention backward
    double kernel_overhead = 5e-6;  // s per kernel (launch and tail)
    double nvlink = 0.775;       // achievable NCCL bus bandwidth / link bandwidth
    double nvls = 0.6;           // NVLS all-reduce algorithm bandwidth / link bandwidth
    double net = 0.92;           // achievable NCCL bus bandwidth / NIC bandwidth
    double tp_overlap = 0.5;     // share of backward TP communication hidden behind weight-gradient GEMMs
    double dp_overlap = 1.0;     // share of an overlappable DP collective that can hide under compute
    double step_overhead = 0;    // s per step outside the modelled work (fitted by calibrate --steps)
    // Per-rank, per-step compute-time variation (standard deviation / mean: clocks, thermals,
    // OS noise). Every step waits for the slowest rank, so it costs compute x straggler_cv x the
    // expected maximum of N standard normals, N the ranks; 0 turns the term off.
    double straggler_cv = 0;
    int gemm_tile_m = 256;       // output tile of the large-GEMM kernels (wave quantisation)
    int gemm_tile_n = 128;
  } eff;

  double peak(DType d) const { return peak_flops[static_cast<int>(d)]; }
};

enum class Recompute : std::uint8_t { kNone, kSelective, kFull };
const char* to_string(Recompute r);

// How one training step is laid out. dp is derived from the GPU count when 0.
struct TrainConfig {
  int global_batch = 0;  // sequences per step
  int micro_batch = 1;
  int tp = 1;
  int pp = 1;
  int dp = 0;
  // Context parallelism (ring attention): the sequence is split over cp ranks (TP innermost, then
  // CP, then DP), attention exchanges K and V around the CP ring, and the CP ranks reduce their
  // gradients with the DP group, as Megatron-core does (Llama 3 405B trained with it).
  int cp = 1;
  int ep = 1;               // expert parallel, within tp x dp (MoE layers use expert TP = 1)
  // Token imbalance of the router: the tokens the busiest expert-parallel rank receives over the
  // mean (after any capacity limit), 1 to ep. The busiest rank sets the pace of the all-to-all
  // and of the expert GEMMs; a skewed router (DeepSeek-V3-style wide EP) makes it > 1.
  double ep_imbalance = 1.0;
  int vp = 1;               // virtual pipeline stages (interleaved 1F1B when > 1)
  // Layers of the first and last pipeline stage when they differ from the rest (Megatron's
  // --decoder-first/last-pipeline-num-layers: large runs lighten the stages that also hold the
  // embedding and the output layer); 0 = an even split. The middle stages share the rest evenly.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool distributed_optimizer = false;
  bool flash_attention = true;
  DType dtype = DType::kBf16;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool overlap_p2p = false;   // pipeline send/recv asynchronous (else blocking, Megatron's default)
  bool overlap_tp_comm = false;  // forward TP comm overlapped with GEMMs (userbuffers)
  bool fp32_grad_reduce = true;  // reduce gradients in fp32 (Megatron's default with bf16)

  int microbatches() const { return global_batch / (micro_batch * dp); }
  bool uneven_stages() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  int gpus() const { return tp * cp * pp * dp; }
};

// Checks that config fits model and GPU count, fills dp when 0, and throws SpecError naming the
// first offending field.
void validate(const ModelSpec& model, TrainConfig& config, int gpus);
// The same check without throwing: the message, or empty when the layout is valid.
std::string validation_error(const ModelSpec& model, TrainConfig& config, int gpus);

ModelSpec model_from_json(const nlohmann::json& j);
HardwareSpec hardware_from_json(const nlohmann::json& j);
TrainConfig config_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ModelSpec& m);
nlohmann::json to_json(const HardwareSpec& h);
nlohmann::json to_json(const TrainConfig& c);

}  // namespace astral::seer
