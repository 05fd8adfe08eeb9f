// Layouts frontier runs use (issue 16 item 4): pipelines with lighter first and last stages, FP8
// GEMMs with per-tensor scaling, and the search over both.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"
#include "astral/seer/search.hpp"
#include "astral/seer/workload.hpp"

using namespace astral::seer;

namespace {

TrainConfig pipeline(int pp, int first, int last) {
  TrainConfig c;
  c.global_batch = 64;
  c.micro_batch = 1;
  c.tp = 8;
  c.pp = pp;
  c.first_stage_layers = first;
  c.last_stage_layers = last;
  c.recompute = Recompute::kSelective;
  return c;
}

// The operator of that name in a block's list (a failed check when there is none).
Op op_named(const std::vector<Op>& ops, const char* name) {
  for (const Op& o : ops)
    if (std::string(o.name) == name) return o;
  FAIL("no op " << name);
  return Op{};
}

}  // namespace

TEST_CASE("lighter first and last stages: layer counts, stage times and memory follow them") {
  ModelSpec m = load_model("gpt3-175b");  // 96 layers
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 512);
  // 96 layers over 7 stages: 13 + 5 x 14 + 13; an even split is impossible.
  TrainConfig uneven = pipeline(7, 13, 13);
  CHECK(validation_error(m, uneven, 448).empty());
  TrainConfig even = pipeline(8, 0, 0);
  REQUIRE(validation_error(m, even, 512).empty());
  Workload w(m, hw, net, uneven);
  CHECK(w.layers_in_chunk(0, 0) == 13);
  CHECK(w.layers_in_chunk(3, 0) == 14);
  CHECK(w.layers_in_chunk(6, 0) == 13);
  CHECK(w.first_layer(1, 0) == 13);
  CHECK(w.first_layer(6, 0) == 83);
  Prediction p = predict(m, hw, uniform_network(hw, 448), uneven, 448);
  REQUIRE(p.stages.size() == 7);
  // A middle stage computes 14 layers, the first 13 plus the embedding: less.
  CHECK(p.stages[0].compute < p.stages[3].compute);
  CHECK(p.stages[3].compute == Approx(p.stages[2].compute));
  // The JSON form round-trips the split.
  TrainConfig back = config_from_json(to_json(uneven));
  CHECK(back.first_stage_layers == 13);
  CHECK(back.last_stage_layers == 13);
}

TEST_CASE("an uneven split that does not add up is one error naming the fields") {
  ModelSpec m = load_model("gpt3-175b");
  TrainConfig bad = pipeline(7, 10, 10);  // 76 layers left for 5 stages
  std::string e = validation_error(m, bad, 448);
  CHECK(e.find("first_stage_layers 10") != std::string::npos);
  CHECK(e.find("do not split evenly") != std::string::npos);
  TrainConfig interleaved = pipeline(8, 11, 0);
  interleaved.vp = 2;
  CHECK(validation_error(m, interleaved, 512).find("not with interleaving") != std::string::npos);
  // One given end: the other takes the middle stages' size (96 = 12 + 6 x 14 + 0 -> 14).
  TrainConfig one_end = pipeline(7, 12, 0);
  CHECK(validation_error(m, one_end, 448).empty());
  CHECK(one_end.last_stage_layers == 14);
}

TEST_CASE("FP8 GEMMs run at the FP8 peak but pay for their casts, and hardware without FP8 is refused") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec hw = load_hardware("h100-sxm");
  TrainConfig bf16 = load_config("korthikanti-175b-selective");
  TrainConfig fp8 = bf16;
  fp8.dtype = DType::kFp8;
  validate(m, bf16, 64);
  validate(m, fp8, 64);
  Network net = uniform_network(hw, 64);
  Workload wb(m, hw, net, bf16), wf(m, hw, net, fp8);
  auto op = [](const Workload& w, const char* name) { return op_named(w.dense_layer().forward, name); };
  Op fc1_b = op(wb, "fc1"), fc1_f = op(wf, "fc1");
  // Twice the peak, less than twice as fast: the operands' casts are memory traffic.
  CHECK(fc1_f.seconds < fc1_b.seconds);
  CHECK(fc1_f.seconds > 0.5 * fc1_b.seconds);
  double gemm_only = gemm_seconds(hw, DType::kFp8, fc1_f.m, fc1_f.n, fc1_f.k, 1);
  CHECK(fc1_f.seconds > gemm_only);
  Prediction pb = predict(m, hw, net, bf16, 64), pf = predict(m, hw, net, fp8, 64);
  CHECK(pf.step_time < pb.step_time);
  CHECK(pf.step_time > 0.5 * pb.step_time);
  // The cached casts: 2 bytes per linear weight (both layouts), nothing in BF16.
  CHECK(pb.memory.fp8_weights == 0);
  Workload::StageParams sp = wf.stage_params(pf.memory.stage);
  CHECK(sp.linear < sp.dense + sp.expert);  // the embedding is not cast
  CHECK(sp.linear > 0.9 * (sp.dense + sp.expert));
  CHECK(pf.memory.fp8_weights == Approx(2 * sp.linear));
  CHECK(pf.memory.total() == Approx(pb.memory.total() + pf.memory.fp8_weights));
  // An A100 has no FP8 tensor cores.
  HardwareSpec a100 = load_hardware("a100-80gb");
  CHECK_THROWS_WITH(predict(m, a100, uniform_network(a100, 64), fp8, 64),
                    Catch::Contains("config.dtype") && Catch::Contains("no FP8 peak"));
}

TEST_CASE("the search tries lighter end stages and FP8 where the hardware has it") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec h100 = load_hardware("h100-sxm"), a100 = load_hardware("a100-80gb");
  Network net = uniform_network(h100, 448);
  SearchOptions o;
  o.tp = {8};
  o.micro_batch = {1};
  o.vp = {1};
  o.global_batch = 448;
  o.dtypes = {DType::kBf16, DType::kFp8};
  auto layouts = enumerate_layouts(m, net, 448, o, &h100);
  auto has = [&](int pp, int first, DType d) {
    return std::any_of(layouts.begin(), layouts.end(), [&](const TrainConfig& c) {
      return c.pp == pp && c.first_stage_layers == first && c.dtype == d;
    });
  };
  CHECK(has(7, 13, DType::kBf16));  // 448 GPUs = 8 x 7 x 8: only the uneven split has pp 7
  CHECK(has(7, 13, DType::kFp8));
  CHECK_FALSE(has(7, 0, DType::kBf16));
  auto on_a100 = enumerate_layouts(m, net, 448, o, &a100);
  CHECK(std::none_of(on_a100.begin(), on_a100.end(), [](const TrainConfig& c) { return c.dtype == DType::kFp8; }));
  o.lighter_end_stages = false;
  auto even_only = enumerate_layouts(m, net, 448, o, &h100);
  CHECK(std::none_of(even_only.begin(), even_only.end(), [](const TrainConfig& c) { return c.pp == 7; }));
  // The search predicts them: the best FP8 layout on H100 beats the best BF16 one.
  o.lighter_end_stages = true;
  o.top_k = 40;
  SearchResult r = search(m, h100, net, 448, o);
  REQUIRE_FALSE(r.top.empty());
  CHECK(r.top.front().config.dtype == DType::kFp8);
}

TEST_CASE("a skewed router slows the experts and the all-to-all by the busiest rank's share") {
  ModelSpec m = load_model("mixtral-8x7b");
  HardwareSpec hw = load_hardware("h100-sxm");
  TrainConfig c;
  c.global_batch = 64;
  c.tp = 1;
  c.ep = 8;
  c.recompute = Recompute::kFull;
  c.distributed_optimizer = true;
  TrainConfig skewed = c;
  skewed.ep_imbalance = 1.5;
  validate(m, c, 64);
  validate(m, skewed, 64);
  Network net = uniform_network(hw, 64);
  Workload even(m, hw, net, c), skew(m, hw, net, skewed);
  auto op = [](const Workload& w, const char* name) { return op_named(w.moe_layer().forward, name); };
  CHECK(op(skew, "expert_fc1").flops == Approx(1.5 * op(even, "expert_fc1").flops));
  CHECK(op(skew, "ep_dispatch").bytes == Approx(1.5 * op(even, "ep_dispatch").bytes));
  CHECK(op(skew, "ep_dispatch").seconds > 1.3 * op(even, "ep_dispatch").seconds);
  CHECK(predict(m, hw, net, skewed, 64).step_time > predict(m, hw, net, c, 64).step_time);
  // More than every token on one rank is impossible, and said so.
  TrainConfig impossible = c;
  impossible.ep_imbalance = 9;
  CHECK(validation_error(m, impossible, 64).find("config.ep_imbalance") != std::string::npos);
}

TEST_CASE("context parallelism splits the sequence: attention and activations per GPU fall, K/V ring overlaps") {
  ModelSpec m = load_model("llama3-70b");
  m.seq_len = 131072;  // Llama 3's long-context stage
  HardwareSpec hw = load_hardware("h100-sxm");
  auto layout = [&](int cp, int gpus) {
    TrainConfig c;
    c.global_batch = 8;
    c.tp = 8;
    c.pp = 8;
    c.cp = cp;
    c.sequence_parallel = true;
    c.recompute = Recompute::kFull;
    c.distributed_optimizer = true;
    validate(m, c, gpus);
    return c;
  };
  TrainConfig one = layout(1, 64), eight = layout(8, 512);
  CHECK(eight.dp == 1);
  Network net1 = uniform_network(hw, 64), net8 = uniform_network(hw, 512);
  Workload w1(m, hw, net1, one), w8(m, hw, net8, eight);
  auto op = op_named;
  // Each rank's queries are 1/8 of the sequence and attend to all of it.
  CHECK(op(w8.dense_layer().forward, "flash_attention").flops ==
        Approx(op(w1.dense_layer().forward, "flash_attention").flops / 8));
  Op ring = op(w8.dense_layer().forward, "cp_kv_exchange");
  CHECK(ring.seconds > 0);
  CHECK(ring.hidden > 0);
  CHECK(ring.hidden <= 1);
  CHECK(op(w8.dense_layer().backward, "cp_kv_exchange.bwd").bytes == Approx(2 * ring.bytes));
  Prediction p1 = predict(m, hw, net1, one, 64), p8 = predict(m, hw, net8, eight, 512);
  CHECK(p8.memory.activations < 0.2 * p1.memory.activations);
  // The CP ranks reduce gradients together although dp is 1.
  CHECK(w8.grad_reduce_seconds(w8.stage_params(1)) > 0);
  CHECK(p8.step_time < p1.step_time);
  CHECK(nlohmann::json(to_json(p8))["breakdown"]["exposed_comm_s"].contains("cp"));
}

TEST_CASE("context parallelism is validated, and searched for long sequences only") {
  ModelSpec m = load_model("llama3-70b");  // 8192 tokens
  TrainConfig odd;
  odd.global_batch = 8;
  odd.tp = 8;
  odd.cp = 3;
  CHECK(validation_error(m, odd, 24).find("config.cp: 3") != std::string::npos);
  TrainConfig unfused = odd;
  unfused.cp = 2;
  unfused.flash_attention = false;
  CHECK(validation_error(m, unfused, 16).find("flash_attention") != std::string::npos);
  HardwareSpec hw = load_hardware("h100-sxm");
  Network net = uniform_network(hw, 512);
  SearchOptions o;
  o.tp = {8};
  o.micro_batch = {1};
  o.vp = {1};
  o.global_batch = 64;
  auto any_cp = [](const std::vector<TrainConfig>& ls) {
    return std::any_of(ls.begin(), ls.end(), [](const TrainConfig& c) { return c.cp > 1; });
  };
  CHECK_FALSE(any_cp(enumerate_layouts(m, net, 512, o, &hw)));
  m.seq_len = 65536;
  CHECK(any_cp(enumerate_layouts(m, net, 512, o, &hw)));
}
