// Layout search: enumeration, memory pruning, ranking, exact re-check of the finalists.
#include <catch2/catch.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/search.hpp"

using namespace astral::seer;

TEST_CASE("seer search ranks fitting layouts by predicted step time") {
  ModelSpec m = load_model("korthikanti-22b");
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 64);
  SearchOptions o;
  o.global_batch = 128;
  o.top_k = 5;
  size_t calls = 0;
  o.progress = [&](size_t done, size_t total) {
    ++calls;
    CHECK(done <= total);
  };
  SearchResult r = search(m, hw, net, 64, o);
  CHECK(calls >= 2);
  CHECK(r.enumerated == enumerate_layouts(m, net, 64, o).size());
  CHECK(r.enumerated == r.invalid + r.out_of_memory + r.bounded + r.evaluated);
  CHECK(r.bounded > 0);  // most layouts lose to the best ones on a lower bound alone
  REQUIRE(r.top.size() == 5);
  for (size_t i = 0; i < r.top.size(); ++i) {
    const auto& c = r.top[i];
    CHECK(c.prediction.memory.fits());
    CHECK(c.config.tp * c.config.pp * c.config.dp == 64);
    CHECK(c.config.global_batch == 128);
    if (i > 0) CHECK(r.top[i - 1].prediction.step_time <= c.prediction.step_time);
    // The finalists carry the exact prediction.
    CHECK(c.prediction.step_time == Approx(predict(m, hw, net, c.config, 64).step_time));
  }
  // Nothing in the search space beats the winner: spot-check every valid layout.
  for (TrainConfig c : enumerate_layouts(m, net, 64, o)) {
    if (!validation_error(m, c, 64).empty()) continue;
    Prediction p = predict(m, hw, net, c, 64);
    if (p.memory.fits()) CHECK(p.step_time >= r.top[0].prediction.step_time * (1 - 1e-9));
  }
}

TEST_CASE("seer search reports when nothing fits") {
  ModelSpec m = load_model("megatron-1t");
  HardwareSpec hw = load_hardware("a100-80gb");
  SearchOptions o;
  o.global_batch = 8;
  SearchResult r = search(m, hw, uniform_network(hw, 8), 8, o);
  CHECK(r.top.empty());
  CHECK(r.evaluated == 0);
  CHECK(r.out_of_memory > 0);
  CHECK(r.closest_oom.total() > r.closest_oom.capacity);
}

TEST_CASE("seer search respects the given dimensions and skips redundant recompute modes") {
  ModelSpec m = load_model("gpt3-175b");
  HardwareSpec hw = load_hardware("h100-sxm");
  Network net = load_network("astral-same-rail-12k", hw);
  SearchOptions o;
  o.global_batch = 1536;
  o.tp = {8};
  o.pp = {8, 16};
  auto layouts = enumerate_layouts(m, net, 12288, o);
  REQUIRE_FALSE(layouts.empty());
  for (const auto& c : layouts) {
    CHECK(c.tp == 8);
    CHECK((c.pp == 8 || c.pp == 16));
    CHECK(c.recompute != Recompute::kSelective);  // flash attention: same as none
  }
  SearchResult r = search(m, hw, net, 12288, o);
  REQUIRE_FALSE(r.top.empty());
  CHECK(r.top[0].prediction.step_time > 0);
  CHECK(default_global_batch(m) == 2048);
}
