// Pipeline schedules as events: orders, closed forms on uniform stages, the extrapolated path.
#include <catch2/catch.hpp>

#include <random>

#include "astral/seer/schedule.hpp"

using namespace astral::seer;

namespace {

PipelineSpec uniform(int stages, int chunks, int micro, double f, double b) {
  PipelineSpec p;
  p.stages = stages;
  p.chunks = chunks;
  p.microbatches = micro;
  p.forward.assign(stages * chunks, f);
  p.backward.assign(stages * chunks, b);
  p.blocking_p2p = false;
  return p;
}

}  // namespace

TEST_CASE("seer stage order runs every forward and backward once, forward first") {
  for (int chunks : {1, 2, 3}) {
    const int S = 4, M = 8;
    for (int s = 0; s < S; ++s) {
      auto order = stage_order(S, chunks, M, s);
      REQUIRE(order.size() == size_t(2 * M * chunks));
      std::vector<int> seen_f(M * chunks, -1), seen_b(M * chunks, -1);
      for (size_t i = 0; i < order.size(); ++i) {
        auto& slot = order[i].backward ? seen_b : seen_f;
        int key = order[i].microbatch * chunks + order[i].chunk;
        CHECK(slot[key] == -1);
        slot[key] = int(i);
      }
      for (int k = 0; k < M * chunks; ++k) CHECK(seen_f[k] < seen_b[k]);
      // 1F1B warm-up: the first stage keeps S micro-batches in flight, the last one.
      if (chunks == 1) CHECK(warmup_tasks(S, 1, M, s) == S - s - 1);
    }
  }
  CHECK(warmup_tasks(4, 2, 8, 0) == 3 * 2 + 1 * 4);  // Megatron: (S - s - 1) * 2 + (V - 1) * S
}

TEST_CASE("seer 1F1B on uniform stages gives the textbook makespan") {
  // (m + p - 1)(f + b): the bubble is (p - 1)(f + b), simulated not assumed.
  for (int S : {1, 2, 4, 8}) {
    for (int M : {1, 4, 16}) {
      auto run = simulate_pipeline(uniform(S, 1, M, 1.0, 2.0));
      CHECK(run.makespan == Approx((M + S - 1) * 3.0));
    }
  }
}

TEST_CASE("seer interleaved 1F1B shrinks the bubble by the number of chunks") {
  // Per chunk f/V and b/V: makespan (m V + p - 1)(f + b)/V (Narayanan et al. §2.2.2).
  const int S = 4, V = 3, M = 8;
  auto run = simulate_pipeline(uniform(S, V, M, 1.0 / V, 2.0 / V));
  CHECK(run.makespan == Approx((M * V + S - 1) * 3.0 / V));
  auto plain = simulate_pipeline(uniform(S, 1, M, 1.0, 2.0));
  CHECK(run.makespan < plain.makespan);
}

TEST_CASE("seer a slow last stage and blocking transfers stretch the schedule") {
  PipelineSpec p = uniform(4, 1, 16, 1.0, 2.0);
  double base = simulate_pipeline(p).makespan;
  p.forward[3] = 1.5;  // logits on the last stage
  p.backward[3] = 3.0;
  double slow = simulate_pipeline(p).makespan;
  CHECK(slow == Approx(base + 16 * 1.5).epsilon(0.05));  // the slow stage sets the pace
  p.p2p = 0.1;
  double with_p2p = simulate_pipeline(p).makespan;
  p.blocking_p2p = true;
  auto blocking = simulate_pipeline(p);
  CHECK(with_p2p > slow);
  CHECK(blocking.makespan > with_p2p);
  CHECK(blocking.stage_p2p[0] == Approx(16 * 0.1));  // stage 0 sends one activation per micro-batch
}

TEST_CASE("seer extrapolated schedule matches the exact simulation") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  double worst = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int S = 2 + trial % 12, V = 1 + trial % 3, M = S * (10 + trial % 9);
    PipelineSpec p = uniform(S, V, M, 1.0, 2.0);
    for (auto& x : p.forward) x *= jitter(rng);
    for (auto& x : p.backward) x *= jitter(rng);
    p.forward.back() *= 1.3;
    p.p2p = 0.02;
    p.blocking_p2p = trial % 2 == 0;
    auto exact = simulate_pipeline(p);
    auto fast = simulate_pipeline_fast(p);
    worst = std::max(worst, std::fabs(fast.makespan - exact.makespan) / exact.makespan);
    for (int s = 0; s < S; ++s) CHECK(fast.stage_end[s] == Approx(exact.stage_end[s]).epsilon(1e-6));
  }
  CHECK(worst < 1e-6);
}

TEST_CASE("seer pipeline rejects malformed input") {
  PipelineSpec p = uniform(2, 1, 2, 1, 1);
  p.forward.pop_back();
  CHECK_THROWS_AS(simulate_pipeline(p), std::invalid_argument);
  p = uniform(2, 1, 2, 1, 1);
  p.microbatches = 0;
  CHECK_THROWS_AS(simulate_pipeline(p), std::invalid_argument);
}
