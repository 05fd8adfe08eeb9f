// Seer inputs: JSON forms, errors that name the field, consistency checks, bundled examples.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/spec.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {

// The error message of a SpecError thrown by f, or "" when none is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

json gpt_json() {
  return {{"name", "t"}, {"layers", 48}, {"hidden", 6144}, {"heads", 64}, {"vocab", 51200}, {"seq_len", 2048}};
}

}  // namespace

TEST_CASE("seer model JSON fills defaults and counts GPT-3 175B parameters") {
  ModelSpec m = load_model("gpt3-175b");
  CHECK(m.layers == 96);
  CHECK(m.kv_heads == 96);
  CHECK(m.head_dim == 128);
  CHECK(m.ffn == 4 * 12288);
  // 12 l h^2 + V h, plus norm weights: the published 175B.
  CHECK(m.total_params() == Approx(174.6e9).epsilon(0.01));
  ModelSpec llama = load_model("llama3-70b");
  CHECK(llama.kv_heads == 8);
  CHECK(llama.total_params() == Approx(70.6e9).epsilon(0.01));
  ModelSpec mix = load_model("mixtral-8x7b");
  CHECK(mix.is_moe());
  CHECK(mix.total_params() == Approx(46.7e9).epsilon(0.01));
  CHECK(mix.active_params() == Approx(12.9e9).epsilon(0.01));
}

TEST_CASE("seer model JSON errors name the field") {
  json j = gpt_json();
  j.erase("hidden");
  CHECK(error_of([&] { model_from_json(j); }).find("model.hidden") != std::string::npos);
  j = gpt_json();
  j["heads"] = "many";
  CHECK(error_of([&] { model_from_json(j); }).find("model.heads") != std::string::npos);
  j = gpt_json();
  j["layers"] = -4;
  CHECK(error_of([&] { model_from_json(j); }).find("model.layers") != std::string::npos);
  j = gpt_json();
  j["heads"] = 7;  // does not divide 6144
  CHECK(error_of([&] { model_from_json(j); }).find("model.heads") != std::string::npos);
  j = gpt_json();
  j["kv_heads"] = 5;
  CHECK(error_of([&] { model_from_json(j); }).find("model.kv_heads") != std::string::npos);
  j = gpt_json();
  j["moe"] = {{"experts", 2}, {"top_k", 4}};
  CHECK(error_of([&] { model_from_json(j); }).find("model.moe.top_k") != std::string::npos);
  CHECK(error_of([&] { model_from_json(json::array()); }).find("model") != std::string::npos);
}

TEST_CASE("seer config consistency checks name the offending field") {
  ModelSpec m = model_from_json(gpt_json());
  auto check = [&](TrainConfig c, int gpus, const char* field) {
    INFO(field);
    CHECK(error_of([&] { validate(m, c, gpus); }).find(field) != std::string::npos);
  };
  TrainConfig c;
  c.global_batch = 64;
  c.tp = 3;  // 64 heads
  check(c, 24, "config.tp");
  c.tp = 8;
  c.pp = 5;  // 48 layers
  check(c, 40, "config.pp");
  c.pp = 4;
  check(c, 33, "config.tp x config.pp");
  c.global_batch = 65;
  check(c, 64, "config.global_batch");
  c.global_batch = 64;
  c.vp = 3;
  c.pp = 2;  // 48 % 6 == 0 but 64 / 4 = 16 micro-batches per pipeline is fine; now make it odd
  c.global_batch = 12;
  check(c, 64, "config.global_batch");
  TrainConfig sp;
  sp.global_batch = 8;
  sp.sequence_parallel = true;
  check(sp, 8, "config.sequence_parallel");
  TrainConfig ep;
  ep.global_batch = 8;
  ep.ep = 2;
  check(ep, 8, "config.ep");
  TrainConfig ok;
  ok.global_batch = 64;
  ok.tp = 8;
  ok.pp = 4;
  CHECK_NOTHROW(validate(m, ok, 64));
  CHECK(ok.dp == 2);
}

TEST_CASE("seer hardware JSON parses units and rejects nonsense") {
  HardwareSpec h = load_hardware("a100-80gb");
  CHECK(h.peak(DType::kBf16) == Approx(312e12));
  CHECK(h.hbm_bandwidth == Approx(2039e9));
  CHECK(h.nvlink_bandwidth == Approx(300e9));
  CHECK(h.nic_bandwidth == Approx(25e9));
  CHECK(h.eff.gemm == Approx(0.76));
  json j = to_json(h);
  HardwareSpec back = hardware_from_json(j);
  CHECK(back.hbm_capacity == Approx(h.hbm_capacity));
  CHECK(back.eff.tp_overlap == Approx(h.eff.tp_overlap));
  j["efficiency"]["gemm"] = 1.5;
  CHECK(error_of([&] { hardware_from_json(j); }).find("hardware.efficiency.gemm") != std::string::npos);
  j = to_json(h);
  j["peak_tflops"].erase("bf16");
  CHECK(error_of([&] { hardware_from_json(j); }).find("hardware.peak_tflops.bf16") != std::string::npos);
  for (const char* name : {"h100-sxm", "h200-sxm"}) {
    HardwareSpec hh = load_hardware(name);
    CHECK(hh.peak(DType::kBf16) == Approx(989.4e12));
    CHECK(hh.nvls);
  }
  CHECK(load_hardware("h200-sxm").hbm_capacity > load_hardware("h100-sxm").hbm_capacity);
}

TEST_CASE("seer bundled inputs are listed and unknown names are explained") {
  auto models = bundled_names("models");
  CHECK(std::find(models.begin(), models.end(), "gpt3-175b") != models.end());
  CHECK(bundled_names("hardware").size() == 3);
  std::string e = error_of([] { load_model("no-such-model"); });
  CHECK(e.find("no-such-model") != std::string::npos);
  CHECK(e.find("gpt3-175b") != std::string::npos);  // lists what exists
  TrainConfig c = load_config("korthikanti-175b-selective");
  CHECK(c.vp == 3);
  CHECK(c.sequence_parallel);
  CHECK(c.recompute == Recompute::kSelective);
  CHECK_FALSE(c.flash_attention);
}
