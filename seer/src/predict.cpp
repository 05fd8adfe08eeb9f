// One training step: blocks -> pipeline schedule -> data-parallel reduction and optimizer.
#include "astral/seer/predict.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "timeline_builder.hpp"

namespace astral::seer {

double expected_max_of_normals(int n) {
  if (n <= 1) return 0;
  if (n == 2) return 1.0 / std::sqrt(M_PI);
  // Blom: the (n - 3/8) / (n + 1/4) quantile; the quantile by Newton on the normal CDF.
  const double p = (n - 0.375) / (n + 0.25);
  double x = std::sqrt(2.0 * std::log(double(n)));
  for (int i = 0; i < 50; ++i) {
    double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    double step = (cdf - p) / pdf;
    x -= step;
    if (std::fabs(step) < 1e-12) break;
  }
  return x;
}

namespace {

// Critical-path parts of a list of operators.
struct Parts {
  double compute = 0, tp = 0, ep = 0, cp = 0;
  void add(const std::vector<Op>& ops, double times) {
    for (const auto& op : ops) {
      if (!op.is_comm()) compute += op.seconds * times;
      else if (op.dim == CommDim::kEp) ep += op.exposed() * times;
      else if (op.dim == CommDim::kCp) cp += op.exposed() * times;
      else tp += op.exposed() * times;
    }
  }
  double total() const { return compute + tp + ep + cp; }
};

// The chunks of `stage` sorted by a per-(stage, chunk) time.
std::vector<int> chunks_by(const std::vector<double>& time, int stage, int chunks) {
  std::vector<int> order(chunks);
  for (int c = 0; c < chunks; ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return time[size_t(stage) * chunks + a] < time[size_t(stage) * chunks + b];
  });
  return order;
}

// Per-layer DP buckets reduced on a side stream while the last backward of each chunk runs.
double overlapped_grad_tail(const PipelineRun& run, int stage, int chunks, int layers, double grad_total,
                            double stage_end) {
  auto w = [&](int c) { return size_t(stage) * chunks + c; };
  const std::vector<int> order = chunks_by(run.last_backward_end, stage, chunks);
  const double bucket = grad_total / chunks / std::max(layers, 1);
  double t = 0;
  for (int c : order) {
    double bs = run.last_backward_start[w(c)], be = run.last_backward_end[w(c)];
    for (int j = 0; j < layers; ++j) t = std::max(t, bs + (be - bs) * (j + 1) / layers) + bucket;
  }
  return std::max(0.0, t - stage_end);
}

// Parameter all-gather for the next step on a side stream, each layer needed by its first forward.
double overlapped_gather_delay(const PipelineRun& run, const PipelineSpec& spec, int stage, int layers,
                               double gather_total) {
  const int chunks = spec.chunks;
  auto w = [&](int c) { return size_t(stage) * chunks + c; };
  const std::vector<int> order = chunks_by(run.first_forward_start, stage, chunks);
  const double bucket = gather_total / chunks / std::max(layers, 1);
  double t = 0, delay = 0;
  for (int c : order) {
    double fs = run.first_forward_start[w(c)], fd = spec.forward[w(c)];
    for (int j = 0; j < layers; ++j) {
      t += bucket;
      delay = std::max(delay, t - (fs + fd * j / layers));
    }
  }
  return delay;
}

}  // namespace

double model_flops_per_step(const ModelSpec& m, int global_batch) {
  const double s = m.seq_len, h = m.hidden, d = m.head_dim;
  const double up = m.activation == Activation::kSwiglu ? 2.0 : 1.0;
  const double attn = 2 * s * h * d * (2.0 * m.heads + 2.0 * m.kv_heads) + 4 * s * s * m.heads * d;
  const double dense_mlp = 2 * s * h * m.ffn * (up + 1);
  const double moe_mlp = 2 * s * h * m.expert_ffn * (up + 1) * m.top_k + 2 * s * h * m.experts;
  const int moe = m.moe_layers();
  const double per_seq = m.layers * attn + (m.layers - moe) * dense_mlp + moe * moe_mlp + 2 * s * h * m.vocab;
  return 3.0 * per_seq * global_batch;
}

double hardware_flops_per_step(const ModelSpec& m, const TrainConfig& c) {
  double f = model_flops_per_step(m, c.global_batch);
  if (c.recompute == Recompute::kFull) {
    // One more forward pass of every layer (not of the output layer).
    double logits = 3.0 * 2 * double(m.seq_len) * m.hidden * m.vocab * c.global_batch;
    f += (f - logits) / 3.0;
  } else if (c.recompute == Recompute::kSelective && !c.flash_attention) {
    f += 4.0 * double(m.seq_len) * m.seq_len * m.heads * m.head_dim * m.layers * c.global_batch;
  }
  return f;
}

Prediction predict(const ModelSpec& model, const HardwareSpec& hw, const Network& net, TrainConfig config,
                   int gpus, const PredictOptions& options) {
  validate(model, config, gpus);
  if (config.dtype == DType::kFp8 && hw.peak(DType::kFp8) <= 0)
    throw SpecError(fmt::format("config.dtype: fp8, but hardware {} has no FP8 peak (peak_tflops.fp8)", hw.name));
  const Workload work(model, hw, net, config);
  return predict(work, gpus, options);
}

Prediction predict(const Workload& work, int gpus, const PredictOptions& options) {
  const ModelSpec& model = work.model();
  const HardwareSpec& hw = work.hardware();
  const TrainConfig& config = work.config();
  const int S = config.pp, V = config.vp, M = config.microbatches();

  // Durations and parts per (stage, chunk) and micro-batch.
  PipelineSpec spec;
  spec.stages = S;
  spec.chunks = V;
  spec.microbatches = M;
  spec.p2p = work.p2p_seconds();
  spec.blocking_p2p = !config.overlap_p2p;
  spec.forward.resize(S * V);
  spec.backward.resize(S * V);
  std::vector<Parts> parts(S);
  for (int s = 0; s < S; ++s) {
    for (int c = 0; c < V; ++c) {
      Parts fwd, bwd;
      int moe = work.moe_layers_in_chunk(s, c);
      const int L = work.layers_in_chunk(s, c);
      fwd.add(work.dense_layer().forward, L - moe);
      bwd.add(work.dense_layer().backward, L - moe);
      if (moe > 0) {
        fwd.add(work.moe_layer().forward, moe);
        bwd.add(work.moe_layer().backward, moe);
      }
      if (s == 0 && c == 0) {
        fwd.add(work.embedding().forward, 1);
        bwd.add(work.embedding().backward, 1);
      }
      if (s == S - 1 && c == V - 1) {
        fwd.add(work.output().forward, 1);
        bwd.add(work.output().backward, 1);
      }
      spec.forward[s * V + c] = fwd.total();
      spec.backward[s * V + c] = bwd.total();
      parts[s].compute += (fwd.compute + bwd.compute) * M;
      parts[s].tp += (fwd.tp + bwd.tp) * M;
      parts[s].ep += (fwd.ep + bwd.ep) * M;
      parts[s].cp += (fwd.cp + bwd.cp) * M;
    }
  }
  // A lower bound no schedule can beat: the busiest stage's own work. A search that already has
  // better layouts skips the simulation of this one.
  if (options.skip_above > 0) {
    double bound = 0;
    for (int s = 0; s < S; ++s) {
      double work = 0;
      for (int c = 0; c < V; ++c) work += spec.forward[s * V + c] + spec.backward[s * V + c];
      bound = std::max(bound, work * M);
    }
    if (bound > options.skip_above) {
      Prediction skipped;
      skipped.step_time = bound;
      skipped.skipped = true;
      return skipped;
    }
  }
  std::vector<PipelineTask> tasks;
  const bool want_timeline = options.timeline != nullptr;
  PipelineRun run = (options.fast_schedule && !want_timeline) ? simulate_pipeline_fast(spec)
                                                              : simulate_pipeline(spec, want_timeline ? &tasks : nullptr);

  Prediction p;
  p.stages.resize(S);
  // Each step waits for its slowest rank: the compute of a stage stretched by the expected
  // maximum of the ranks' variation (all of them meet in the gradient reduction).
  const double straggle = hw.eff.straggler_cv * expected_max_of_normals(gpus);
  std::vector<double> grad_times(S), grad_exposed_times(S), gather_times(S), opt_times(S);
  for (int s = 0; s < S; ++s) {
    const auto params = work.stage_params(s);
    const double grad = work.grad_reduce_seconds(params);
    const double gather = work.param_gather_seconds(params);
    const int edp = config.tp * config.cp * config.dp / std::max(config.ep, 1);
    const double local = config.distributed_optimizer ? params.dense / (config.dp * config.cp) + params.expert / edp
                                                      : params.dense + params.expert;
    const double opt = work.optimizer_seconds(local);
    double grad_exposed = grad;
    if (config.overlap_grad_reduce && grad > 0) {
      double tail = overlapped_grad_tail(run, s, V, work.layers_in_chunk(s, 0), grad, run.stage_end[s]);
      grad_exposed = tail + (1.0 - hw.eff.dp_overlap) * (grad - tail);
    }
    double gather_exposed = gather;
    if (config.overlap_param_gather && gather > 0) {
      double delay = overlapped_gather_delay(run, spec, s, work.layers_in_chunk(s, 0), gather);
      gather_exposed = delay + (1.0 - hw.eff.dp_overlap) * (gather - delay);
    }
    StageTimes& st = p.stages[s];
    st.compute = parts[s].compute;
    st.tp = parts[s].tp;
    st.cp = parts[s].cp;
    st.ep = parts[s].ep;
    st.pp = run.stage_p2p[s];
    st.dp = grad_exposed + gather_exposed;
    st.optimizer = opt;
    st.end = run.stage_end[s] + st.dp + st.optimizer + hw.eff.step_overhead + straggle * st.compute;
    grad_times[s] = grad;
    grad_exposed_times[s] = grad_exposed;
    gather_times[s] = gather;
    opt_times[s] = opt;
  }
  p.critical_stage = int(std::max_element(p.stages.begin(), p.stages.end(),
                                          [](const StageTimes& a, const StageTimes& b) { return a.end < b.end; }) -
                         p.stages.begin());
  const StageTimes& cs = p.stages[p.critical_stage];
  p.step_time = cs.end;
  p.breakdown = {cs.compute, cs.tp, cs.ep, cs.pp, cs.dp, cs.optimizer, 0, hw.eff.step_overhead,
                 straggle * cs.compute, cs.cp};
  p.breakdown.bubble = std::max(0.0, p.step_time - (cs.compute + cs.tp + cs.ep + cs.cp + cs.pp + cs.dp + cs.optimizer +
                                                    hw.eff.step_overhead + p.breakdown.straggler));

  const double peak = hw.peak(config.dtype) > 0 ? hw.peak(config.dtype) : hw.peak(DType::kBf16);
  p.model_flops = model_flops_per_step(model, config.global_batch);
  p.hardware_flops = hardware_flops_per_step(model, config);
  p.mfu = p.model_flops / (p.step_time * gpus * peak);
  p.hfu = p.hardware_flops / (p.step_time * gpus * peak);
  p.tokens_per_second = double(config.global_batch) * model.seq_len / p.step_time;
  p.memory = peak_memory(work);
  const BlockWork& first_layer = model.layer_is_moe(0) ? work.moe_layer() : work.dense_layer();
  p.layer_forward = first_layer.forward_seconds();
  p.layer_backward = first_layer.backward_seconds();

  if (want_timeline) {
    detail::TimelineBuilder builder(work, spec, *options.timeline, options.timeline_layers_only);
    for (const auto& t : tasks) builder.task(t);
    for (int s = 0; s < S; ++s)
      builder.step_end(s, run.stage_end[s], grad_times[s], grad_exposed_times[s], gather_times[s], opt_times[s]);
  }
  return p;
}

nlohmann::json to_json(const Prediction& p) {
  const auto& b = p.breakdown;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages)
    stages.push_back({{"end_s", s.end}, {"compute_s", s.compute}, {"tp_s", s.tp}, {"ep_s", s.ep},
                      {"pp_s", s.pp}, {"dp_s", s.dp}, {"optimizer_s", s.optimizer}});
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return {{"step_time_s", p.step_time},
          {"mfu", p.mfu},
          {"hfu", p.hfu},
          {"tokens_per_s", p.tokens_per_second},
          {"model_flops", p.model_flops},
          {"hardware_flops", p.hardware_flops},
          {"memory_gib_per_gpu", p.memory.total() / kGiB},
          {"memory", to_json(p.memory)},
          {"breakdown",
           {{"compute_s", b.compute}, {"exposed_comm_s", {{"tp", b.tp}, {"ep", b.ep}, {"cp", b.cp}, {"pp", b.pp}, {"dp", b.dp}}},
            {"optimizer_s", b.optimizer}, {"bubble_s", b.bubble}, {"overhead_s", b.overhead},
            {"straggler_s", b.straggler}}},
          {"critical_stage", p.critical_stage},
          {"layer_forward_s", p.layer_forward},
          {"layer_backward_s", p.layer_backward},
          {"stages", stages}};
}

}  // namespace astral::seer
