// Event simulation of 1F1B and interleaved 1F1B pipeline schedules (Narayanan et al., SC'21;
// task order as in Megatron-LM's schedules.py).
#include "astral/seer/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace astral::seer {

int warmup_tasks(int stages, int chunks, int microbatches, int stage) {
  const int total = microbatches * chunks;
  if (chunks == 1) return std::min(stages - stage - 1, microbatches);
  if (microbatches == stages) return total;  // Megatron runs all forwards first in this case
  return std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
}

std::vector<ScheduledTask> stage_order(int stages, int chunks, int microbatches, int stage) {
  const int total = microbatches * chunks;
  const int group = stages * chunks;
  auto forward_id = [&](int k) {
    if (chunks == 1) return ScheduledTask{false, 0, k};
    int in_group = k % group;
    return ScheduledTask{false, in_group / stages, (k / group) * stages + in_group % stages};
  };
  auto backward_id = [&](int k) {
    if (chunks == 1) return ScheduledTask{true, 0, k};
    int in_group = k % group;
    return ScheduledTask{true, chunks - 1 - in_group / stages, (k / group) * stages + in_group % stages};
  };
  std::vector<ScheduledTask> order;
  order.reserve(2 * total);
  const int warmup = warmup_tasks(stages, chunks, microbatches, stage);
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back(forward_id(f));
  while (f < total) {
    order.push_back(forward_id(f++));
    order.push_back(backward_id(b++));
  }
  while (b < total) order.push_back(backward_id(b++));
  return order;
}

PipelineRun simulate_pipeline(const PipelineSpec& spec, std::vector<PipelineTask>* tasks) {
  const int S = spec.stages, V = spec.chunks, M = spec.microbatches;
  if (S < 1 || V < 1 || M < 1) throw std::invalid_argument("pipeline: stages, chunks, microbatches must be >= 1");
  if (spec.forward.size() != size_t(S * V) || spec.backward.size() != size_t(S * V))
    throw std::invalid_argument("pipeline: forward/backward need stages x chunks durations");
  std::vector<std::vector<ScheduledTask>> orders(S);
  for (int s = 0; s < S; ++s) orders[s] = stage_order(S, V, M, s);

  auto idx = [&](int s, int c, int mb) { return (size_t(s) * V + c) * M + mb; };
  std::vector<double> fend(size_t(S) * V * M, -1.0), bend(size_t(S) * V * M, -1.0);
  PipelineRun run;
  run.stage_end.assign(S, 0.0);
  run.stage_p2p.assign(S, 0.0);
  run.last_backward_start.assign(S * V, 0.0);
  run.last_backward_end.assign(S * V, 0.0);
  run.first_forward_start.assign(S * V, -1.0);
  std::vector<size_t> next(S, 0);
  std::vector<double> free_at(S, 0.0);
  const double p2p = spec.p2p;
  size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  if (tasks) tasks->reserve(tasks->size() + remaining);

  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < S; ++s) {
      while (next[s] < orders[s].size()) {
        const ScheduledTask& t = orders[s][next[s]];
        double ready;
        bool sends;  // whether this task's output goes to another stage
        if (!t.backward) {
          if (s > 0) ready = fend[idx(s - 1, t.chunk, t.microbatch)];
          else if (t.chunk > 0) ready = fend[idx(S - 1, t.chunk - 1, t.microbatch)];
          else ready = 0.0;
          if (ready < 0) break;
          if (s > 0 || t.chunk > 0) ready += p2p;
          sends = !(s == S - 1 && t.chunk == V - 1);
        } else {
          if (s < S - 1) ready = bend[idx(s + 1, t.chunk, t.microbatch)];
          else if (t.chunk < V - 1) ready = bend[idx(0, t.chunk + 1, t.microbatch)];
          else ready = fend[idx(s, t.chunk, t.microbatch)];
          if (ready < 0) break;
          if (s < S - 1 || t.chunk < V - 1) ready += p2p;
          sends = !(s == 0 && t.chunk == 0);
        }
        const size_t w = size_t(s) * V + t.chunk;
        const double start = std::max(free_at[s], ready);
        const double end = start + (t.backward ? spec.backward[w] : spec.forward[w]);
        (t.backward ? bend : fend)[idx(s, t.chunk, t.microbatch)] = end;
        free_at[s] = end;
        if (sends && spec.blocking_p2p && S > 1) {
          free_at[s] += p2p;
          run.stage_p2p[s] += p2p;
        }
        if (t.backward) {
          run.last_backward_start[w] = start;
          run.last_backward_end[w] = end;
        } else if (run.first_forward_start[w] < 0) {
          run.first_forward_start[w] = start;
        }
        if (tasks) tasks->push_back({s, t.chunk, t.microbatch, t.backward, start, end});
        run.stage_end[s] = end;
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) throw std::logic_error("pipeline: schedule deadlocked (inconsistent order)");
  }
  run.makespan = *std::max_element(run.stage_end.begin(), run.stage_end.end());
  return run;
}

PipelineRun simulate_pipeline_fast(const PipelineSpec& spec) {
  // The steady state of 1F1B repeats every `stages` micro-batches (every group of the interleaved
  // order); two prefixes one period apart give the slope of every per-stage time.
  const int S = spec.stages;
  const int period = S;
  const int prefix = ((std::max(3 * S, 2 * S * spec.chunks) + period - 1) / period) * period;
  if (spec.microbatches <= prefix + period) return simulate_pipeline(spec);
  PipelineSpec a = spec, b = spec;
  a.microbatches = prefix;
  b.microbatches = prefix + period;
  PipelineRun ra = simulate_pipeline(a), rb = simulate_pipeline(b);
  const double periods = double(spec.microbatches - b.microbatches) / period;
  auto extrapolate = [&](std::vector<double>& out, const std::vector<double>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = y[i] + (y[i] - x[i]) * periods;
  };
  PipelineRun r = rb;
  extrapolate(r.stage_end, ra.stage_end, rb.stage_end);
  extrapolate(r.stage_p2p, ra.stage_p2p, rb.stage_p2p);
  extrapolate(r.last_backward_start, ra.last_backward_start, rb.last_backward_start);
  extrapolate(r.last_backward_end, ra.last_backward_end, rb.last_backward_end);
  r.makespan = *std::max_element(r.stage_end.begin(), r.stage_end.end());
  return r;
}

}  // namespace astral::seer
