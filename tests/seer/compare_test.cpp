// Predicted timeline vs a Kineto trace: kernel classification and per-kind errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "astral/seer/compare.hpp"
#include "test_paths.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {
json load(const std::string& rel) {
  std::ifstream in(astral::test::fixture(rel));
  REQUIRE(in.good());
  return json::parse(in);
}
}  // namespace

TEST_CASE("seer classifies real kernel names into operator kinds") {
  CHECK(classify_kernel("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn") == "gemm");
  CHECK(classify_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1") == "gemm");
  CHECK(classify_kernel("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT") == "gemm");
  CHECK(classify_kernel("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>") == "attention");
  CHECK(classify_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "allreduce");
  CHECK(classify_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "allgather");
  CHECK(classify_kernel("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL") == "reducescatter");
  CHECK(classify_kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "sendrecv");
  CHECK(classify_kernel("void cuApplyLayerNorm<c10::BFloat16, float, c10::BFloat16>(...)") == "norm");
  CHECK(classify_kernel("void (anonymous namespace)::scaled_masked_softmax_warp_forward<...>") == "softmax");
  CHECK(classify_kernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>") == "optimizer");
  CHECK(classify_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>") ==
        "elementwise");
  CHECK(classify_kernel("void cub::DeviceSegmentedRadixSortKernel<Policy800>") == "other");
}

TEST_CASE("seer compare recovers the per-kind factors built into the synthetic Kineto trace") {
  // make_kineto_fixture.py stretched every kernel of a kind by a known factor (+-3 % jitter).
  Comparison c = compare_timelines(load("astral/seer/predicted-gpt-small.json"),
                                   load("astral/seer/kineto-gpt-small-rank0.json"));
  CHECK(c.measured_steps == 2);
  CHECK(c.predicted_rank == 0);
  CHECK(c.unmatched_kernels == 2);  // one unclassifiable kernel per step
  const std::map<std::string, double> factor = {{"gemm", 1.08}, {"allreduce", 1.25}, {"softmax", 0.90},
                                                {"norm", 1.10}, {"elementwise", 1.15}, {"optimizer", 0.80}};
  for (const auto& k : c.kinds) {
    auto f = factor.find(k.kind);
    if (f == factor.end()) continue;
    INFO(k.kind);
    CHECK(k.error_pct() == Approx((1 / f->second - 1) * 100).margin(3.0));
    CHECK(k.measured_count == Approx(k.predicted_count));
  }
  CHECK(c.measured_step > c.predicted_step);
  CHECK(c.step_error_pct() < 0);
}

TEST_CASE("seer compare explains unusable input") {
  json predicted = load("astral/seer/predicted-gpt-small.json");
  CHECK_THROWS_WITH(compare_timelines(predicted, json::object()), Catch::Contains("measured trace"));
  json no_kernels = {{"traceEvents", json::array({{{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mm"}}})}};
  CHECK_THROWS_WITH(compare_timelines(predicted, no_kernels), Catch::Contains("no GPU kernel"));
  json bare = {{"traceEvents", json::array()}};
  CHECK_THROWS_WITH(compare_timelines(bare, load("astral/seer/kineto-gpt-small-rank0.json")),
                    Catch::Contains("otherData.seer"));
}
