// Calibration from measured step times: recovering known factors, leave-one-out, and the errors
// for too few runs, layouts that do not fit, and a fit that does not converge.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <tuple>

#include "astral/seer/calibrate_steps.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {

// Small runs of the 22B model on one and two nodes: different shares of compute, NVLink and
// network time, so all three factors are constrained.
json small_runs(const HardwareSpec& truth) {
  const json layouts[] = {
      {{"global_batch", 4}, {"micro_batch", 4}, {"tp", 8}, {"recompute", "full"}, {"flash_attention", false}},
      {{"global_batch", 8}, {"micro_batch", 1}, {"tp", 4}, {"pp", 2}, {"recompute", "selective"}},
      {{"global_batch", 16}, {"micro_batch", 2}, {"tp", 8}, {"recompute", "selective"}},
      {{"global_batch", 16}, {"micro_batch", 2}, {"tp", 2}, {"pp", 4}, {"recompute", "full"}}};
  const int gpus[] = {8, 8, 16, 16};
  json doc = {{"hardware", "a100-80gb"}, {"runs", json::array()}};
  ModelSpec model = load_model("korthikanti-22b");
  for (int i = 0; i < 4; ++i) {
    TrainConfig c = config_from_json(layouts[i]);
    double t = predict(model, truth, uniform_network(truth, gpus[i]), c, gpus[i]).step_time;
    doc["runs"].push_back({{"name", "run " + std::to_string(i)}, {"model", "korthikanti-22b"},
                           {"config", layouts[i]}, {"gpus", gpus[i]}, {"measured_s", t}});
  }
  return doc;
}

}  // namespace

TEST_CASE("seer calibrate --steps recovers the compute, comm and overhead factors that made the times") {
  HardwareSpec start = load_hardware("a100-80gb");
  HardwareSpec truth = apply_step_factors(start, 0.85, 0.7, 0.25);
  json doc = small_runs(truth);
  StepRuns runs = parse_step_runs(doc, "runs.json", start);
  REQUIRE(runs.runs.size() == 4);
  StepFitResult r = calibrate_steps(start, runs);
  CHECK(r.compute == Approx(0.85).epsilon(0.02));
  CHECK(r.comm == Approx(0.7).epsilon(0.05));
  CHECK(r.overhead == Approx(0.25).margin(0.02));
  CHECK(r.mean_abs_pct_before > 10);
  CHECK(r.mean_abs_pct_after < 0.5);
  REQUIRE(r.loo_mean_abs_pct.has_value());
  CHECK(*r.loo_max_abs_pct < 2.0);
  for (const auto& row : r.rows) CHECK(row.held_out.has_value());
  // The calibrated profile round-trips through JSON and predicts with the overhead included.
  HardwareSpec reread = hardware_from_json(to_json(r.calibrated));
  CHECK(reread.eff.step_overhead == Approx(r.overhead));
  CHECK(reread.eff.gemm == Approx(start.eff.gemm * r.compute));
}

TEST_CASE("seer calibrate --steps fits only the factors asked for, fewer runs than factors is an error") {
  HardwareSpec start = load_hardware("a100-80gb");
  json doc = small_runs(apply_step_factors(start, 0.9, 1.0, 0.0));
  StepRuns runs = parse_step_runs(doc, "runs.json", start);
  StepFitOptions compute_only;
  compute_only.fit = {StepFactor::kCompute};
  StepFitResult r = calibrate_steps(start, runs, compute_only);
  CHECK(r.compute == Approx(0.9).epsilon(0.01));
  CHECK(r.comm == 1.0);
  CHECK(r.overhead == 0.0);

  doc["runs"] = json::array({doc["runs"][0], doc["runs"][1]});
  StepRuns two = parse_step_runs(doc, "runs.json", start);
  REQUIRE(two.runs.size() == 2);
  CHECK_THROWS_WITH(calibrate_steps(start, two),
                    Catch::Contains("runs.json") && Catch::Contains("2 run(s) cannot determine 3 factors"));
  // With as many runs as factors the fit works, but there is no leave-one-out error to report.
  StepFitOptions two_factors;
  two_factors.fit = {StepFactor::kCompute, StepFactor::kOverhead};
  StepFitResult exact = calibrate_steps(start, two, two_factors);
  CHECK_FALSE(exact.loo_mean_abs_pct.has_value());
}

TEST_CASE("seer calibrate --steps names the input and field for runs that do not fit the model") {
  HardwareSpec hw = load_hardware("a100-80gb");
  json bad = {{"runs", {{{"name", "bad"}, {"model", "gpt3-175b"}, {"config", {{"global_batch", 8}, {"tp", 7}}},
                         {"gpus", 56}, {"measured_s", 3.0}}}}};
  CHECK_THROWS_WITH(parse_step_runs(bad, "runs.json", hw),
                    Catch::Contains("runs.json: runs[0].config: config.tp: 7 does not divide model.heads 96"));
  json missing = {{"runs", {{{"model", "gpt3-175b"}, {"config", "korthikanti-175b-full"}, {"gpus", 64}}}}};
  CHECK_THROWS_WITH(parse_step_runs(missing, "runs.json", hw), Catch::Contains("runs[0].measured_s"));
  CHECK_THROWS_WITH(parse_step_runs(json::object(), "runs.json", hw), Catch::Contains("runs.json: runs: missing"));
  CHECK_THROWS_WITH(step_factors_from_string("compute,speed", "--fit"), Catch::Contains("--fit: unknown factor"));
}

TEST_CASE("seer calibrate --steps reports a fit that does not converge") {
  HardwareSpec start = load_hardware("a100-80gb");
  StepRuns runs = parse_step_runs(small_runs(apply_step_factors(start, 0.6, 0.5, 0.4)), "runs.json", start);
  StepFitOptions one_step;
  one_step.max_iterations = 1;
  CHECK_THROWS_WITH(calibrate_steps(start, runs, one_step), Catch::Contains("runs.json") &&
                                                                Catch::Contains("did not converge in 1 iterations"));
}

TEST_CASE("seer calibrate --steps fits all three factors on the four Korthikanti full-recompute runs") {
  // Published step times (Table 3): the fit is a bounded linear least-squares problem per step,
  // so it settles in a few iterations; these runs want no per-step overhead (it stays at 0).
  HardwareSpec start = load_hardware("a100-80gb");
  json doc = {{"hardware", "a100-80gb"}, {"runs", json::array()}};
  const std::tuple<const char*, const char*, const char*, int, double> rows[] = {
      {"22B", "korthikanti-22b", "korthikanti-22b-full", 8, 1.42},
      {"175B", "gpt3-175b", "korthikanti-175b-full", 64, 18.13},
      {"530B", "mt-nlg-530b", "korthikanti-530b-full", 280, 49.05},
      {"1T", "megatron-1t", "korthikanti-1t-full", 512, 94.42}};
  for (const auto& [name, model, config, gpus, measured] : rows)
    doc["runs"].push_back({{"name", name}, {"model", model}, {"config", config}, {"gpus", gpus}, {"measured_s", measured}});
  StepFitResult r = calibrate_steps(start, parse_step_runs(doc, "korthikanti.json", start));
  CHECK(r.iterations > 0);
  CHECK(r.iterations <= 10);
  CHECK(r.fitted.size() == 3);
  CHECK(r.mean_abs_pct_after < r.mean_abs_pct_before);
  CHECK(r.mean_abs_pct_after < 1.0);
  REQUIRE(r.loo_max_abs_pct.has_value());
  CHECK(*r.loo_max_abs_pct < 5.0);
  CHECK(r.overhead == Approx(0.0).margin(1e-9));
  REQUIRE(r.at_bound.size() == 1);
  CHECK(r.at_bound[0] == StepFactor::kOverhead);
  CHECK(format_step_fit(r, "korthikanti.json").find("overhead ended at its bound") != std::string::npos);
}

TEST_CASE("seer calibrate --steps names the factors the runs cannot tell apart") {
  // The same layout twice: compute and comm change both step times in the same proportion.
  HardwareSpec start = load_hardware("a100-80gb");
  json doc = {{"runs", json::array()}};
  for (double measured : {1.5, 1.6})
    doc["runs"].push_back({{"name", "22B"}, {"model", "korthikanti-22b"}, {"config", "korthikanti-22b-full"},
                           {"gpus", 8}, {"measured_s", measured}});
  StepRuns runs = parse_step_runs(doc, "same.json", start);
  StepFitOptions two;
  two.fit = {StepFactor::kCompute, StepFactor::kComm};
  CHECK_THROWS_WITH(calibrate_steps(start, runs, two),
                    Catch::Contains("same.json: runs: these runs cannot tell compute from comm"));
}
