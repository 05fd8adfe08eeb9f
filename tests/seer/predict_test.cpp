// Step prediction: the calibration set within its tolerance, breakdown, memory, timeline, DP and MoE.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"
#include "astral/seer/validate.hpp"

using namespace astral::seer;

TEST_CASE("seer accuracy on the Korthikanti et al. calibration set (mean <= 5 %, max <= 10 %)") {
  ValidationReport r = run_validation(load_json("validation", "korthikanti"));
  REQUIRE(r.steps.size() == 8);
  for (const auto& row : r.steps) {
    INFO(row.name << ": measured " << row.measured << " s, predicted " << row.predicted << " s");
    CHECK(std::fabs(row.error_pct()) <= 10.0);
  }
  CHECK(r.mean_abs_pct() <= 5.0);
  CHECK(r.max_abs_pct() <= 10.0);
  CHECK(r.within_tolerance());
  // The per-layer times (Table 4) that the efficiencies were fitted on.
  REQUIRE(r.layers.size() == 10);
  for (const auto& row : r.layers) {
    INFO(row.name);
    CHECK(std::fabs(row.error_pct()) <= 5.0);
  }
}

TEST_CASE("seer 175B on 64 A100: MFU near the published 51.4 %, breakdown sums to the step") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec hw = load_hardware("a100-80gb");
  TrainConfig c = load_config("korthikanti-175b-selective");
  Prediction p = predict(m, hw, uniform_network(hw, 64), c, 64);
  CHECK(p.mfu == Approx(0.514).margin(0.03));
  CHECK(p.hfu > p.mfu);
  const auto& b = p.breakdown;
  CHECK(b.compute + b.tp + b.ep + b.pp + b.dp + b.optimizer + b.bubble == Approx(p.step_time).epsilon(1e-9));
  CHECK(b.bubble > 0);
  CHECK(b.tp > 0);
  CHECK(b.dp == 0);  // no data parallelism
  CHECK(p.memory.fits());
  CHECK(p.memory.stage == 0);
  // The JSON carries what the CLI promises.
  nlohmann::json j = to_json(p);
  for (const char* key : {"step_time_s", "mfu", "hfu", "memory_gib_per_gpu", "breakdown"}) CHECK(j.contains(key));
}

TEST_CASE("seer memory model rejects layouts that do not fit, with the numbers") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec hw = load_hardware("a100-80gb");
  TrainConfig c;
  c.global_batch = 64;
  c.tp = 8;
  c.pp = 1;
  Prediction p = predict(m, hw, uniform_network(hw, 8), c, 8);
  CHECK_FALSE(p.memory.fits());
  CHECK(p.memory.weights == Approx(174.6e9 / 8 * 2).epsilon(0.01));
  CHECK(p.memory.optimizer == Approx(174.6e9 / 8 * 12).epsilon(0.01));
  // The distributed optimizer shards the 12 bytes of state per parameter.
  c.pp = 8;
  c.dp = 0;
  TrainConfig dist = c;
  dist.distributed_optimizer = true;
  Prediction a = predict(m, hw, uniform_network(hw, 512), c, 512);
  Prediction d = predict(m, hw, uniform_network(hw, 512), dist, 512);
  CHECK(d.memory.optimizer == Approx(a.memory.optimizer / 8).epsilon(0.01));
  // Full recomputation keeps far fewer activations than none.
  TrainConfig full = c, none = c;
  full.recompute = Recompute::kFull;
  Prediction pf = predict(m, hw, uniform_network(hw, 512), full, 512);
  Prediction pn = predict(m, hw, uniform_network(hw, 512), none, 512);
  CHECK(pf.memory.activations < pn.memory.activations / 5);
  CHECK(pf.step_time > pn.step_time);
}

TEST_CASE("seer data-parallel reduction is exposed unless overlapped") {
  ModelSpec m = load_model("korthikanti-22b");
  HardwareSpec hw = load_hardware("a100-80gb");
  TrainConfig c;
  c.global_batch = 256;
  c.micro_batch = 2;
  c.tp = 8;
  c.pp = 2;
  c.sequence_parallel = true;
  c.distributed_optimizer = true;
  c.recompute = Recompute::kSelective;
  Network net = uniform_network(hw, 128);
  Prediction plain = predict(m, hw, net, c, 128);
  CHECK(plain.breakdown.dp > 0);
  TrainConfig ov = c;
  ov.overlap_grad_reduce = ov.overlap_param_gather = true;
  Prediction overlapped = predict(m, hw, net, ov, 128);
  CHECK(overlapped.breakdown.dp < plain.breakdown.dp / 2);
  CHECK(overlapped.step_time < plain.step_time);
}

TEST_CASE("seer timeline: one process per stage, operators add up to the tasks") {
  ModelSpec m = load_model("korthikanti-22b");
  HardwareSpec hw = load_hardware("a100-80gb");
  TrainConfig c;
  c.global_batch = 8;
  c.tp = 8;
  c.pp = 4;
  c.flash_attention = false;
  std::vector<TimelineEvent> events;
  PredictOptions opts;
  opts.timeline = &events;
  Prediction p = predict(m, hw, uniform_network(hw, 32), c, 32, opts);
  REQUIRE_FALSE(events.empty());
  double end = 0, compute0 = 0;
  std::set<int> ranks;
  for (const auto& e : events) {
    ranks.insert(e.rank);
    end = std::max(end, e.start + e.duration);
    if (e.stage == 0 && std::string(e.lane) == "compute" && std::string(e.kind) != "optimizer")
      compute0 += e.duration;
  }
  CHECK(ranks == std::set<int>{0, 8, 16, 24});
  CHECK(end == Approx(p.step_time).epsilon(1e-6));
  CHECK(compute0 == Approx(p.stages[0].compute).epsilon(1e-6));
  nlohmann::json trace = chrome_trace(events, {{"seer", {{"step_time_s", p.step_time}}}});
  CHECK(trace["traceEvents"].size() > events.size());  // plus process/thread names
  CHECK(trace["traceEvents"][0].contains("ts"));
}

TEST_CASE("seer MoE: expert parallelism adds all-to-all and shards experts") {
  ModelSpec m = load_model("mixtral-8x7b");
  HardwareSpec hw = load_hardware("h100-sxm");
  TrainConfig c;
  c.global_batch = 64;
  c.tp = 2;
  c.sequence_parallel = true;
  c.distributed_optimizer = true;
  c.ep = 1;
  Network net = uniform_network(hw, 64);
  TrainConfig ep8 = c;
  ep8.ep = 8;
  Prediction p1 = predict(m, hw, net, c, 64);
  Prediction p8 = predict(m, hw, net, ep8, 64);
  CHECK(p1.breakdown.ep == 0);
  CHECK(p8.breakdown.ep > 0);
  CHECK(p8.memory.weights < p1.memory.weights / 3);
  // Active parameters drive MFU for MoE: model FLOPs use top-k experts, not all eight.
  CHECK(p8.model_flops == Approx(model_flops_per_step(m, 64)));
  CHECK(p8.mfu > 0.1);
  CHECK(p8.mfu < 0.8);
}
