// Event simulation of 1F1B and interleaved 1F1B pipeline schedules (Narayanan et al., SC'21;
// task order as in Megatron-LM's schedules.py).
#include "astral/seer/schedule.hpp"

#include <algorithm>
#include <memory>
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

namespace {

// A schedule's task graph depends only on (stages, chunks, micro-batches): compiled once and
// reused for every layout of a search that shares the shape.
struct CompiledTask {
  int self;       // index of this task's end time
  int dependency; // index of the end time it waits for, -1 for none
  int work;       // stage * chunks + chunk
  bool backward;
  bool receives;  // its input crosses a stage boundary
  bool sends;     // its output crosses a stage boundary
  int chunk;
  int microbatch;
};

struct CompiledSchedule {
  int stages = 0, chunks = 0, microbatches = 0;
  std::vector<CompiledTask> tasks;  // stage by stage, in each stage's order
  std::vector<int> stage_begin;     // index into tasks, size stages + 1
};

CompiledSchedule compile(int S, int V, int M) {
  CompiledSchedule c;
  c.stages = S, c.chunks = V, c.microbatches = M;
  auto fwd = [&](int s, int ch, int mb) { return int((size_t(s) * V + ch) * M + mb); };
  const int backward_base = S * V * M;
  auto bwd = [&](int s, int ch, int mb) { return backward_base + fwd(s, ch, mb); };
  c.stage_begin.push_back(0);
  for (int s = 0; s < S; ++s) {
    for (const ScheduledTask& t : stage_order(S, V, M, s)) {
      CompiledTask ct{};
      ct.work = s * V + t.chunk;
      ct.backward = t.backward;
      ct.chunk = t.chunk;
      ct.microbatch = t.microbatch;
      if (!t.backward) {
        ct.self = fwd(s, t.chunk, t.microbatch);
        if (s > 0) ct.dependency = fwd(s - 1, t.chunk, t.microbatch);
        else if (t.chunk > 0) ct.dependency = fwd(S - 1, t.chunk - 1, t.microbatch);
        else ct.dependency = -1;
        ct.receives = s > 0 || t.chunk > 0;
        ct.sends = !(s == S - 1 && t.chunk == V - 1);
      } else {
        ct.self = bwd(s, t.chunk, t.microbatch);
        if (s < S - 1) ct.dependency = bwd(s + 1, t.chunk, t.microbatch);
        else if (t.chunk < V - 1) ct.dependency = bwd(0, t.chunk + 1, t.microbatch);
        else ct.dependency = fwd(s, t.chunk, t.microbatch);
        ct.receives = s < S - 1 || t.chunk < V - 1;
        ct.sends = !(s == 0 && t.chunk == 0);
      }
      c.tasks.push_back(ct);
    }
    c.stage_begin.push_back(int(c.tasks.size()));
  }
  return c;
}

const CompiledSchedule& compiled(int S, int V, int M) {
  // A small per-thread cache: searches revisit the same shapes many times in a row.
  thread_local std::vector<std::unique_ptr<CompiledSchedule>> cache;
  for (const auto& c : cache)
    if (c->stages == S && c->chunks == V && c->microbatches == M) return *c;
  if (cache.size() >= 64) cache.erase(cache.begin());
  cache.push_back(std::make_unique<CompiledSchedule>(compile(S, V, M)));
  return *cache.back();
}

}  // namespace

PipelineRun simulate_pipeline(const PipelineSpec& spec, std::vector<PipelineTask>* tasks) {
  const int S = spec.stages, V = spec.chunks, M = spec.microbatches;
  if (S < 1 || V < 1 || M < 1) throw std::invalid_argument("pipeline: stages, chunks, microbatches must be >= 1");
  if (spec.forward.size() != size_t(S * V) || spec.backward.size() != size_t(S * V))
    throw std::invalid_argument("pipeline: forward/backward need stages x chunks durations");
  const CompiledSchedule& cs = compiled(S, V, M);

  thread_local std::vector<double> end_storage;
  thread_local std::vector<int> waiter_storage;
  end_storage.assign(size_t(2) * S * V * M, -1.0);
  waiter_storage.assign(end_storage.size(), -1);
  double* const end = end_storage.data();  // plain pointers: no TLS lookup inside the loop
  int* const waiter = waiter_storage.data();
  PipelineRun run;
  run.stage_end.assign(S, 0.0);
  run.stage_p2p.assign(S, 0.0);
  run.last_backward_start.assign(S * V, 0.0);
  run.last_backward_end.assign(S * V, 0.0);
  run.first_forward_start.assign(S * V, -1.0);
  std::vector<int> next(cs.stage_begin.begin(), cs.stage_begin.end() - 1);
  std::vector<double> free_at(S, 0.0);
  const double p2p = S > 1 ? spec.p2p : 0.0;
  const double send_block = spec.blocking_p2p ? p2p : 0.0;
  if (tasks) tasks->reserve(tasks->size() + cs.tasks.size());

  // Each stage runs until its next task waits for a task of another stage; it then registers as
  // that task's waiter and is woken when it completes. Every task is visited once.
  std::vector<int> ready_stages;
  ready_stages.reserve(S);
  for (int s = S - 1; s >= 0; --s) ready_stages.push_back(s);
  size_t done = 0;
  const CompiledTask* const tasks_data = cs.tasks.data();
  const double* const fwd_time = spec.forward.data();
  const double* const bwd_time = spec.backward.data();
  while (!ready_stages.empty()) {
    const int s = ready_stages.back();
    ready_stages.pop_back();
    int i = next[s];
    const int stop = cs.stage_begin[s + 1];
    double free = free_at[s];
    for (; i < stop; ++i) {
      const CompiledTask& t = tasks_data[i];
      double ready = 0.0;
      if (t.dependency >= 0) {
        ready = end[t.dependency];
        if (ready < 0) {
          waiter[t.dependency] = s;
          break;
        }
        if (t.receives) ready += p2p;
      }
      const double start = std::max(free, ready);
      const double finish = start + (t.backward ? bwd_time[t.work] : fwd_time[t.work]);
      end[t.self] = finish;
      if (waiter[t.self] >= 0) ready_stages.push_back(waiter[t.self]);
      free = finish;
      if (t.sends && send_block > 0) {
        free += send_block;
        run.stage_p2p[s] += send_block;
      }
      if (t.backward) {
        run.last_backward_start[t.work] = start;
        run.last_backward_end[t.work] = finish;
      } else if (run.first_forward_start[t.work] < 0) {
        run.first_forward_start[t.work] = start;
      }
      if (tasks) tasks->push_back({s, t.chunk, t.microbatch, t.backward, start, finish});
      run.stage_end[s] = finish;
    }
    done += size_t(i - next[s]);
    next[s] = i;
    free_at[s] = free;
  }
  if (done != cs.tasks.size()) throw std::logic_error("pipeline: schedule deadlocked (inconsistent order)");
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
