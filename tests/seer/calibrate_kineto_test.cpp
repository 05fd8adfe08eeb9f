// Calibration from a PyTorch profiler (Kineto) trace: the streaming reader, shapes from the
// operators' "Input Dims", the efficiencies recovered, and the errors for traces that are not
// Kineto, are truncated, or have nothing to fit.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "astral/seer/calibrate_kineto.hpp"
#include "astral/seer/inputs.hpp"
#include "test_paths.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {

std::string fixture_text(const std::string& rel) {
  std::ifstream in(astral::test::fixture(rel));
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const KinetoKindTally* find_kind(const KinetoCalibration& c, const std::string& kind) {
  for (const auto& k : c.kinds)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace

TEST_CASE("seer calibrate --kineto recovers the efficiencies that made the kernel times") {
  // make_kineto_shapes_fixture.py: gemm 0.62, memory 0.72, flash 0.55 / 0.42, 4 us per kernel.
  HardwareSpec hw = load_hardware("a100-80gb");
  KinetoTrace trace = read_kineto_trace(astral::test::fixture("astral/seer/kineto-shapes-rank0.json"));
  CHECK(trace.rank == 0);
  CHECK(trace.gpu_steps.size() == 3);
  REQUIRE_FALSE(trace.kernels.empty());
  KinetoCalibration c = calibrate_kineto(hw, trace, KinetoCalibrationOptions{0});
  const auto& e = c.fit.calibrated.eff;
  CHECK(e.gemm == Approx(0.62).epsilon(0.03));
  CHECK(e.memory == Approx(0.72).epsilon(0.03));
  CHECK(e.flash_fwd == Approx(0.55).epsilon(0.03));
  CHECK(e.flash_bwd == Approx(0.42).epsilon(0.03));
  CHECK(e.kernel_overhead == Approx(4e-6).margin(1.5e-6));
  CHECK(c.fit.mean_abs_pct_before > 10);
  CHECK(c.fit.mean_abs_pct_after < 2.5);
  CHECK(c.steps == 3);
  // Never guessed: the radix sort is unclassified (once per step), listed by name.
  CHECK(c.unclassified == 3);
  REQUIRE(c.unclassified_names.size() == 1);
  CHECK(c.unclassified_names[0].name.find("DeviceSegmentedRadixSortKernel") != std::string::npos);
  // Classified but not fitted: the GEMM under an operator without shapes (4 layers x 3 steps) and
  // the optimizer kernel (tensor lists), once per step.
  CHECK(c.without_shapes == 15);
  const auto* allreduce = find_kind(c, "allreduce");
  REQUIRE(allreduce != nullptr);
  CHECK(allreduce->kernels == 12);
  CHECK(allreduce->measured == 0);
  const auto* gemm = find_kind(c, "gemm");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->measured == gemm->kernels - 12);
  // The profile round-trips into the form predict and search read.
  HardwareSpec reread = hardware_from_json(to_json(c.fit.calibrated));
  CHECK(reread.eff.gemm == Approx(e.gemm));
  json doc = to_json(c);
  CHECK(doc["unclassified"].size() == 1);
  CHECK(format_kineto_calibration(c, "t.json").find("unclassified") != std::string::npos);
}

TEST_CASE("seer kineto reader ties a kernel to its operator by External id or by the launch's correlation") {
  const std::string text = R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 9,
     "args": {"External id": 7, "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "ts": 20, "dur": 300,
     "args": {"device": 0, "External id": 7, "correlation": 99}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 30, "dur": 9,
     "args": {"External id": 8, "Input Dims": [[16, 2048, 128], [16, 128, 2048]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 31, "dur": 2, "args": {"External id": 8, "correlation": 100}},
    {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", "ts": 400, "dur": 120,
     "args": {"device": 0, "correlation": 100}},
    {"ph": "f", "cat": "ac2g", "id": 100, "ts": 400}]})";
  KinetoTrace t = parse_kineto_trace(text, "small.json");
  REQUIRE(t.kernels.size() == 2);
  const KinetoCpuOp* first = t.launcher(t.kernels[0]);
  const KinetoCpuOp* second = t.launcher(t.kernels[1]);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(first->name == "aten::mm");
  CHECK(second->name == "aten::bmm");
  REQUIRE(second->dims.size() == 2);
  CHECK(second->dims[0] == std::vector<std::int64_t>{16, 2048, 128});
  KinetoCalibration c = calibrate_kineto(load_hardware("h100-sxm"), t);
  REQUIRE(c.fit.rows.size() == 2);
  CHECK(c.fit.fitted == std::vector<std::string>{"gemm"});
}

TEST_CASE("seer kineto reader: not Kineto, truncated, no kernels, nothing to fit, another rank: one line each") {
  CHECK_THROWS_WITH(parse_kineto_trace(R"({"name": "x"})", "a.json"),
                    Catch::Contains("a.json: traceEvents: missing") && Catch::Contains("not a PyTorch profiler trace"));
  CHECK_THROWS_WITH(parse_kineto_trace("[1, 2]", "a.json"), Catch::Contains("a.json: traceEvents: missing"));
  const std::string full = fixture_text("astral/seer/kineto-shapes-rank0.json");
  CHECK_THROWS_WITH(parse_kineto_trace(full.substr(0, full.size() / 2), "half.json"),
                    Catch::Contains("half.json: not valid JSON at byte") && Catch::Contains("truncated"));
  CHECK_THROWS_WITH(parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm"}]})", "b.json"),
                    Catch::Contains("b.json: traceEvents: no GPU kernel events"));
  KinetoTrace no_shapes = parse_kineto_trace(
      R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "nvjet_tst_128x256", "ts": 0, "dur": 5, "args": {"device": 0}}]})",
      "c.json");
  CHECK_THROWS_WITH(calibrate_kineto(load_hardware("h100-sxm"), no_shapes),
                    Catch::Contains("c.json: traceEvents: no kernel is tied") && Catch::Contains("record_shapes=True"));
  KinetoTrace rank0 = read_kineto_trace(astral::test::fixture("astral/seer/kineto-shapes-rank0.json"));
  CHECK_THROWS_WITH(calibrate_kineto(load_hardware("a100-80gb"), rank0, KinetoCalibrationOptions{3}),
                    Catch::Contains("distributedInfo.rank: the trace is rank 0, not rank 3"));
  CHECK_THROWS_WITH(read_kineto_trace("/nonexistent/trace.json"), Catch::Contains("/nonexistent/trace.json: cannot open"));
}
