// Event simulation of 1F1B and interleaved 1F1B pipeline schedules (Narayanan et al., SC'21;
// task order as in Megatron-LM's schedules.py).
#include "astral/seer/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
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
// reused for every layout of a search that shares the shape. Tasks are 12 bytes so the
// simulation streams through them.
struct CompiledTask {
  std::int32_t self;        // index of this task's end time: forward (s, c, mb), then backward
  std::int32_t dependency;  // index of the end time it waits for, -1 for none
  std::uint16_t duration;   // index into the per-work durations: 2 * (stage * chunks + chunk) + backward
  std::uint8_t receives;    // its input crosses a stage boundary
  std::uint8_t sends;       // its output crosses a stage boundary
};
static_assert(sizeof(CompiledTask) == 12);

struct CompiledSchedule {
  int stages = 0, chunks = 0, microbatches = 0;
  std::vector<CompiledTask> tasks;  // stage by stage, in each stage's order
  std::vector<int> stage_begin;     // index into tasks, size stages + 1
  std::vector<int> sends;           // transfers each stage sends
};

CompiledSchedule compile(int S, int V, int M) {
  if (2L * S * V > 65535) throw std::invalid_argument("pipeline: too many stages x chunks");
  CompiledSchedule c;
  c.stages = S, c.chunks = V, c.microbatches = M;
  auto fwd = [&](int s, int ch, int mb) { return std::int32_t((size_t(s) * V + ch) * M + mb); };
  const std::int32_t backward_base = S * V * M;
  auto bwd = [&](int s, int ch, int mb) { return backward_base + fwd(s, ch, mb); };
  c.stage_begin.push_back(0);
  c.sends.assign(S, 0);
  for (int s = 0; s < S; ++s) {
    for (const ScheduledTask& t : stage_order(S, V, M, s)) {
      CompiledTask ct{};
      ct.duration = std::uint16_t(2 * (s * V + t.chunk) + (t.backward ? 1 : 0));
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
      c.sends[s] += (ct.sends && S > 1) ? 1 : 0;
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

  thread_local std::vector<double> end_storage, duration_storage;
  thread_local std::vector<int> waiter_storage;
  end_storage.assign(size_t(2) * S * V * M, -1.0);
  waiter_storage.assign(end_storage.size(), -1);
  duration_storage.resize(size_t(2) * S * V);
  for (int w = 0; w < S * V; ++w) {
    duration_storage[2 * w] = spec.forward[w];
    duration_storage[2 * w + 1] = spec.backward[w];
  }
  double* const end = end_storage.data();  // plain pointers: no TLS lookup inside the loop
  int* const waiter = waiter_storage.data();
  const double* const duration = duration_storage.data();
  const CompiledTask* const task = cs.tasks.data();
  const double p2p = S > 1 ? spec.p2p : 0.0;
  const double receive_delay[2] = {0.0, p2p};
  const double send_block[2] = {0.0, spec.blocking_p2p ? p2p : 0.0};

  // Each stage runs until its next task waits for a task of another stage; it then registers as
  // that task's waiter and is woken when it completes. Every task is visited once.
  std::vector<int> next(cs.stage_begin.begin(), cs.stage_begin.end() - 1);
  std::vector<double> free_at(S, 0.0);
  std::vector<int> ready_stages;
  ready_stages.reserve(S);
  for (int s = S - 1; s >= 0; --s) ready_stages.push_back(s);
  size_t done = 0;
  while (!ready_stages.empty()) {
    const int s = ready_stages.back();
    ready_stages.pop_back();
    int i = next[s];
    const int stop = cs.stage_begin[s + 1];
    double free = free_at[s];
    for (; i < stop; ++i) {
      const CompiledTask& t = task[i];
      double ready = 0.0;
      if (t.dependency >= 0) {
        ready = end[t.dependency];
        if (ready < 0) {
          waiter[t.dependency] = s;
          break;
        }
        ready += receive_delay[t.receives];
      }
      const double finish = std::max(free, ready) + duration[t.duration];
      end[t.self] = finish;
      if (waiter[t.self] >= 0) ready_stages.push_back(waiter[t.self]);
      free = finish + send_block[t.sends];
    }
    done += size_t(i - next[s]);
    next[s] = i;
    free_at[s] = free;
  }
  if (done != cs.tasks.size()) throw std::logic_error("pipeline: schedule deadlocked (inconsistent order)");

  // Bookkeeping from the end times: the last backward of a chunk is its last micro-batch, the
  // first forward its first one (both orders run micro-batches in sequence per chunk).
  PipelineRun run;
  run.stage_end.resize(S);
  run.stage_p2p.resize(S);
  run.last_backward_start.resize(S * V);
  run.last_backward_end.resize(S * V);
  run.first_forward_start.resize(S * V);
  const size_t backward_base = size_t(S) * V * M;
  for (int s = 0; s < S; ++s) {
    const CompiledTask& last = task[cs.stage_begin[s + 1] - 1];
    run.stage_end[s] = end[last.self];
    run.stage_p2p[s] = cs.sends[s] * send_block[1];
    for (int c = 0; c < V; ++c) {
      const int w = s * V + c;
      const size_t f0 = size_t(w) * M, bl = backward_base + size_t(w) * M + (M - 1);
      run.first_forward_start[w] = end[f0] - spec.forward[w];
      run.last_backward_end[w] = end[bl];
      run.last_backward_start[w] = end[bl] - spec.backward[w];
    }
  }
  run.makespan = *std::max_element(run.stage_end.begin(), run.stage_end.end());
  if (tasks) {
    tasks->reserve(tasks->size() + cs.tasks.size());
    for (int s = 0; s < S; ++s)
      for (int i = cs.stage_begin[s]; i < cs.stage_begin[s + 1]; ++i) {
        const CompiledTask& t = task[i];
        const bool backward = size_t(t.self) >= backward_base;
        const size_t local = backward ? t.self - backward_base : t.self;
        const int mb = int(local % M), c = int((local / M) % V);
        const double finish = end[t.self];
        tasks->push_back({s, c, mb, backward, finish - duration[t.duration], finish});
      }
  }
  return run;
}

PipelineRun simulate_pipeline_fast(const PipelineSpec& spec) {
  // The steady state of 1F1B repeats every `stages` micro-batches (every group of the interleaved
  // order). Three prefixes one period apart give the per-period growth of every per-stage time;
  // when the last two periods agree the schedule is periodic and extrapolates exactly, otherwise
  // (a long transient) the whole schedule is simulated.
  const int S = spec.stages;
  const int period = S;
  const int prefix = ((std::max(3 * S, 2 * S * spec.chunks) + period - 1) / period) * period;
  if (spec.microbatches <= prefix + 3 * period) return simulate_pipeline(spec);
  PipelineSpec x = spec;
  x.microbatches = prefix;
  PipelineRun ra = simulate_pipeline(x);
  x.microbatches = prefix + period;
  PipelineRun rb = simulate_pipeline(x);
  x.microbatches = prefix + 2 * period;
  PipelineRun rc = simulate_pipeline(x);
  // Extrapolate only a saturated steady state: the growth per period equals the work of the
  // busiest stage (compute plus blocking sends), which no later period can undercut or exceed.
  // Anything else (a pipeline bound by transfer latency, a long transient) is simulated in full.
  double busiest = 0;
  for (int s = 0; s < S; ++s) {
    double work = 0;
    for (int c = 0; c < spec.chunks; ++c) {
      work += spec.forward[s * spec.chunks + c] + spec.backward[s * spec.chunks + c];
      if (spec.blocking_p2p && S > 1) {
        work += (s == S - 1 && c == spec.chunks - 1) ? 0 : spec.p2p;  // forward output sent on
        work += (s == 0 && c == 0) ? 0 : spec.p2p;                      // gradient sent back
      }
    }
    busiest = std::max(busiest, work * period);
  }
  const double growth = rc.makespan - rb.makespan;
  if (std::fabs(growth - busiest) > 1e-9 * busiest || std::fabs((rb.makespan - ra.makespan) - busiest) > 1e-9 * busiest)
    return simulate_pipeline(spec);
  const double periods = double(spec.microbatches - x.microbatches) / period;
  auto extrapolate = [&](std::vector<double>& out, const std::vector<double>& a, const std::vector<double>& b) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = b[i] + (b[i] - a[i]) * periods;
  };
  PipelineRun r = rc;
  extrapolate(r.stage_end, rb.stage_end, rc.stage_end);
  extrapolate(r.stage_p2p, rb.stage_p2p, rc.stage_p2p);
  extrapolate(r.last_backward_start, rb.last_backward_start, rc.last_backward_start);
  extrapolate(r.last_backward_end, rb.last_backward_end, rc.last_backward_end);
  r.makespan = *std::max_element(r.stage_end.begin(), r.stage_end.end());
  return r;
}

}  // namespace astral::seer
