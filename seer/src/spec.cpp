// Model, hardware and training-configuration specs: JSON forms and consistency checks.
#include "astral/seer/spec.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "units.hpp"

namespace astral::seer {
namespace {

constexpr const char* kDTypeNames[kDTypeCount] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

}  // namespace

const char* to_string(DType d) { return kDTypeNames[static_cast<int>(d)]; }

DType dtype_from_string(const std::string& s, const std::string& field) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (s == kDTypeNames[i]) return static_cast<DType>(i);
  throw SpecError(fmt::format("{}: unknown dtype \"{}\" (fp32, tf32, bf16, fp16, fp8)", field, s));
}

double dtype_bytes(DType d) {
  switch (d) {
    case DType::kFp32:
    case DType::kTf32: return 4;
    case DType::kBf16:
    case DType::kFp16: return 2;
    case DType::kFp8: return 1;
  }
  return 2;
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

// ---- parameter counts --------------------------------------------------------------------------

double ModelSpec::attention_params() const {
  double q = double(hidden) * heads * head_dim;
  double kv = 2.0 * hidden * kv_heads * head_dim;
  double out = double(heads) * head_dim * hidden;
  return q + kv + out + 2.0 * hidden;  // + norm weights (and biases for LayerNorm, close enough)
}

double ModelSpec::dense_mlp_params() const {
  double up = activation == Activation::kSwiglu ? 2.0 * hidden * ffn : double(hidden) * ffn;
  return up + double(ffn) * hidden + 2.0 * hidden;
}

double ModelSpec::expert_params() const {
  double up = activation == Activation::kSwiglu ? 2.0 * hidden * expert_ffn : double(hidden) * expert_ffn;
  return up + double(expert_ffn) * hidden;
}

double ModelSpec::embedding_params() const { return double(vocab) * hidden; }

double ModelSpec::total_params() const {
  int moe = moe_layers();
  double per_dense = attention_params() + dense_mlp_params();
  double per_moe = attention_params() + experts * expert_params() + double(hidden) * experts;
  double emb = embedding_params() * (tied_embeddings ? 1 : 2);
  return (layers - moe) * per_dense + moe * per_moe + emb;
}

double ModelSpec::active_params() const {
  int moe = moe_layers();
  double per_dense = attention_params() + dense_mlp_params();
  double per_moe = attention_params() + top_k * expert_params() + double(hidden) * experts;
  return (layers - moe) * per_dense + moe * per_moe + embedding_params() * (tied_embeddings ? 1 : 2);
}

// ---- JSON ---------------------------------------------------------------------------------------

ModelSpec model_from_json(const nlohmann::json& j) {
  detail::Fields f(j, "model");
  ModelSpec m;
  m.name = f.string("name", "model");
  m.layers = f.positive_int("layers");
  m.hidden = f.positive_int("hidden");
  m.heads = f.positive_int("heads");
  m.kv_heads = f.positive_int("kv_heads", m.heads);
  if (!f.has("head_dim") && m.hidden % m.heads != 0)
    throw SpecError(fmt::format("model.heads: {} does not divide model.hidden {} (or give model.head_dim)",
                                m.heads, m.hidden));
  m.head_dim = f.positive_int("head_dim", m.hidden / m.heads);
  m.ffn = f.positive_int("ffn", 4 * m.hidden);
  m.vocab = f.positive_int("vocab");
  m.seq_len = f.positive_int("seq_len");
  std::string act = f.string("activation", "gelu");
  if (act == "gelu") m.activation = Activation::kGelu;
  else if (act == "swiglu") m.activation = Activation::kSwiglu;
  else throw SpecError(fmt::format("model.activation: unknown \"{}\" (gelu, swiglu)", act));
  std::string norm = f.string("norm", "layernorm");
  if (norm == "layernorm") m.norm = Norm::kLayerNorm;
  else if (norm == "rmsnorm") m.norm = Norm::kRmsNorm;
  else throw SpecError(fmt::format("model.norm: unknown \"{}\" (layernorm, rmsnorm)", norm));
  m.rope = f.boolean("rope", false);
  m.tied_embeddings = f.boolean("tied_embeddings", true);
  m.dropout = f.number("dropout", 0.1, 0, 1);
  if (m.heads % m.kv_heads != 0)
    throw SpecError(fmt::format("model.kv_heads: {} does not divide model.heads {}", m.kv_heads, m.heads));
  if (f.has("moe")) {
    auto moe = f.object("moe");
    m.experts = moe.positive_int("experts");
    m.top_k = moe.positive_int("top_k");
    m.expert_ffn = moe.positive_int("expert_ffn", m.ffn);
    m.moe_every = moe.positive_int("every", 1);
    m.capacity_factor = moe.number("capacity_factor", 1.0, 0.1, 16);
    if (m.top_k > m.experts)
      throw SpecError(fmt::format("model.moe.top_k: {} exceeds model.moe.experts {}", m.top_k, m.experts));
    if (m.moe_every > m.layers)
      throw SpecError(fmt::format("model.moe.every: {} exceeds model.layers {}", m.moe_every, m.layers));
  }
  return m;
}

HardwareSpec hardware_from_json(const nlohmann::json& j) {
  detail::Fields f(j, "hardware");
  HardwareSpec h;
  h.name = f.string("name", "gpu");
  auto peak = f.object("peak_tflops");
  if (!f.has("peak_tflops") || !peak.has("bf16"))
    throw SpecError("hardware.peak_tflops.bf16: missing (dense BF16 TFLOP/s)");
  for (int i = 0; i < kDTypeCount; ++i)
    h.peak_flops[i] = peak.number(kDTypeNames[i], 0, 0, 1e6) * 1e12;
  if (h.peak_flops[int(DType::kFp16)] == 0) h.peak_flops[int(DType::kFp16)] = h.peak_flops[int(DType::kBf16)];
  h.hbm_bandwidth = f.number("hbm_gbps") * kGB;
  h.hbm_capacity = f.number("hbm_gib") * kGiB;
  h.memory_reserved = f.number("reserved_gib", 3, 0, 1e4) * kGiB;
  h.sm_count = f.positive_int("sm_count");
  if (h.hbm_bandwidth <= 0) throw SpecError("hardware.hbm_gbps: must be > 0");
  if (h.hbm_capacity <= h.memory_reserved)
    throw SpecError("hardware.hbm_gib: must exceed hardware.reserved_gib");
  auto node = f.object("node");
  h.gpus_per_node = node.positive_int("gpus", 8);
  h.nvlink_bandwidth = node.number("nvlink_gbps", 0) * kGB;
  h.nvlink_latency = node.number("nvlink_latency_us", 3.4, 0, 1e6) * 1e-6;
  h.nvls = node.boolean("nvls", false);
  h.nics_per_node = node.positive_int("nics", h.gpus_per_node);
  h.nic_bandwidth = node.number("nic_gbps") * kGB;
  h.net_latency = node.number("net_latency_us", 9.6, 0, 1e6) * 1e-6;
  if (h.gpus_per_node > 1 && h.nvlink_bandwidth <= 0)
    throw SpecError("hardware.node.nvlink_gbps: missing for a node with several GPUs");
  if (h.nic_bandwidth <= 0) throw SpecError("hardware.node.nic_gbps: must be > 0");
  auto e = f.object("efficiency");
  auto& eff = h.eff;
  eff.gemm = e.fraction("gemm", eff.gemm);
  eff.memory = e.fraction("memory", eff.memory);
  eff.flash_fwd = e.fraction("flash_fwd", eff.flash_fwd);
  eff.flash_bwd = e.fraction("flash_bwd", eff.flash_bwd);
  eff.kernel_overhead = e.number("kernel_overhead_us", eff.kernel_overhead * 1e6, 0, 1e4) * 1e-6;
  eff.nvlink = e.fraction("nvlink", eff.nvlink);
  eff.nvls = e.fraction("nvls", eff.nvls);
  eff.net = e.fraction("net", eff.net);
  eff.tp_overlap = e.number("tp_overlap", eff.tp_overlap, 0, 1);
  eff.dp_overlap = e.number("dp_overlap", eff.dp_overlap, 0, 1);
  eff.step_overhead = e.number("step_overhead_ms", eff.step_overhead * 1e3, 0, 1e7) * 1e-3;
  eff.straggler_cv = e.number("straggler_cv", eff.straggler_cv, 0, 0.5);
  eff.gemm_tile_m = e.positive_int("gemm_tile_m", eff.gemm_tile_m);
  eff.gemm_tile_n = e.positive_int("gemm_tile_n", eff.gemm_tile_n);
  return h;
}

TrainConfig config_from_json(const nlohmann::json& j) {
  detail::Fields f(j, "config");
  TrainConfig c;
  c.global_batch = f.positive_int("global_batch");
  c.micro_batch = f.positive_int("micro_batch", 1);
  c.tp = f.positive_int("tp", 1);
  c.pp = f.positive_int("pp", 1);
  c.dp = f.nonnegative_int("dp", 0);
  c.cp = f.positive_int("cp", 1);
  c.ep = f.positive_int("ep", 1);
  c.ep_imbalance = f.number("ep_imbalance", 1.0, 1.0, 1e6);
  c.vp = f.positive_int("vp", 1);
  c.first_stage_layers = f.nonnegative_int("first_stage_layers", 0);
  c.last_stage_layers = f.nonnegative_int("last_stage_layers", 0);
  c.sequence_parallel = f.boolean("sequence_parallel", false);
  std::string rc = f.string("recompute", "none");
  if (rc == "none") c.recompute = Recompute::kNone;
  else if (rc == "selective") c.recompute = Recompute::kSelective;
  else if (rc == "full") c.recompute = Recompute::kFull;
  else throw SpecError(fmt::format("config.recompute: unknown \"{}\" (none, selective, full)", rc));
  c.distributed_optimizer = f.boolean("distributed_optimizer", false);
  c.flash_attention = f.boolean("flash_attention", true);
  c.dtype = dtype_from_string(f.string("dtype", "bf16"), "config.dtype");
  auto ov = f.object("overlap");
  c.overlap_grad_reduce = ov.boolean("grad_reduce", false);
  c.overlap_param_gather = ov.boolean("param_gather", false);
  c.overlap_p2p = ov.boolean("p2p", false);
  c.overlap_tp_comm = ov.boolean("tp_comm", false);
  c.fp32_grad_reduce = f.boolean("fp32_grad_reduce", true);
  return c;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j = {{"name", m.name},         {"layers", m.layers},   {"hidden", m.hidden},
                      {"heads", m.heads},       {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim},
                      {"ffn", m.ffn},           {"vocab", m.vocab},     {"seq_len", m.seq_len},
                      {"activation", m.activation == Activation::kSwiglu ? "swiglu" : "gelu"},
                      {"norm", m.norm == Norm::kRmsNorm ? "rmsnorm" : "layernorm"},
                      {"rope", m.rope},         {"tied_embeddings", m.tied_embeddings},
                      {"dropout", m.dropout}};
  if (m.is_moe())
    j["moe"] = {{"experts", m.experts}, {"top_k", m.top_k}, {"expert_ffn", m.expert_ffn},
                {"every", m.moe_every}, {"capacity_factor", m.capacity_factor}};
  return j;
}

nlohmann::json to_json(const HardwareSpec& h) {
  nlohmann::json peak = nlohmann::json::object();
  for (int i = 0; i < kDTypeCount; ++i) peak[kDTypeNames[i]] = h.peak_flops[i] / 1e12;
  const auto& e = h.eff;
  return {{"name", h.name},
          {"peak_tflops", peak},
          {"hbm_gbps", h.hbm_bandwidth / kGB},
          {"hbm_gib", h.hbm_capacity / kGiB},
          {"reserved_gib", h.memory_reserved / kGiB},
          {"sm_count", h.sm_count},
          {"node",
           {{"gpus", h.gpus_per_node}, {"nvlink_gbps", h.nvlink_bandwidth / kGB},
            {"nvlink_latency_us", h.nvlink_latency * 1e6}, {"nvls", h.nvls},
            {"nics", h.nics_per_node}, {"nic_gbps", h.nic_bandwidth / kGB},
            {"net_latency_us", h.net_latency * 1e6}}},
          {"efficiency",
           {{"gemm", e.gemm}, {"memory", e.memory}, {"flash_fwd", e.flash_fwd},
            {"flash_bwd", e.flash_bwd}, {"kernel_overhead_us", e.kernel_overhead * 1e6},
            {"nvlink", e.nvlink}, {"nvls", e.nvls}, {"net", e.net}, {"tp_overlap", e.tp_overlap},
            {"dp_overlap", e.dp_overlap}, {"step_overhead_ms", e.step_overhead * 1e3},
            {"straggler_cv", e.straggler_cv}, {"gemm_tile_m", e.gemm_tile_m},
            {"gemm_tile_n", e.gemm_tile_n}}}};
}

nlohmann::json to_json(const TrainConfig& c) {
  return {{"global_batch", c.global_batch},
          {"micro_batch", c.micro_batch},
          {"tp", c.tp},
          {"pp", c.pp},
          {"dp", c.dp},
          {"cp", c.cp},
          {"ep", c.ep},
          {"ep_imbalance", c.ep_imbalance},
          {"vp", c.vp},
          {"first_stage_layers", c.first_stage_layers},
          {"last_stage_layers", c.last_stage_layers},
          {"sequence_parallel", c.sequence_parallel},
          {"recompute", to_string(c.recompute)},
          {"distributed_optimizer", c.distributed_optimizer},
          {"flash_attention", c.flash_attention},
          {"dtype", to_string(c.dtype)},
          {"overlap",
           {{"grad_reduce", c.overlap_grad_reduce}, {"param_gather", c.overlap_param_gather},
            {"p2p", c.overlap_p2p}, {"tp_comm", c.overlap_tp_comm}}},
          {"fp32_grad_reduce", c.fp32_grad_reduce}};
}

// ---- consistency --------------------------------------------------------------------------------

namespace {

// First and last stages of their own size: one stage each, the middle ones even, every stage at
// least one layer. With two stages a single given size leaves the rest to the other.
std::string uneven_stage_error(const ModelSpec& m, TrainConfig& c) {
  if (c.pp < 2) return "config.first_stage_layers/last_stage_layers: need config.pp > 1";
  if (c.vp > 1) return "config.first_stage_layers/last_stage_layers: not with interleaving (config.vp > 1)";
  int& first = c.first_stage_layers;
  int& last = c.last_stage_layers;
  // An unset end takes the middle stages' size: solve first + (pp-2) x middle + last = layers.
  const int unset = (first == 0) + (last == 0);
  const int shares = c.pp - 2 + unset;
  const int rest = m.layers - first - last;
  if (shares == 0 ? rest != 0 : (rest < shares || rest % shares != 0))
    return fmt::format("config.first_stage_layers {} and last_stage_layers {}: the other {} of model.layers {} do not "
                       "split evenly, at least one layer each, over the other {} stage(s)",
                       first, last, rest, m.layers, c.pp - 2 + unset);
  if (first == 0) first = rest / shares;
  if (last == 0) last = rest / shares;
  return {};
}

}  // namespace

std::string validation_error(const ModelSpec& m, TrainConfig& c, int gpus) {
  if (gpus <= 0) return fmt::format("gpus: must be a positive integer, got {}", gpus);
  int tp_pp = c.tp * c.cp * c.pp;
  if (gpus % tp_pp != 0)
    return c.cp > 1 ? fmt::format("config.tp x config.cp x config.pp = {} does not divide the GPU count {}", tp_pp, gpus)
                    : fmt::format("config.tp x config.pp = {} does not divide the GPU count {}", tp_pp, gpus);
  if (c.dp == 0) c.dp = gpus / tp_pp;
  if (c.gpus() != gpus)
    return fmt::format("config.dp: tp {} x cp {} x pp {} x dp {} = {} GPUs, but {} were given", c.tp, c.cp, c.pp, c.dp,
         c.gpus(), gpus);
  if (c.cp > 1 && m.seq_len % (2 * c.cp) != 0)
    return fmt::format("config.cp: {} x 2 chunks (causal load balancing) does not divide model.seq_len {}", c.cp,
                       m.seq_len);
  if (c.cp > 1 && !c.flash_attention)
    return "config.cp: ring attention needs flash_attention (fused attention kernels)";
  if (m.heads % c.tp != 0) return fmt::format("config.tp: {} does not divide model.heads {}", c.tp, m.heads);
  if (m.kv_heads % c.tp != 0 && c.tp % m.kv_heads != 0)
    return fmt::format("config.tp: {} and model.kv_heads {} do not divide one another", c.tp, m.kv_heads);
  if (m.ffn % c.tp != 0) return fmt::format("config.tp: {} does not divide model.ffn {}", c.tp, m.ffn);
  if (c.uneven_stages()) {
    if (std::string e = uneven_stage_error(m, c); !e.empty()) return e;
  } else if (m.layers % (c.pp * c.vp) != 0) {
    return fmt::format("config.pp x config.vp = {} does not divide model.layers {}", c.pp * c.vp, m.layers);
  }
  if (c.vp > 1 && c.pp == 1) return fmt::format("config.vp: interleaving needs config.pp > 1");
  if (c.global_batch % (c.micro_batch * c.dp) != 0)
    return fmt::format("config.global_batch: {} is not a multiple of micro_batch {} x dp {}", c.global_batch,
         c.micro_batch, c.dp);
  // The schedule is simulated task by task: keep that bounded (a few seconds at most).
  if (double(c.microbatches()) * c.pp * c.vp > 4e6)
    return fmt::format("config.global_batch: {} micro-batches x pp {} x vp {} is too many pipeline tasks to simulate "
                       "(limit 4M); use a larger micro_batch or dp",
                       c.microbatches(), c.pp, c.vp);
  if (c.vp > 1 && c.microbatches() % c.pp != 0)
    return fmt::format("config.global_batch: the interleaved schedule needs the {} micro-batches per pipeline to be "
         "a multiple of pp {}", c.microbatches(), c.pp);
  if (c.sequence_parallel && c.tp == 1) return fmt::format("config.sequence_parallel: needs config.tp > 1");
  if (c.sequence_parallel && m.seq_len % c.tp != 0)
    return fmt::format("config.sequence_parallel: config.tp {} does not divide model.seq_len {}", c.tp, m.seq_len);
  if (c.ep > 1) {
    if (!m.is_moe()) return fmt::format("config.ep: {} but the model has no experts", c.ep);
    if ((c.tp * c.cp * c.dp) % c.ep != 0)
      return fmt::format("config.ep: {} does not divide tp x cp x dp = {}", c.ep, c.tp * c.cp * c.dp);
    if (m.experts % c.ep != 0) return fmt::format("config.ep: {} does not divide model.moe.experts {}", c.ep, m.experts);
  }
  if (c.ep_imbalance > c.ep)
    return fmt::format("config.ep_imbalance: {} is more than ep {} (every token on one rank)", c.ep_imbalance, c.ep);
  return {};
}

void validate(const ModelSpec& m, TrainConfig& c, int gpus) {
  std::string error = validation_error(m, c, gpus);
  if (!error.empty()) throw SpecError(error);
}

}  // namespace astral::seer
