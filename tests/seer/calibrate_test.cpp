// Calibration from measured operator times: recovering known efficiencies, CSV errors.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/inputs.hpp"

using namespace astral::seer;

TEST_CASE("seer calibrate recovers the efficiencies that produced the measurements") {
  HardwareSpec truth = load_hardware("h100-sxm");
  truth.eff.gemm = 0.68;
  truth.eff.memory = 0.91;
  truth.eff.flash_fwd = 0.55;
  truth.eff.kernel_overhead = 4e-6;
  // "Measurements" from the truth profile, as a CSV.
  std::string csv = "kind,m,n,k,batch,bytes,dtype,time_us,name\n";
  const int shapes[][3] = {{8192, 3072, 8192}, {8192, 8192, 1024}, {16384, 28672, 8192}, {4096, 4096, 4096}};
  for (const auto& s : shapes) {
    OperatorMeasurement op;
    op.m = s[0], op.n = s[1], op.k = s[2];
    csv += fmt::format("gemm,{},{},{},1,,bf16,{},gemm {}\n", s[0], s[1], s[2], model_seconds(truth, op) * 1e6, s[0]);
  }
  for (double bytes : {1e6, 64e6, 512e6}) {
    OperatorMeasurement op;
    op.kind = MeasuredKind::kMemory;
    op.bytes = bytes;
    csv += fmt::format("memory,,,,,{},bf16,{}\n", bytes, model_seconds(truth, op) * 1e6);
  }
  OperatorMeasurement fa;
  fa.kind = MeasuredKind::kFlashForward;
  fa.batch = 2, fa.m = 8192, fa.n = 64, fa.k = 128;
  csv += fmt::format("flash_fwd,8192,64,128,2,,bf16,{}\n", model_seconds(truth, fa) * 1e6);

  auto ops = parse_operator_csv(csv, "ops.csv");
  REQUIRE(ops.size() == 8);
  CalibrationResult r = calibrate(load_hardware("h100-sxm"), ops);
  CHECK(r.calibrated.eff.gemm == Approx(0.68).epsilon(0.01));
  CHECK(r.calibrated.eff.memory == Approx(0.91).epsilon(0.01));
  CHECK(r.calibrated.eff.flash_fwd == Approx(0.55).epsilon(0.02));
  CHECK(r.mean_abs_pct_before > 5);
  CHECK(r.mean_abs_pct_after < 1);
  CHECK(std::find(r.fitted.begin(), r.fitted.end(), "flash_bwd") == r.fitted.end());  // no data for it
}

TEST_CASE("seer calibrate CSV errors name the line") {
  CHECK_THROWS_WITH(parse_operator_csv("gemm,1,2,3,1,,bf16,abc\n", "ops.csv"), Catch::Contains("ops.csv:1"));
  CHECK_THROWS_WITH(parse_operator_csv("# header\nconv,1,2,3,1,,bf16,5\n", "ops.csv"),
                    Catch::Contains("ops.csv:2: unknown kind"));
  CHECK_THROWS_WITH(parse_operator_csv("gemm,1,2,,1,,bf16,5\n", "x.csv"), Catch::Contains("missing k"));
  CHECK_THROWS_WITH(parse_operator_csv("memory,,,,,100,bf17,5\n", "x.csv"), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(parse_operator_csv("kind,m\n", "x.csv"), Catch::Contains("no measurements"));
}
