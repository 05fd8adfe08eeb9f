// What grows with scale (issue 16 item 3): collectives on a fabric take the flow simulator's ECMP
// efficiency from its table instead of the tiers' constants, and every step waits for its
// slowest rank (the straggler term).
#include <catch2/catch.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "astral/seer/calibrate_steps.hpp"
#include "astral/seer/ecmp_table.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/network.hpp"
#include "astral/seer/predict.hpp"

using namespace astral::seer;

namespace {

// A table as `astral fabric ecmp-table` writes it, for a 256-GPU fabric: whole-fabric rings lose
// 20 % to hashing, whole-fabric all-to-all half; groups of two hosts lose nothing.
std::shared_ptr<const EcmpTable> table_256(bool with_alltoall = true) {
  auto t = std::make_shared<EcmpTable>();
  t->gpus = 256;
  auto add = [&](const char* pattern, int gpus, double efficiency) {
    EcmpEntry e;
    e.pattern = pattern;
    e.placement = "packed";
    e.group_size = gpus;
    e.efficiency = efficiency;
    t->entries.push_back(e);
  };
  add("ring", 16, 1.0);
  add("ring", 256, 0.8);
  if (with_alltoall) {
    add("alltoall", 16, 1.0);
    add("alltoall", 256, 0.5);
  }
  return t;
}

double seconds(const Network& net, const Group& g, Collective c, double bytes) {
  return CollectiveModel(net, g).best(c, bytes).seconds;
}

}  // namespace

TEST_CASE("collectives across the fabric take the table's ECMP efficiency of the nearest group") {
  HardwareSpec hw = load_hardware("h100-sxm");
  Network plain = uniform_network(hw, 256);
  Network hashed = plain;
  hashed.ecmp_table = table_256();
  // Data-parallel ring: one rank on each of 32 hosts, bound by the network.
  Group dp = group_of(32, 8, 8);
  CHECK(CollectiveModel(hashed, dp).uses_ecmp_table());
  CHECK_FALSE(CollectiveModel(plain, dp).uses_ecmp_table());
  double ratio = seconds(hashed, dp, Collective::kAllReduce, 1e9) / seconds(plain, dp, Collective::kAllReduce, 1e9);
  CHECK(ratio == Approx(1 / 0.8).epsilon(0.02));
  // All-to-all over the whole fabric: the network part takes twice as long.
  Group ep = group_of(256, 1, 8);
  double a2a = seconds(hashed, ep, Collective::kAllToAll, 1e9) / seconds(plain, ep, Collective::kAllToAll, 1e9);
  CHECK(a2a == Approx(2.0).epsilon(0.03));
  // Two hosts: the table's two-host entries say the network adds nothing.
  Group pair = group_of(16, 1, 8);
  CHECK(seconds(hashed, pair, Collective::kAllToAll, 1e8) == Approx(seconds(plain, pair, Collective::kAllToAll, 1e8)));
  // Inside one host nothing crosses a switch, so the table does not apply.
  Group tp = group_of(8, 1, 8);
  CHECK_FALSE(CollectiveModel(hashed, tp).uses_ecmp_table());
  CHECK(seconds(hashed, tp, Collective::kAllReduce, 1e8) == seconds(plain, tp, Collective::kAllReduce, 1e8));
}

TEST_CASE("a table without the collective's pattern leaves that collective to the tiers") {
  HardwareSpec hw = load_hardware("h100-sxm");
  Network plain = uniform_network(hw, 256);
  Network rings_only = plain;
  rings_only.ecmp_table = table_256(false);
  Group ep = group_of(256, 1, 8);
  CHECK(seconds(rings_only, ep, Collective::kAllToAll, 1e9) == Approx(seconds(plain, ep, Collective::kAllToAll, 1e9)));
  CHECK(seconds(rings_only, ep, Collective::kAllReduce, 1e9) > 1.1 * seconds(plain, ep, Collective::kAllReduce, 1e9));
}

TEST_CASE("the expected slowest of n ranks grows as the maximum of normals does") {
  CHECK(expected_max_of_normals(1) == 0);
  CHECK(expected_max_of_normals(2) == Approx(0.5642).epsilon(1e-3));
  // Tabulated expected maxima of n standard normals (Tippett 1925; Harter 1961).
  CHECK(expected_max_of_normals(10) == Approx(1.5388).epsilon(0.01));
  CHECK(expected_max_of_normals(100) == Approx(2.5076).epsilon(0.01));
  CHECK(expected_max_of_normals(1000) == Approx(3.2414).epsilon(0.01));
  double last = 0;
  for (int n : {3, 64, 1024, 16384, 131072}) {
    CHECK(expected_max_of_normals(n) > last);
    last = expected_max_of_normals(n);
  }
}

TEST_CASE("the straggler term stretches each step by the slowest rank's compute, more at scale") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec hw = load_hardware("a100-80gb");
  TrainConfig c = load_config("korthikanti-175b-selective");
  auto step = [&](double cv, int gpus) {
    HardwareSpec h = hw;
    h.eff.straggler_cv = cv;
    TrainConfig cfg = c;
    cfg.dp = 0;
    cfg.global_batch = c.global_batch * gpus / 64;
    return predict(m, h, uniform_network(h, gpus), cfg, gpus);
  };
  Prediction base = step(0, 64), noisy = step(0.02, 64);
  CHECK(base.breakdown.straggler == 0);
  const auto& b = noisy.breakdown;
  CHECK(b.straggler == Approx(b.compute * 0.02 * expected_max_of_normals(64)).epsilon(1e-9));
  CHECK(noisy.step_time == Approx(base.step_time + b.straggler).epsilon(1e-9));
  CHECK(b.compute + b.tp + b.ep + b.pp + b.dp + b.optimizer + b.bubble + b.straggler ==
        Approx(noisy.step_time).epsilon(1e-9));
  // Same work per GPU on 16 times the GPUs: a larger share of the step goes to waiting.
  Prediction big = step(0.02, 1024);
  CHECK(big.breakdown.straggler / big.breakdown.compute > 1.3 * b.straggler / b.compute);
}

namespace {

// Weak scaling of the 22B model: the same work per GPU on 8 to 512 GPUs, so only the straggler
// term changes the step time with scale.
nlohmann::json weak_scaling_runs(const HardwareSpec& truth, const std::vector<int>& gpus) {
  const nlohmann::json layout = {{"micro_batch", 1}, {"tp", 8}, {"recompute", "selective"}};
  nlohmann::json doc = {{"hardware", "a100-80gb"}, {"runs", nlohmann::json::array()}};
  ModelSpec model = load_model("korthikanti-22b");
  for (int n : gpus) {
    nlohmann::json l = layout;
    l["global_batch"] = 4 * n / 8;
    double t = predict(model, truth, uniform_network(truth, n), config_from_json(l), n).step_time;
    doc["runs"].push_back({{"name", std::to_string(n) + " GPUs"}, {"model", "korthikanti-22b"}, {"config", l},
                           {"gpus", n}, {"measured_s", t}});
  }
  return doc;
}

}  // namespace

TEST_CASE("calibrate --steps fits the straggler variation from runs at several scales, and only from those") {
  HardwareSpec start = load_hardware("a100-80gb");
  HardwareSpec truth = apply_step_factors(start, 0.9, 1.0, 0.0, 0.03);
  StepFitOptions options;
  options.fit = {StepFactor::kCompute, StepFactor::kStraggler};
  StepRuns runs = parse_step_runs(weak_scaling_runs(truth, {8, 64, 512}), "runs.json", start);
  StepFitResult r = calibrate_steps(start, runs, options);
  CHECK(r.compute == Approx(0.9).epsilon(0.01));
  CHECK(r.straggler_cv == Approx(0.03).epsilon(0.05));
  CHECK(r.calibrated.eff.straggler_cv == r.straggler_cv);
  CHECK(r.mean_abs_pct_after < 0.5);
  // A fit without it leaves the profile's variation alone, and explains the runs less well.
  StepFitOptions compute_only;
  compute_only.fit = {StepFactor::kCompute};
  StepFitResult plain = calibrate_steps(start, runs, compute_only);
  CHECK(plain.straggler_cv == start.eff.straggler_cv);
  CHECK(plain.calibrated.eff.straggler_cv == start.eff.straggler_cv);
  CHECK(plain.mean_abs_pct_after > 2 * r.mean_abs_pct_after);
  // At one scale the straggler term is a fixed share of compute: indistinguishable from it.
  StepRuns one_scale = parse_step_runs(weak_scaling_runs(truth, {64, 64, 64}), "same.json", start);
  CHECK_THROWS_WITH(calibrate_steps(start, one_scale, options),
                    Catch::Contains("same.json") && Catch::Contains("cannot tell"));
}
