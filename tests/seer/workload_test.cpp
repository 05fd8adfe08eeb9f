// Operator model: FLOP counts, roofline costs, activation memory against Korthikanti et al.
#include <catch2/catch.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"

using namespace astral::seer;

namespace {

TrainConfig layout(int gb, int mb, int tp, int pp, bool sp, Recompute rc) {
  TrainConfig c;
  c.global_batch = gb;
  c.micro_batch = mb;
  c.tp = tp;
  c.pp = pp;
  c.sequence_parallel = sp;
  c.recompute = rc;
  c.flash_attention = false;
  return c;
}

}  // namespace

TEST_CASE("seer model FLOPs reproduce the Megatron formula on the calibration set") {
  // performance-models.md §5.3: F_model per iteration.
  struct Row {
    const char* model;
    int batch;
    double flops;
  } rows[] = {{"korthikanti-22b", 4, 1.1436e15},
              {"gpt3-175b", 64, 1.4109e17},
              {"mt-nlg-530b", 280, 1.8522e18},
              {"megatron-1t", 512, 6.4259e18}};
  for (const auto& r : rows) {
    INFO(r.model);
    ModelSpec m = load_model(r.model);
    CHECK(model_flops_per_step(m, r.batch) == Approx(r.flops).epsilon(0.001));
    // Full recomputation adds one forward pass: 96 B s l h^2 (1 + s/6h + V/16lh).
    TrainConfig c = layout(r.batch, 1, 8, 1, false, Recompute::kFull);
    double s = m.seq_len, h = m.hidden, l = m.layers, v = m.vocab;
    double f96 = 96.0 * r.batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
    CHECK(hardware_flops_per_step(m, c) == Approx(f96).epsilon(0.001));
  }
}

TEST_CASE("seer GEMM roofline: compute bound, memory bound, wave quantisation") {
  HardwareSpec hw = load_hardware("a100-80gb");
  hw.eff.kernel_overhead = 0;
  // A big square GEMM runs at the calibrated fraction of peak (tiles fill whole waves).
  double n = 256 * 108;  // 108 x 1 tiles of 256 x 128 -> exactly one wave per 128 columns
  double t = gemm_seconds(hw, DType::kBf16, n, 128 * 8, 8192);
  CHECK(t == Approx(2 * n * 1024 * 8192 / (312e12 * 0.76)).epsilon(1e-9));
  // One tile more spills into a second, nearly empty wave.
  double t_spill = gemm_seconds(hw, DType::kBf16, n + 1, 128 * 8, 8192);
  CHECK(t_spill > t * 1.05);
  // A matrix-vector product is memory bound.
  double gemv = gemm_seconds(hw, DType::kBf16, 16384, 1, 16384);
  CHECK(gemv == Approx(2.0 * (16384.0 * 16384 + 16384 + 16384) / (2039e9 * 0.85)).epsilon(1e-6));
  CHECK(memory_seconds(hw, 2039e9 * 0.85) == Approx(1.0));
}

TEST_CASE("seer activation memory per layer matches Korthikanti et al. Table 2") {
  // Per layer and micro-batch: no parallelism 34sbh + 5as^2b; TP without SP sbh(10 + 24/t + 5as/ht);
  // TP with SP sbh/t (34 + 5as/h); selective + SP 34 sbh/t; full recompute 2sbh (2sbh/t with SP).
  ModelSpec m = load_model("korthikanti-22b");
  HardwareSpec hw = load_hardware("a100-80gb");
  const double s = m.seq_len, h = m.hidden, a = m.heads, b = 4, t = 8;
  const double sbh = s * b * h;
  auto saved = [&](bool sp, Recompute rc, int tp) {
    TrainConfig c = layout(4, 4, tp, 1, sp, rc);
    validate(m, c, tp);
    Network net = uniform_network(hw, tp);
    Workload w(m, hw, net, c);
    return w.dense_layer().saved_bytes;
  };
  CHECK(saved(false, Recompute::kNone, 1) == Approx(sbh * (34 + 5 * a * s / h)).epsilon(0.001));
  CHECK(saved(false, Recompute::kNone, 8) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(0.001));
  CHECK(saved(true, Recompute::kNone, 8) == Approx(sbh / t * (34 + 5 * a * s / h)).epsilon(0.001));
  CHECK(saved(true, Recompute::kSelective, 8) == Approx(sbh / t * 34).epsilon(0.001));
  CHECK(saved(false, Recompute::kFull, 8) == Approx(2 * sbh).epsilon(0.001));
  CHECK(saved(true, Recompute::kFull, 8) == Approx(2 * sbh / t).epsilon(0.001));
}

TEST_CASE("seer layer operators: backward work, recomputation, TP collectives") {
  ModelSpec m = load_model("korthikanti-22b");
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 8);
  auto build = [&](bool sp, Recompute rc) {
    TrainConfig c = layout(4, 4, 8, 1, sp, rc);
    validate(m, c, 8);
    return Workload(m, hw, net, c).dense_layer();
  };
  BlockWork none = build(false, Recompute::kNone);
  double fwd_gemm = 0, bwd_gemm = 0;
  int fwd_ar = 0, bwd_ar = 0;
  for (const auto& op : none.forward) {
    fwd_gemm += op.kind == OpKind::kGemm ? op.flops : 0;
    fwd_ar += op.is_comm() && op.collective == Collective::kAllReduce;
  }
  for (const auto& op : none.backward) {
    bwd_gemm += op.kind == OpKind::kGemm ? op.flops : 0;
    bwd_ar += op.is_comm() && op.collective == Collective::kAllReduce;
  }
  CHECK(bwd_gemm == Approx(2 * fwd_gemm));
  CHECK(fwd_ar == 2);  // row-parallel outputs (g)
  CHECK(bwd_ar == 2);  // column-parallel input gradients (f)
  // Full recomputation re-runs the whole forward before the gradients; selective only attention.
  BlockWork full = build(false, Recompute::kFull);
  CHECK(full.recompute_flops == Approx(none.forward_flops));
  CHECK(full.backward_seconds() == Approx(none.backward_seconds() + none.forward_seconds()).epsilon(1e-9));
  BlockWork sel = build(false, Recompute::kSelective);
  CHECK(sel.recompute_flops == Approx(4.0 * 4 * 2048.0 * 2048 * 6144 / 8));
  // Sequence parallelism: all-gather + reduce-scatter instead of all-reduce, norms on s/t tokens.
  BlockWork sp = build(true, Recompute::kNone);
  int ag = 0, rs = 0;
  for (const auto& op : sp.forward) {
    ag += op.is_comm() && op.collective == Collective::kAllGather;
    rs += op.is_comm() && op.collective == Collective::kReduceScatter;
  }
  CHECK(ag == 2);
  CHECK(rs == 2);
  CHECK(sp.forward_seconds() < none.forward_seconds());
}
