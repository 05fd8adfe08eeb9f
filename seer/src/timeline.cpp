// Timeline events for one step and their Chrome trace JSON form.
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "timeline_builder.hpp"

namespace astral::seer {
namespace detail {
namespace {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kRecompute: return "recompute";
  }
  return "";
}

}  // namespace

TimelineBuilder::TimelineBuilder(const Workload& work, const PipelineSpec& spec, std::vector<TimelineEvent>& out,
                                 bool layers_only)
    : work_(work), spec_(spec), out_(out), layers_only_(layers_only) {}

int TimelineBuilder::rank_of(int stage) const { return stage * work_.config().tp * work_.config().dp; }

void TimelineBuilder::emit(std::string name, const char* kind, const char* lane, const PipelineTask* t, int stage,
                           int layer, const char* phase, double start, double duration) {
  TimelineEvent e;
  e.name = std::move(name);
  e.kind = kind;
  e.lane = lane;
  e.stage = stage;
  e.rank = rank_of(stage);
  e.microbatch = t ? t->microbatch : -1;
  e.chunk = t ? t->chunk : -1;
  e.layer = layer;
  e.phase = phase;
  e.start = start;
  e.duration = duration;
  out_.push_back(std::move(e));
}

void TimelineBuilder::ops(const std::vector<Op>& ops, const PipelineTask& t, int layer, double& cursor) {
  if (layers_only_ && layer >= 0 && layer < work_.model().layers) {
    // One event per layer and phase; collectives still on their lanes.
    const double begin = cursor;
    double recompute_end = cursor;
    for (const auto& op : ops) {
      if (op.is_comm())
        emit(op.name, to_string(op.collective), to_string(op.dim), &t, t.stage, layer, phase_name(op.phase), cursor,
             op.seconds);
      cursor += op.is_comm() ? op.exposed() : op.seconds;
      if (op.phase == Phase::kRecompute) recompute_end = cursor;
    }
    if (recompute_end > begin)
      emit("layer " + std::to_string(layer) + " recompute", "layer", "compute", &t, t.stage, layer, "recompute", begin,
           recompute_end - begin);
    emit("layer " + std::to_string(layer), "layer", "compute", &t, t.stage, layer, t.backward ? "backward" : "forward",
         recompute_end, cursor - recompute_end);
    return;
  }
  for (const auto& op : ops) {
    if (op.is_comm()) {
      // The collective runs for its full time on its own lane; the compute lane waits only for
      // the exposed share.
      emit(op.name, to_string(op.collective), to_string(op.dim), &t, t.stage, layer, phase_name(op.phase), cursor,
           op.seconds);
      cursor += op.exposed();
    } else {
      emit(op.name, to_string(op.kind), "compute", &t, t.stage, layer, phase_name(op.phase), cursor, op.seconds);
      cursor += op.seconds;
    }
  }
}

void TimelineBuilder::task(const PipelineTask& t) {
  const int S = spec_.stages, V = spec_.chunks, L = work_.layers_in_chunk(t.stage, t.chunk);
  const bool first = t.stage == 0 && t.chunk == 0;
  const bool last = t.stage == S - 1 && t.chunk == V - 1;
  const int first_layer = work_.first_layer(t.stage, t.chunk);
  const auto& model = work_.model();
  auto layer_work = [&](int l) -> const BlockWork& {
    return model.layer_is_moe(l) ? work_.moe_layer() : work_.dense_layer();
  };
  double cursor = t.start;
  if (!t.backward) {
    if (first) ops(work_.embedding().forward, t, -1, cursor);
    for (int i = 0; i < L; ++i) ops(layer_work(first_layer + i).forward, t, first_layer + i, cursor);
    if (last) ops(work_.output().forward, t, model.layers, cursor);
  } else {
    if (last) ops(work_.output().backward, t, model.layers, cursor);
    for (int i = L - 1; i >= 0; --i) ops(layer_work(first_layer + i).backward, t, first_layer + i, cursor);
    if (first) ops(work_.embedding().backward, t, -1, cursor);
  }
  const bool sends = t.backward ? !first : !last;
  if (sends && S > 1)
    emit(t.backward ? "send_grad" : "send_activation", "sendrecv", "pp", &t, t.stage, -1,
         t.backward ? "backward" : "forward", t.end, spec_.p2p);
}

void TimelineBuilder::step_end(int stage, double end, double grad, double grad_exposed, double gather,
                               double optimizer) {
  // The reduction's exposed tail ends where the optimizer starts; an overlapped reduction began
  // during the last backward tasks.
  const double opt_start = end + grad_exposed;
  if (grad > 0) {
    const char* kind = work_.config().distributed_optimizer ? "reducescatter" : "allreduce";
    emit("dp_grad_reduce", kind, "dp", nullptr, stage, -1, "backward", std::max(0.0, opt_start - grad), grad);
  }
  emit("optimizer_step", "optimizer", "compute", nullptr, stage, -1, "optimizer", opt_start, optimizer);
  // The updated parameters are gathered after the step (or, overlapped, under the next step's
  // first forwards; shown here at the step's end either way).
  if (gather > 0)
    emit("dp_param_gather", "allgather", "dp", nullptr, stage, -1, "optimizer", opt_start + optimizer, gather);
}

}  // namespace detail

namespace {
// Nanosecond resolution is plenty and keeps the JSON short (shortest round-trip printing).
double microseconds(double seconds) { return std::round(seconds * 1e9) / 1e3; }
}  // namespace

nlohmann::json chrome_trace(const std::vector<TimelineEvent>& events, const nlohmann::json& metadata) {
  static const std::map<std::string, int> lane_ids = {{"compute", 1}, {"tp", 2}, {"ep", 3}, {"pp", 4}, {"dp", 5}};
  nlohmann::json trace = nlohmann::json::array();
  std::map<int, int> ranks;  // rank -> stage
  for (const auto& e : events) {
    ranks.emplace(e.rank, e.stage);
    auto lane = lane_ids.find(e.lane);
    nlohmann::json args = {{"kind", e.kind}, {"phase", e.phase}, {"stage", e.stage}};
    if (e.microbatch >= 0) args["microbatch"] = e.microbatch;
    if (e.chunk >= 0) args["chunk"] = e.chunk;
    if (e.layer >= 0) args["layer"] = e.layer;
    if (std::string(e.lane) != "compute") args["dim"] = e.lane;
    trace.push_back({{"name", e.name},
                     {"cat", e.kind},
                     {"ph", "X"},
                     {"ts", microseconds(e.start)},
                     {"dur", microseconds(e.duration)},
                     {"pid", e.rank},
                     {"tid", lane == lane_ids.end() ? 9 : lane->second},
                     {"args", std::move(args)}});
  }
  for (const auto& [rank, stage] : ranks) {
    trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                     {"args", {{"name", "rank " + std::to_string(rank) + " (stage " + std::to_string(stage) + ")"}}}});
    for (const auto& [lane, id] : lane_ids)
      trace.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", id},
                       {"args", {{"name", lane == "compute" ? std::string("compute") : lane + " comm"}}}});
  }
  return {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}, {"otherData", metadata}};
}

}  // namespace astral::seer
