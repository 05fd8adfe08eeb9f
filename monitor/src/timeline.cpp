#include "astral/monitor/timeline.hpp"

#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace astral::monitor {

namespace {

int layer_tid(Layer l) {
  switch (l) {
    case Layer::bmc: return 1;
    case Layer::kernel: return 2;
    case Layer::switch_: return 3;
    case Layer::nccl: return 4;
    case Layer::pytorch: return 5;
    case Layer::astral: return 6;
    default: return 7;
  }
}

class Tracks {
 public:
  explicit Tracks(nlohmann::json& events) : events_(events) {}
  int process(const std::string& name, int sort) {
    auto [it, fresh] = pids_.emplace(name, int(pids_.size()) + 1);
    if (fresh) {
      events_.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", it->second}, {"args", {{"name", name}}}});
      events_.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", it->second}, {"args", {{"sort_index", sort}}}});
    }
    return it->second;
  }
  void thread(int pid, int tid, const std::string& name) {
    if (!named_.emplace(pid * 100000 + tid).second) return;
    events_.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }

 private:
  nlohmann::json& events_;
  std::map<std::string, int> pids_;
  std::set<int> named_;
};

double us(int64_t t) { return double(t); }

}  // namespace

nlohmann::json timeline_json(const Bundle& b, const Diagnosis* d) {
  nlohmann::json events = nlohmann::json::array();
  Tracks tracks(events);
  if (d && !d->root_causes.empty()) {
    int pid = tracks.process("diagnosis", -1);
    tracks.thread(pid, 1, "root causes");
    for (size_t i = 0; i < d->root_causes.size(); ++i) {
      const RootCause& rc = d->root_causes[i];
      if (rc.window_start_us == kUnknownTime) continue;
      int64_t end = rc.window_end_us == kUnknownTime ? rc.window_start_us : rc.window_end_us;
      events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", 1}, {"ts", us(rc.window_start_us)},
                        {"dur", double(std::max<int64_t>(end - rc.window_start_us, 1000))},
                        {"name", "#" + std::to_string(i + 1) + " " + std::string(to_string(rc.component.kind)) + " " + rc.fault},
                        {"cat", "diagnosis"},
                        {"args", {{"summary", rc.summary}, {"confidence", rc.confidence}}}});
    }
  }
  for (const Event& e : b.events) {
    if (!e.has_time() || e.severity == Severity::debug) continue;
    const bool on_switch = e.layer == Layer::switch_;
    int pid = tracks.process((on_switch ? "switch " : "host ") + e.host, on_switch ? 1 : 0);
    int tid = layer_tid(e.layer);
    std::string tname(to_string(e.layer));
    if ((e.layer == Layer::pytorch || e.layer == Layer::nccl) && e.keys.rank >= 0 && e.layer == Layer::pytorch) {
      tid = 100 + e.keys.rank;
      tname = "rank " + std::to_string(e.keys.rank);
    }
    tracks.thread(pid, tid, tname);
    nlohmann::json args = {{"message", e.message},
                           {"severity", to_string(e.severity)},
                           {"source", std::string(b.file_name(e.file)) + ":" + std::to_string(e.line)}};
    if (e.keys.seq >= 0) args["seq"] = e.keys.seq;
    if (!e.component.device.empty()) args["device"] = e.component.device;
    if (!e.component.port.empty()) args["port"] = e.component.port;
    if (e.kind == "watchdog_timeout" && e.attr_int("ran_for_ms") > 0) {
      // The stuck collective as a slice from its enqueue to the timeout.
      int64_t dur = e.attr_int("ran_for_ms") * 1000;
      events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", us(e.time_us - dur)}, {"dur", double(dur)},
                        {"name", std::string(e.attr("op_type")) + " seq " + std::to_string(e.keys.seq) + " (stuck)"},
                        {"cat", "collective"}, {"args", args}});
    }
    events.push_back({{"ph", "i"}, {"s", "t"}, {"pid", pid}, {"tid", tid}, {"ts", us(e.time_us)}, {"name", e.kind},
                      {"cat", std::string(to_string(e.layer))}, {"args", std::move(args)}});
  }
  for (const CollectiveSample& s : b.samples) {
    if (s.start_us == kUnknownTime || s.duration_us < 0 || s.host.empty()) continue;
    int pid = tracks.process("host " + s.host, 0);
    int tid = 100 + s.rank;
    tracks.thread(pid, tid, "rank " + std::to_string(s.rank));
    events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", us(s.start_us)}, {"dur", double(s.duration_us)},
                      {"name", s.op.empty() ? "collective" : s.op}, {"cat", "collective"},
                      {"args", {{"seq", s.seq}, {"source", std::string(b.file_name(s.file))}}}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "astral monitor timeline"}, {"bundle", b.root}}}};
}

void write_timeline(const Bundle& b, const Diagnosis* d, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot write the timeline");
  out << timeline_json(b, d).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace astral::monitor
