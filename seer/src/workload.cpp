// Operator lists per block and their roofline costs. Byte counts per operator follow the tensors
// each kernel reads and writes; the activation bytes each operator saves for backward follow
// Korthikanti et al. (arXiv 2205.05198 §4), which sum to 34·s·b·h + 5·a·s²·b per GPT layer.
#include "astral/seer/workload.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace astral::seer {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kAttention: return "attention";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kDropout: return "dropout";
    case OpKind::kNorm: return "norm";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kLoss: return "loss";
    case OpKind::kOptimizer: return "optimizer";
    case OpKind::kComm: return "comm";
  }
  return "?";
}

const char* to_string(CommDim d) {
  switch (d) {
    case CommDim::kNone: return "none";
    case CommDim::kTp: return "tp";
    case CommDim::kEp: return "ep";
    case CommDim::kPp: return "pp";
    case CommDim::kDp: return "dp";
    case CommDim::kCp: return "cp";
  }
  return "?";
}

// ---- roofline -------------------------------------------------------------------------------------

double gemm_seconds(const HardwareSpec& hw, DType dtype, double m, double n, double k, double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const auto& e = hw.eff;
  double flops = 2.0 * m * n * k * batch;
  // Tile and wave quantisation (NVIDIA, "Matrix Multiplication Background User's Guide"): the
  // output is cut into tiles, tiles run in waves of one per SM, and a partial last wave idles SMs.
  double big = std::max(m, n), small = std::min(m, n);
  double tiles = std::ceil(big / e.gemm_tile_m) * std::ceil(small / e.gemm_tile_n) * batch;
  double waves = std::ceil(tiles / hw.sm_count);
  double wave_eff = tiles / (waves * hw.sm_count);
  double peak = hw.peak(dtype) > 0 ? hw.peak(dtype) : hw.peak(DType::kBf16);
  double t_compute = flops / (peak * e.gemm * wave_eff);
  double bytes = dtype_bytes(dtype == DType::kFp8 ? DType::kFp8 : DType::kBf16) * (m * k + k * n + m * n) * batch;
  double t_memory = bytes / (hw.hbm_bandwidth * e.memory);
  return std::max(t_compute, t_memory) + e.kernel_overhead;
}

double memory_seconds(const HardwareSpec& hw, double bytes) {
  if (bytes <= 0) return 0;
  return bytes / (hw.hbm_bandwidth * hw.eff.memory) + hw.eff.kernel_overhead;
}

double attention_seconds(const HardwareSpec& hw, DType dtype, double flops, double bytes, bool backward) {
  double peak = hw.peak(dtype == DType::kFp8 ? DType::kBf16 : dtype);
  double t_compute = flops / (peak * (backward ? hw.eff.flash_bwd : hw.eff.flash_fwd));
  double t_memory = bytes / (hw.hbm_bandwidth * hw.eff.memory);
  return std::max(t_compute, t_memory) + hw.eff.kernel_overhead;
}

double BlockWork::forward_seconds() const {
  double t = 0;
  for (const auto& op : forward) t += op.is_comm() ? op.exposed() : op.seconds;
  return t;
}

double BlockWork::backward_seconds() const {
  double t = 0;
  for (const auto& op : backward) t += op.is_comm() ? op.exposed() : op.seconds;
  return t;
}

// ---- building blocks ------------------------------------------------------------------------------

namespace {

// Appends operators with the phase of the list they go to.
struct OpList {
  std::vector<Op>& ops;
  Phase phase;
  Op& add(const char* name, OpKind kind) {
    Op op;
    op.name = name;
    op.kind = kind;
    op.phase = phase;
    ops.push_back(op);
    return ops.back();
  }
  void gemm(const char* name, double m, double n, double k, double batch = 1) {
    Op& op = add(name, OpKind::kGemm);
    op.m = int(m), op.n = int(n), op.k = int(k), op.batch = int(batch);
    op.flops = 2.0 * m * n * k * batch;
  }
  void memory(const char* name, OpKind kind, double bytes) { add(name, kind).bytes = bytes; }
  void comm(const char* name, CommDim dim, Collective c, double bytes, double hidden = 0) {
    if (bytes <= 0) return;
    Op& op = add(name, OpKind::kComm);
    op.dim = dim, op.collective = c, op.bytes = bytes, op.hidden = hidden;
  }
};

// Dimensions of one layer on one GPU for one micro-batch.
struct Dims {
  double b, s, s_kv, h, n, n_sp, d, q, kv, ffn, e;
  int t;
  bool sp, swiglu, dropout, flash;
};

Dims dims_of(const ModelSpec& m, const TrainConfig& c) {
  Dims d{};
  d.t = c.tp;
  d.b = c.micro_batch;
  d.s = double(m.seq_len) / c.cp;  // this rank's share of the sequence (context parallelism)
  d.s_kv = m.seq_len;             // the keys and values its queries attend to
  d.h = m.hidden;
  d.n = d.b * d.s;
  d.sp = c.sequence_parallel;
  d.n_sp = d.sp ? d.n / d.t : d.n;
  d.d = m.head_dim;
  d.q = double(m.heads) / d.t;
  d.kv = std::max(1.0, double(m.kv_heads) / d.t);
  d.ffn = double(m.ffn) / d.t;
  d.e = 2;  // activations in bf16/fp16 (FP8 GEMMs cast their operands: gemm_op_seconds)
  d.swiglu = m.activation == Activation::kSwiglu;
  d.dropout = m.dropout > 0;
  d.flash = c.flash_attention;
  return d;
}

}  // namespace

Workload::Workload(const ModelSpec& model, const HardwareSpec& hw, const Network& net, const TrainConfig& config)
    : model_(model),
      hw_(hw),
      config_(config),
      tp_(net, group_of(config.tp, 1, net.gpus_per_host)),
      cp_(net, group_of(config.cp, config.tp, net.gpus_per_host)),
      ep_(net, group_of(config.ep, 1, net.gpus_per_host)),
      // CP ranks hold the same weights: gradients reduce over dp x cp ranks.
      dp_(net, group_of(config.dp * config.cp, config.tp, net.gpus_per_host)),
      edp_(net, group_of(config.tp * config.cp * config.dp / std::max(config.ep, 1), config.ep, net.gpus_per_host)),
      pp_(net, group_of(2, config.tp * config.cp * config.dp, net.gpus_per_host)) {
  layers_per_chunk_ = model.layers / (config.pp * config.vp);
  dense_ = build_layer(false);
  if (model.is_moe()) moe_ = build_layer(true);
  embedding_ = build_embedding();
  output_ = build_output();
  cost(dense_);
  cost(moe_);
  cost(embedding_);
  cost(output_);
  if (config.pp > 1) {
    // Megatron's scatter-gather optimisation: each TP rank sends its 1/t slice of the activation.
    p2p_bytes_ = double(config.micro_batch) * model.seq_len * model.hidden * 2.0 / config.tp / config.cp;
    p2p_seconds_ = pp_.best(Collective::kSendRecv, p2p_bytes_).seconds;
    p2p_cross_host_ = pp_.hosts() > 1;
  }
}

BlockWork Workload::build_layer(bool moe) const {
  const Dims d = dims_of(model_, config_);
  const bool tp = d.t > 1;
  const double ov = hw_.eff.tp_overlap;
  const double fwd_hidden = config_.overlap_tp_comm ? ov : 0.0;
  const double act = d.n * d.h * d.e;  // one full activation
  BlockWork w;
  OpList f{w.forward, Phase::kForward};
  std::vector<Op> grads;
  OpList g{grads, Phase::kBackward};

  // Forward and backward are written side by side; backward ops are collected in forward order
  // and reversed at the end.
  auto norm = [&](const char* fname, const char* bname) {
    f.memory(fname, OpKind::kNorm, 2 * d.n_sp * d.h * d.e);
    g.memory(bname, OpKind::kNorm, 4 * d.n_sp * d.h * d.e);
    w.saved_bytes += d.n_sp * d.h * d.e;
  };
  // Entering a tensor-parallel region (column-parallel GEMM input).
  auto tp_enter = [&](const char* fname, const char* bname) {
    if (!tp) return;
    if (d.sp) {
      f.comm(fname, CommDim::kTp, Collective::kAllGather, act, fwd_hidden);
      // Backward: reduce-scatter of the input gradient, hidden behind the weight-gradient GEMM,
      // and the re-gather of the sharded input that the weight gradient needs, hidden behind the
      // input-gradient GEMM (Korthikanti et al. §4.2.2).
      g.comm(bname, CommDim::kTp, Collective::kReduceScatter, act, ov);
      g.comm("tp_regather", CommDim::kTp, Collective::kAllGather, act, ov);
    } else {
      g.comm(bname, CommDim::kTp, Collective::kAllReduce, act, ov);  // async all-reduce
    }
  };
  // Leaving it (row-parallel GEMM output).
  auto tp_leave = [&](const char* fname, const char* bname) {
    if (!tp) return;
    if (d.sp) {
      f.comm(fname, CommDim::kTp, Collective::kReduceScatter, act, fwd_hidden);
      g.comm(bname, CommDim::kTp, Collective::kAllGather, act, 0);
    } else {
      f.comm(fname, CommDim::kTp, Collective::kAllReduce, act, fwd_hidden);
    }
  };
  auto residual = [&](const char* fname, const char* bname) {
    double mask = d.dropout ? 1.0 : 0.0;
    f.memory(fname, OpKind::kElementwise, d.n_sp * d.h * (3 * d.e + mask));
    g.memory(bname, OpKind::kElementwise, d.n_sp * d.h * (2 * d.e + mask));
    w.saved_bytes += d.n_sp * d.h * mask;
  };
  auto linear = [&](const char* fname, const char* dname, const char* wname, double m, double n, double k) {
    f.gemm(fname, m, n, k);
    g.gemm(dname, m, k, n);  // input gradient
    g.gemm(wname, k, n, m);  // weight gradient
  };

  // ---- attention block
  norm("input_norm", "input_norm.bwd");
  tp_enter("tp_allgather", "tp_reducescatter");
  const double qkv_out = (d.q + 2 * d.kv) * d.d;
  linear("qkv", "qkv.dgrad", "qkv.wgrad", d.n, qkv_out, d.h);
  w.saved_bytes += d.n_sp * d.h * d.e;
  if (model_.rope) {
    f.memory("rope", OpKind::kElementwise, 2 * d.n * (d.q + d.kv) * d.d * d.e);
    g.memory("rope.bwd", OpKind::kElementwise, 2 * d.n * (d.q + d.kv) * d.d * d.e);
  }
  const double heads_b = d.b * d.q;
  const double score_elems = heads_b * d.s * d.s;
  double attn_flops = 4.0 * d.b * d.s * d.s_kv * d.q * d.d;
  if (config_.cp > 1) {
    // Ring attention: cp - 1 steps each bring the next rank's K and V (and, backward, take their
    // gradients back), each step hidden behind the attention on the chunk already here.
    const double kv_chunk = d.n * 2 * d.kv * d.d * d.e;
    f.comm("cp_kv_exchange", CommDim::kCp, Collective::kSendRecv, kv_chunk);
    g.comm("cp_kv_exchange.bwd", CommDim::kCp, Collective::kSendRecv, 2 * kv_chunk);
  }
  if (d.flash) {
    double qkvo = d.n * (2 * d.q + 2 * d.kv) * d.d * d.e;
    Op& a = f.add("flash_attention", OpKind::kAttention);
    a.flops = attn_flops * 0.5;  // causal: the kernel skips masked tiles
    a.bytes = qkvo;
    Op& ab = g.add("flash_attention.bwd", OpKind::kAttention);
    ab.flops = attn_flops * 0.5 * 2.5;  // recomputes scores: 5 matmuls vs 2
    ab.bytes = 2 * qkvo;
    w.saved_bytes += qkvo + heads_b * d.s * 4;
  } else {
    f.gemm("attn_scores", d.s, d.s, d.d, heads_b);
    f.memory("softmax", OpKind::kSoftmax, score_elems * 2 * d.e);
    if (d.dropout) f.memory("attn_dropout", OpKind::kDropout, score_elems * (2 * d.e + 1));
    f.gemm("attn_context", d.s, d.d, d.s, heads_b);
    g.gemm("attn_scores.bwd", d.s, d.s, d.d, 2 * heads_b);
    g.memory("softmax.bwd", OpKind::kSoftmax, score_elems * 3 * d.e);
    if (d.dropout) g.memory("attn_dropout.bwd", OpKind::kDropout, score_elems * (2 * d.e + 1));
    g.gemm("attn_context.bwd", d.s, d.d, d.s, 2 * heads_b);
    w.saved_bytes += d.n * (d.q + d.kv) * d.d * d.e;  // Q, K
    w.saved_bytes += d.n * d.kv * d.d * d.e;          // V
    if (config_.recompute != Recompute::kSelective)
      w.saved_bytes += score_elems * (d.e + (d.dropout ? 1 + d.e : 0));
  }
  linear("attn_proj", "attn_proj.dgrad", "attn_proj.wgrad", d.n, d.h, d.q * d.d);
  w.saved_bytes += d.n * d.q * d.d * d.e;
  tp_leave(d.sp ? "tp_reducescatter" : "tp_allreduce", "tp_allgather");
  residual("attn_residual", "attn_residual.bwd");

  // ---- MLP block
  norm("mlp_norm", "mlp_norm.bwd");
  const double up = d.swiglu ? 2.0 : 1.0;
  if (!moe) {
    tp_enter("tp_allgather", "tp_reducescatter");
    linear("fc1", "fc1.dgrad", "fc1.wgrad", d.n, up * d.ffn, d.h);
    f.memory("activation", OpKind::kElementwise, d.n * d.ffn * (up + 1) * d.e);
    g.memory("activation.bwd", OpKind::kElementwise, d.n * d.ffn * (2 * up + 1) * d.e);
    linear("fc2", "fc2.dgrad", "fc2.wgrad", d.n, d.h, d.ffn);
    w.saved_bytes += d.n_sp * d.h * d.e + d.n * d.ffn * d.e * (up + 1);
    tp_leave(d.sp ? "tp_reducescatter" : "tp_allreduce", "tp_allgather");
  } else {
    // Tokens are split across TP ranks for the MoE block; experts are full width (ETP = 1).
    const double tokens = d.n / d.t;
    const double local_experts = double(model_.experts) / config_.ep;
    // The busiest expert-parallel rank's share: it sets the pace of the experts and all-to-all.
    const double routed = tokens * model_.top_k * model_.capacity_factor * config_.ep_imbalance;
    const double per_expert = routed / local_experts;
    const double eff_ffn = model_.expert_ffn;
    const double routed_act = routed * d.h * d.e;
    f.gemm("router", tokens, model_.experts, d.h);
    g.gemm("router.dgrad", tokens, d.h, model_.experts);
    g.gemm("router.wgrad", d.h, model_.experts, tokens);
    f.memory("moe_permute", OpKind::kElementwise, 2 * routed_act);
    g.memory("moe_permute.bwd", OpKind::kElementwise, 2 * routed_act);
    if (config_.ep > 1) {
      f.comm("ep_dispatch", CommDim::kEp, Collective::kAllToAll, routed_act);
      g.comm("ep_dispatch.bwd", CommDim::kEp, Collective::kAllToAll, routed_act);
    }
    f.gemm("expert_fc1", per_expert, up * eff_ffn, d.h, local_experts);
    g.gemm("expert_fc1.dgrad", per_expert, d.h, up * eff_ffn, local_experts);
    g.gemm("expert_fc1.wgrad", d.h, up * eff_ffn, per_expert, local_experts);
    f.memory("expert_activation", OpKind::kElementwise, routed * eff_ffn * (up + 1) * d.e);
    g.memory("expert_activation.bwd", OpKind::kElementwise, routed * eff_ffn * (2 * up + 1) * d.e);
    f.gemm("expert_fc2", per_expert, d.h, eff_ffn, local_experts);
    g.gemm("expert_fc2.dgrad", per_expert, eff_ffn, d.h, local_experts);
    g.gemm("expert_fc2.wgrad", eff_ffn, d.h, per_expert, local_experts);
    if (config_.ep > 1) {
      f.comm("ep_combine", CommDim::kEp, Collective::kAllToAll, routed_act);
      g.comm("ep_combine.bwd", CommDim::kEp, Collective::kAllToAll, routed_act);
    }
    f.memory("moe_unpermute", OpKind::kElementwise, 2 * routed_act);
    g.memory("moe_unpermute.bwd", OpKind::kElementwise, 2 * routed_act);
    if (tp && !d.sp) {  // re-replicate the tokens the TP ranks split
      f.comm("tp_allgather", CommDim::kTp, Collective::kAllGather, act, fwd_hidden);
      g.comm("tp_allgather.bwd", CommDim::kTp, Collective::kAllGather, act, 0);
    }
    w.saved_bytes += tokens * d.h * d.e + 2 * routed_act + routed * eff_ffn * d.e * (up + 1);
  }
  residual("mlp_residual", "mlp_residual.bwd");

  for (const auto& op : w.forward) w.forward_flops += op.flops;

  // Recomputation runs before the gradient operators of the layer.
  if (config_.recompute == Recompute::kFull) {
    for (const auto& op : w.forward) {
      Op copy = op;
      copy.phase = Phase::kRecompute;
      w.backward.push_back(copy);
      w.recompute_flops += op.flops;
    }
    w.working_bytes = w.saved_bytes;
    w.saved_bytes = d.n_sp * d.h * d.e;  // only the layer input is kept
  } else if (config_.recompute == Recompute::kSelective && !d.flash) {
    for (const auto& op : w.forward) {
      const std::string_view name = op.name;
      if (name == "attn_scores" || name == "softmax" || name == "attn_dropout" || name == "attn_context") {
        Op copy = op;
        copy.phase = Phase::kRecompute;
        w.backward.push_back(copy);
        w.recompute_flops += op.flops;
      }
    }
    w.working_bytes = score_elems * (d.e + (d.dropout ? 1 + d.e : 0));
  }
  w.backward.insert(w.backward.end(), grads.rbegin(), grads.rend());
  return w;
}

BlockWork Workload::build_embedding() const {
  const Dims d = dims_of(model_, config_);
  BlockWork w;
  OpList f{w.forward, Phase::kForward};
  OpList g{w.backward, Phase::kBackward};
  const double act = d.n * d.h * d.e;
  f.memory("embedding", OpKind::kEmbedding, 2 * act);
  if (d.t > 1) f.comm(d.sp ? "tp_reducescatter" : "tp_allreduce", CommDim::kTp,
                      d.sp ? Collective::kReduceScatter : Collective::kAllReduce, act);
  if (d.dropout) f.memory("embedding_dropout", OpKind::kDropout, d.n_sp * d.h * (2 * d.e + 1));
  if (d.dropout) g.memory("embedding_dropout.bwd", OpKind::kDropout, d.n_sp * d.h * (2 * d.e + 1));
  if (d.sp) g.comm("tp_allgather", CommDim::kTp, Collective::kAllGather, act);
  g.memory("embedding.bwd", OpKind::kEmbedding, d.n * d.h * (d.e + 8));  // fp32 scatter-add
  w.saved_bytes = d.dropout ? d.n_sp * d.h : 0;
  return w;
}

BlockWork Workload::build_output() const {
  const Dims d = dims_of(model_, config_);
  BlockWork w;
  OpList f{w.forward, Phase::kForward};
  std::vector<Op> grads;
  OpList g{grads, Phase::kBackward};
  const double act = d.n * d.h * d.e;
  const double vocab = std::ceil(double(model_.vocab) / (128.0 * d.t)) * 128.0;  // Megatron pads
  f.memory("final_norm", OpKind::kNorm, 2 * d.n_sp * d.h * d.e);
  g.memory("final_norm.bwd", OpKind::kNorm, 4 * d.n_sp * d.h * d.e);
  if (d.t > 1 && d.sp) {
    f.comm("tp_allgather", CommDim::kTp, Collective::kAllGather, act);
    g.comm("tp_reducescatter", CommDim::kTp, Collective::kReduceScatter, act, hw_.eff.tp_overlap);
  } else if (d.t > 1) {
    g.comm("tp_allreduce", CommDim::kTp, Collective::kAllReduce, act, hw_.eff.tp_overlap);
  }
  f.gemm("logits", d.n, vocab, d.h);
  g.gemm("logits.dgrad", d.n, d.h, vocab);
  g.gemm("logits.wgrad", d.h, vocab, d.n);
  // Vocab-parallel cross entropy in fp32: max, exp-sum and loss passes over the logits, and the
  // softmax gradient in backward; two tiny TP all-reduces of per-token statistics.
  f.memory("cross_entropy", OpKind::kLoss, d.n * vocab * (d.e + 3 * 4));
  if (d.t > 1) f.comm("tp_allreduce_stats", CommDim::kTp, Collective::kAllReduce, d.n * 4 * 3);
  g.memory("cross_entropy.bwd", OpKind::kLoss, d.n * vocab * (4 + d.e));
  for (const auto& op : w.forward) w.forward_flops += op.flops;
  w.saved_bytes = d.n_sp * d.h * d.e + d.n * d.h * d.e;
  w.working_bytes = d.n * vocab * 4;  // fp32 logits
  w.backward.insert(w.backward.end(), grads.rbegin(), grads.rend());
  return w;
}

// FP8 GEMMs with per-tensor scaling (Transformer Engine): each operand is cast from BF16 (read 2
// bytes, write 1, the amax for the next step's scale fused in) before the GEMM. A weight is cast
// once per step and reused by every micro-batch (Megatron passes is_first_microbatch); a
// weight-gradient GEMM's operands are both activations or gradients. Batched GEMMs (attention
// scores without fused attention) stay in BF16.
double Workload::gemm_op_seconds(const Op& op) const {
  const bool fp8 = config_.dtype == DType::kFp8 && op.batch == 1 && hw_.peak(DType::kFp8) > 0;
  if (!fp8) return gemm_seconds(hw_, config_.dtype == DType::kFp8 ? DType::kBf16 : config_.dtype, op.m, op.n, op.k, op.batch);
  const double m = op.m, n = op.n, k = op.k;
  const bool wgrad = std::string_view(op.name).find("wgrad") != std::string_view::npos;
  const int microbatches = config_.dp > 0 && config_.micro_batch > 0 ? config_.microbatches() : 1;
  const double weight_casts = wgrad ? 1.0 : 1.0 / std::max(microbatches, 1);
  const double cast_bytes = 3.0 * m * k + 3.0 * k * n * weight_casts;
  return gemm_seconds(hw_, DType::kFp8, m, n, k, 1) + memory_seconds(hw_, cast_bytes);
}

void Workload::cost(BlockWork& w) const {
  auto cost_ops = [&](std::vector<Op>& ops, bool backward) {
    for (auto& op : ops) {
      switch (op.kind) {
        case OpKind::kGemm: op.seconds = gemm_op_seconds(op); break;
        case OpKind::kAttention:
          op.seconds = attention_seconds(hw_, config_.dtype, op.flops, op.bytes, backward && op.phase == Phase::kBackward);
          break;
        case OpKind::kComm: {
          if (op.dim == CommDim::kCp) {  // cp - 1 ring steps
            op.seconds = (config_.cp - 1) * cp_.best(op.collective, op.bytes).seconds;
            break;
          }
          const CollectiveModel& cm = op.dim == CommDim::kTp ? tp_ : op.dim == CommDim::kEp ? ep_ : dp_;
          op.seconds = cm.best(op.collective, op.bytes).seconds;
          break;
        }
        default: op.seconds = memory_seconds(hw_, op.bytes); break;
      }
    }
  };
  cost_ops(w.forward, false);
  cost_ops(w.backward, true);
  hide_kv_exchange(w.forward);
  hide_kv_exchange(w.backward);
}

// The ring's transfers overlap the attention kernel of the same phase: what the attention takes
// longer than the transfers is hidden, the rest of the transfers is exposed.
void Workload::hide_kv_exchange(std::vector<Op>& ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].dim != CommDim::kCp || ops[i].seconds <= 0) continue;
    for (size_t j = 0; j < ops.size(); ++j)
      if (ops[j].kind == OpKind::kAttention && ops[j].phase == ops[i].phase) {
        ops[i].hidden = std::min(1.0, ops[j].seconds / ops[i].seconds);
        break;
      }
  }
}

int Workload::layers_in_chunk(int stage, int chunk) const {
  if (!config_.uneven_stages()) return layers_per_chunk_;
  (void)chunk;  // uneven stages are not interleaved: one chunk per stage
  if (stage == 0) return config_.first_stage_layers;
  if (stage == config_.pp - 1) return config_.last_stage_layers;
  return (model_.layers - config_.first_stage_layers - config_.last_stage_layers) / (config_.pp - 2);
}

int Workload::first_layer(int stage, int chunk) const {
  if (!config_.uneven_stages()) return (chunk * config_.pp + stage) * layers_per_chunk_;
  return stage == 0 ? 0 : config_.first_stage_layers + (stage - 1) * layers_in_chunk(1, 0);
}

int Workload::moe_layers_in_chunk(int stage, int chunk) const {
  if (!model_.is_moe()) return 0;
  const int first = first_layer(stage, chunk), n = layers_in_chunk(stage, chunk);
  int count = 0;
  for (int l = first; l < first + n; ++l) count += model_.layer_is_moe(l) ? 1 : 0;
  return count;
}

Workload::StageParams Workload::stage_params(int stage) const {
  StageParams p;
  const double t = config_.tp;
  for (int c = 0; c < config_.vp; ++c) {
    int moe = moe_layers_in_chunk(stage, c);
    int dense = layers_in_chunk(stage, c) - moe;
    p.dense += dense * (model_.attention_params() + model_.dense_mlp_params()) / t;
    p.dense += moe * (model_.attention_params() / t + double(model_.hidden) * model_.experts);
    p.expert += moe * model_.expert_params() * model_.experts / config_.ep;
    p.linear += dense * (model_.attention_params() + model_.dense_mlp_params()) / t +
                moe * (model_.attention_params() / t + model_.expert_params() * model_.experts / config_.ep);
  }
  // Embedding on the first stage; the output layer (or the tied copy) on the last.
  if (stage == 0) p.dense += model_.embedding_params() / t;
  if (stage == config_.pp - 1 && (config_.pp > 1 || !model_.tied_embeddings))
    p.dense += model_.embedding_params() / t;
  return p;
}

double Workload::optimizer_seconds(double params) const {
  // Mixed-precision Adam (Megatron + apex multi-tensor kernels), bytes per parameter:
  // grad-norm read 4; Adam reads fp32 param, grad, m, v (16) and writes param, m, v (12);
  // bf16 copy of the updated parameter 4+2; zeroing the fp32 gradient buffer 4.
  return memory_seconds(hw_, params * 42.0) + 10 * hw_.eff.kernel_overhead;
}

double Workload::grad_reduce_seconds(const StageParams& p) const {
  const double gb = config_.fp32_grad_reduce ? 4.0 : 2.0;
  const Collective c = config_.distributed_optimizer ? Collective::kReduceScatter : Collective::kAllReduce;
  double t = 0;
  if (config_.dp * config_.cp > 1) t += dp_.best(c, p.dense * gb).seconds;
  if (p.expert > 0 && edp_.group().ranks > 1) t += edp_.best(c, p.expert * gb).seconds;
  return t;
}

double Workload::param_gather_seconds(const StageParams& p) const {
  if (!config_.distributed_optimizer) return 0;
  double t = 0;
  if (config_.dp * config_.cp > 1) t += dp_.best(Collective::kAllGather, p.dense * 2.0).seconds;
  if (p.expert > 0 && edp_.group().ranks > 1) t += edp_.best(Collective::kAllGather, p.expert * 2.0).seconds;
  return t;
}

}  // namespace astral::seer
