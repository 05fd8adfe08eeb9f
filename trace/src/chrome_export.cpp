// Chrome trace JSON for a set of trace files: slices, lanes, flow arrows, metadata.
#include "astral/trace/chrome_export.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include "json_text.hpp"

namespace astral::trace {
namespace {

// Tracks of one rank, in display order.
enum TrackCategory : int { kTrackRank = 0, kTrackChannel = 1, kTrackSteps = 2, kTrackKernel = 3, kTrackNet = 4 };

struct TrackKey {
  size_t file;
  int category;
  uint64_t sub;  // channel, or connection ordinal
  bool operator<(const TrackKey& o) const { return std::tie(file, category, sub) < std::tie(o.file, o.category, o.sub); }
};

struct Slice {
  TrackKey track;
  std::string track_name;
  int64_t start, end;  // cluster ns
  std::string name, cat, args;
  uint64_t flow = 0;
  bool flow_out = false;
  bool incomplete = false;
  uint32_t lane = 0;
};

struct Instant {
  TrackKey track;
  std::string track_name;
  int64_t t;
  std::string name, cat, args;
};

class Builder {
 public:
  Builder(const std::vector<TraceFile>& files, const Matching& m, const Alignment& a)
      : files_(files), matching_(m), align_(a) {}

  void build() {
    for (size_t f = 0; f < files_.size(); ++f) add_file(f);
    add_transfers();
    link_flows();
  }

  std::vector<Slice> slices;
  std::vector<Instant> instants;
  size_t flows = 0;

 private:
  int64_t g(size_t file, uint64_t mono) const { return align_.to_global(file, mono); }
  std::string rank(size_t f) const { return rank_label(files_[f]); }

  TrackKey channel_track(size_t f, int category, uint16_t ch, std::string& name) const {
    static constexpr std::array<const char*, 4> suffix{"", "", " steps", " kernel"};
    name = rank(f) + (ch == kNoChannel ? std::string(" ch ?") : " ch " + std::to_string(ch)) + suffix[category];
    return {f, category, ch};
  }

  size_t add_slice(Slice s) {
    slices.push_back(std::move(s));
    return slices.size() - 1;
  }

  void span_slice(size_t f, const Event& begin, int64_t end, bool incomplete) {
    const TraceFile& file = files_[f];
    Slice s;
    s.start = g(f, begin.time_ns);
    s.end = std::max(end, s.start);
    s.incomplete = incomplete;
    json::Object args;
    args.hex("comm", begin.comm_hash);
    if (auto* c = begin.as<Collective>()) {
      s.track = {f, kTrackRank, 0};
      s.track_name = rank(f);
      s.name = std::string(file.str(c->func));
      s.cat = "coll";
      args.unum("seq", c->seq).unum("count", c->count).str("datatype", file.str(c->datatype));
      args.str("algorithm", file.str(c->algo)).str("protocol", file.str(c->proto));
      args.num("channels", c->n_channels).num("root", c->root);
      coll_slice_[{f, c->span_id}] = slices.size();
    } else if (auto* p = begin.as<P2p>()) {
      s.track = {f, kTrackRank, 0};
      s.track_name = rank(f);
      s.name = std::string(file.str(p->func)) + " peer " + std::to_string(p->peer);
      s.cat = "p2p";
      args.unum("seq", p->seq).unum("count", p->count).str("datatype", file.str(p->datatype)).num("peer", p->peer);
      coll_slice_[{f, p->span_id}] = slices.size();
    } else if (auto* gr = begin.as<Group>()) {
      s.track = {f, kTrackRank, 0};
      s.track_name = rank(f);
      s.name = "group";
      s.cat = "group";
      args.num("depth", gr->depth);
    } else if (auto* op = begin.as<ProxyOp>()) {
      s.track = channel_track(f, kTrackChannel, begin.channel, s.track_name);
      s.name = std::string(op->is_send ? "send" : "recv") + " peer " + std::to_string(op->peer);
      s.cat = "proxy";
      args.unum("seq", op->seq).num("peer", op->peer).num("steps", op->n_steps).num("chunk_bytes", op->chunk_bytes);
      child_end_[{f, op->parent_id}] = std::max(child_end_[{f, op->parent_id}], s.end);
    } else if (auto* k = begin.as<KernelChannel>()) {
      s.track = channel_track(f, kTrackKernel, begin.channel, s.track_name);
      s.name = "kernel";
      s.cat = "kernel";
      args.unum("gpu_timer_start", k->gpu_timer);
      child_end_[{f, k->parent_id}] = std::max(child_end_[{f, k->parent_id}], s.end);
    }
    if (incomplete) args.boolean("incomplete", true);
    s.args = args.str();
    add_slice(std::move(s));
  }

  void step_slice(size_t f, const Event& begin, const ProxyStep& last, int64_t end, bool incomplete) {
    Slice s;
    s.track = channel_track(f, kTrackSteps, begin.channel, s.track_name);
    s.start = g(f, begin.time_ns);
    s.end = std::max(end, s.start);
    s.incomplete = incomplete;
    s.name = (last.is_send ? "send step " : "recv step ") + std::to_string(last.step);
    s.cat = "step";
    json::Object args;
    args.hex("request_id", last.request_id).num("step", last.step).num("peer", last.peer).unum("bytes", last.bytes);
    if (incomplete) args.boolean("incomplete", true);
    s.args = args.str();
    step_slice_[{last.request_id, last.is_send}] = add_slice(std::move(s));
  }

  void instant(size_t f, const Event& e) {
    const TraceFile& file = files_[f];
    Instant i;
    i.t = g(f, e.time_ns);
    json::Object args;
    if (e.comm_hash) args.hex("comm", e.comm_hash);
    if (auto* c = e.as<Connection>()) {
      i.track = net_track(f, c->conn_id, i.track_name);
      i.name = c->is_send ? "connect" : "accept";
      args.hex("conn", c->conn_id).str("remote_host", file.str(c->remote_host)).str("nic", file.str(c->nic));
      args.str("remote_addr", file.str(c->remote_addr)).num("port", c->port).num("streams", c->streams);
      if (const NetPath* path = file.connection_path(c->conn_id, c->is_send)) args.raw("path", path_to_json(*path));
    } else if (auto* n = e.as<NetFault>()) {
      i.track = net_track(f, n->conn_id, i.track_name);
      i.name = e.kind == EventKind::NetError ? "net error" : e.kind == EventKind::NetPeerLost ? "peer lost" : "close";
      args.hex("conn", n->conn_id).num("code", n->code).str("message", file.str(n->message));
      if (n->request_id) args.hex("request_id", n->request_id);
    } else if (auto* note = e.as<Note>()) {
      i.track = {f, kTrackRank, 0};
      i.track_name = rank(f);
      i.name = std::string(file.str(note->text));
    } else if (auto* ci = e.as<CommInfo>()) {
      i.track = {f, kTrackRank, 0};
      i.track_name = rank(f);
      i.name = "comm init";
      args.num("rank", ci->rank).num("nranks", ci->nranks).num("nnodes", ci->nnodes).str("name", file.str(ci->name));
    } else {
      return;
    }
    i.cat = std::string(to_string(e.kind));
    i.args = args.str();
    instants.push_back(std::move(i));
  }

  TrackKey net_track(size_t f, uint64_t conn_id, std::string& name) {
    auto [it, fresh] = conn_ordinal_.try_emplace({f, conn_id}, conn_ordinal_.size());
    name = rank(f) + " net";
    if (const Connection* c = files_[f].connection(conn_id)) {
      const auto host = files_[f].str(c->remote_host), nic = files_[f].str(c->nic);
      name += std::string(c->is_send ? " -> " : " <- ") + std::string(host.empty() ? "?" : host);
      if (!nic.empty()) name += " " + std::string(nic);
    } else {
      name += fmt::format(" conn {:04x}", conn_id & 0xffff);
    }
    return {f, kTrackNet, it->second};
  }

  void add_file(size_t f) {
    const TraceFile& file = files_[f];
    if (file.events.empty()) return;
    const int64_t last = g(f, file.events.back().time_ns);
    std::unordered_map<uint64_t, const Event*> open;  // span id -> begin
    std::map<std::pair<uint64_t, bool>, std::pair<const Event*, ProxyStep>> steps;
    for (const Event& e : file.events) {
      switch (e.kind) {
        case EventKind::GroupBegin:
        case EventKind::CollBegin:
        case EventKind::P2pBegin:
        case EventKind::ProxyOpBegin:
          open[span_of(e)] = &e;
          break;
        case EventKind::KernelChBegin:
          open[kernel_key(e)] = &e;
          break;
        case EventKind::GroupEnd:
        case EventKind::CollEnd:
        case EventKind::P2pEnd:
        case EventKind::ProxyOpEnd:
        case EventKind::KernelChEnd: {
          const uint64_t key = e.kind == EventKind::KernelChEnd ? kernel_key(e) : e.as<SpanEnd>()->span_id;
          if (auto it = open.find(key); it != open.end()) {
            span_slice(f, *it->second, g(f, e.time_ns), false);
            open.erase(it);
          }
          break;
        }
        case EventKind::ProxyStepBegin:
        case EventKind::ProxyStepState:
        case EventKind::ProxyStepEnd: {
          const ProxyStep& p = *e.as<ProxyStep>();
          auto& [begin, last_state] = steps[{p.request_id, p.is_send}];
          if (e.kind == EventKind::ProxyStepBegin || !begin) begin = &e;
          last_state.request_id = p.request_id;
          last_state.is_send = p.is_send;
          last_state.step = p.step;
          last_state.peer = p.peer;
          last_state.bytes = std::max(last_state.bytes, p.bytes);
          if (e.kind == EventKind::ProxyStepEnd) {
            step_slice(f, *begin, last_state, g(f, e.time_ns), false);
            steps.erase({p.request_id, p.is_send});
          }
          break;
        }
        case EventKind::NetPluginBegin:
        case EventKind::NetPluginEnd:  // a receive's message id is known only at the end
          if (auto* l = e.as<NetPluginLink>(); l && l->net_request_id && l->request_id)
            step_of_message_[l->net_request_id] = l->request_id;
          break;
        default:
          instant(f, e);
      }
    }
    for (const auto& [span, begin] : open) span_slice(f, *begin, last, true);
    for (const auto& [key, step] : steps) step_slice(f, *step.first, step.second, last, true);
    // A collective's End only means "enqueued": it lasts until its last proxy op or kernel ends.
    for (const auto& [key, index] : coll_slice_) {
      if (key.first != f) continue;
      if (auto it = child_end_.find(key); it != child_end_.end() && it->second > slices[index].end)
        slices[index].end = it->second;
    }
  }

  static uint64_t span_of(const Event& e) {
    if (auto* c = e.as<Collective>()) return c->span_id;
    if (auto* p = e.as<P2p>()) return p->span_id;
    if (auto* gr = e.as<Group>()) return gr->span_id;
    if (auto* o = e.as<ProxyOp>()) return o->span_id;
    return 0;
  }
  static uint64_t kernel_key(const Event& e) {
    return e.as<KernelChannel>()->parent_id * 0x9e3779b97f4a7c15ull + e.channel + 1;
  }

  void add_transfer_side(const MatchedTransfer& t, const TransferSide& s, bool send) {
    if (!s.posted && !s.done) return;
    const TraceFile& file = files_[s.file];
    Slice sl;
    sl.track = net_track(s.file, s.conn_id, sl.track_name);
    sl.start = g(s.file, s.posted_ns);
    sl.incomplete = !s.done;
    sl.end = s.done ? std::max(g(s.file, s.done_ns), sl.start)
                    : std::max(g(s.file, file.events.back().time_ns), sl.start);
    sl.name = std::string(send ? "send " : "recv ") + json::human_bytes(s.bytes);
    sl.cat = "net";
    json::Object args;
    args.hex("request_id", t.request_id).hex("conn", s.conn_id).unum("bytes", s.bytes);
    if (s.posted) args.unum("seq", s.seq);
    if (auto it = step_of_message_.find(t.request_id); it != step_of_message_.end())
      args.hex("step_request_id", it->second);
    if (sl.incomplete) args.boolean("incomplete", true);
    sl.args = args.str();
    const size_t index = add_slice(std::move(sl));
    (send ? message_slice_[t.request_id].first : message_slice_[t.request_id].second) = index + 1;
  }

  void add_transfers() {
    for (const MatchedTransfer& t : matching_.transfers) {
      if (t.level != TransferLevel::Message) continue;
      if (t.send.present()) add_transfer_side(t, t.send, true);
      if (t.recv.present()) add_transfer_side(t, t.recv, false);
    }
  }

  void bind(size_t send_slice, size_t recv_slice, uint64_t id) {
    slices[send_slice].flow = slices[recv_slice].flow = id;
    slices[send_slice].flow_out = true;
    ++flows;
  }

  void link_flows() {
    for (const auto& [id, pair] : message_slice_)
      if (pair.first && pair.second) bind(pair.first - 1, pair.second - 1, id);
    for (const auto& [key, index] : step_slice_) {
      if (!key.second) continue;
      if (auto it = step_slice_.find({key.first, false}); it != step_slice_.end()) bind(index, it->second, key.first);
    }
  }

  const std::vector<TraceFile>& files_;
  const Matching& matching_;
  const Alignment& align_;
  std::map<std::pair<size_t, uint64_t>, size_t> coll_slice_;
  std::map<std::pair<size_t, uint64_t>, int64_t> child_end_;
  std::map<std::pair<size_t, uint64_t>, uint64_t> conn_ordinal_;
  std::unordered_map<uint64_t, uint64_t> step_of_message_;
  std::unordered_map<uint64_t, std::pair<size_t, size_t>> message_slice_;  // index + 1, 0 = none
  std::map<std::pair<uint64_t, bool>, size_t> step_slice_;
};

// Greedy lanes: each slice goes to the first lane of its track that is free at its start.
void assign_lanes(std::vector<Slice>& slices) {
  std::vector<size_t> order(slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(slices[a].track, slices[a].start, slices[b].end) < std::tie(slices[b].track, slices[b].start, slices[a].end);
  });
  std::map<TrackKey, std::vector<int64_t>> lane_end;
  for (size_t i : order) {
    auto& ends = lane_end[slices[i].track];
    uint32_t lane = 0;
    while (lane < ends.size() && ends[lane] > slices[i].start) ++lane;
    if (lane == ends.size()) ends.push_back(0);
    ends[lane] = slices[i].end;
    slices[i].lane = lane;
  }
}

std::string micros(int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1000.0); }

}  // namespace

ChromeExportSummary write_chrome_trace(std::ostream& out, const std::vector<TraceFile>& files,
                                       const Matching& matching, const Alignment& alignment) {
  Builder b(files, matching, alignment);
  b.build();
  assign_lanes(b.slices);
  ChromeExportSummary summary;
  summary.slices = b.slices.size();
  summary.instants = b.instants.size();
  summary.flows = b.flows;
  summary.incomplete = std::count_if(b.slices.begin(), b.slices.end(), [](auto& s) { return s.incomplete; });
  int64_t t0 = INT64_MAX;
  for (const auto& s : b.slices) t0 = std::min(t0, s.start);
  for (const auto& i : b.instants) t0 = std::min(t0, i.t);
  if (t0 == INT64_MAX) t0 = 0;
  summary.t0_ns = t0;

  // A process per host; a thread id per (track, lane), numbered in display order.
  std::map<std::string, int> pid_of_host;
  for (const auto& f : files) pid_of_host.try_emplace(f.info.host, 0);
  int next_pid = 1;
  for (auto& [host, pid] : pid_of_host) pid = next_pid++;
  std::map<std::tuple<int32_t, int32_t, TrackKey, uint32_t>, std::string> tracks;  // sorted by rank
  auto track_id = [&](const TrackKey& k, uint32_t lane) {
    const auto& info = files[k.file].info;
    return std::make_tuple(info.rank < 0 ? INT32_MAX : info.rank, info.pid, k, lane);
  };
  for (const auto& s : b.slices)
    tracks.try_emplace(track_id(s.track, s.lane), s.track_name + (s.lane ? " #" + std::to_string(s.lane + 1) : ""));
  for (const auto& i : b.instants) tracks.try_emplace(track_id(i.track, 0), i.track_name);
  std::map<std::tuple<int32_t, int32_t, TrackKey, uint32_t>, int> tid;
  int next_tid = 1;
  for (const auto& [key, name] : tracks) tid[key] = next_tid++;

  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":";
  json::Object other;
  other.str("generator", "astral trace export").num("t0_ns", t0).unum("files", files.size());
  other.unum("matched_transfers", matching.matched).unum("unmatched_sends", matching.unmatched_sends);
  other.unum("unmatched_receives", matching.unmatched_recvs);
  other.raw("clock_inconsistency_ns", fmt::format("{:.0f}", alignment.inconsistency_ns));
  out << other.str() << ",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    out << (first ? "" : ",\n") << event;
    first = false;
  };
  for (const auto& [host, pid] : pid_of_host) {
    emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":{}}}}})", pid, json::quote(host)));
    emit(fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", pid, pid));
    for (const auto& d : alignment.domains) {
      if (d.host != host) continue;
      const std::string label = std::isfinite(d.uncertainty_ns)
                                    ? fmt::format("clock: {} (±{:.1f} us)", d.method, d.uncertainty_ns / 1000)
                                    : fmt::format("clock: {}", d.method);
      emit(fmt::format(R"({{"name":"process_labels","ph":"M","pid":{},"args":{{"labels":{}}}}})", pid, json::quote(label)));
    }
  }
  for (const auto& [key, name] : tracks) {
    const int pid = pid_of_host[files[std::get<2>(key).file].info.host];
    emit(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})", pid, tid[key], json::quote(name)));
    emit(fmt::format(R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", pid, tid[key], tid[key]));
  }
  for (const auto& s : b.slices) {
    const int pid = pid_of_host[files[s.track.file].info.host];
    std::string flow;
    if (s.flow) flow = fmt::format(R"(,"bind_id":{},"{}":true)", json::hex(s.flow), s.flow_out ? "flow_out" : "flow_in");
    emit(fmt::format(R"({{"name":{},"cat":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{}{},"args":{}}})",
                     json::quote(s.name), s.cat, micros(s.start - t0), micros(s.end - s.start), pid,
                     tid[track_id(s.track, s.lane)], flow, s.args));
  }
  for (const auto& i : b.instants) {
    const int pid = pid_of_host[files[i.track.file].info.host];
    emit(fmt::format(R"({{"name":{},"cat":"{}","ph":"i","s":"t","ts":{},"pid":{},"tid":{},"args":{}}})",
                     json::quote(i.name), i.cat, micros(i.t - t0), pid, tid[track_id(i.track, 0)], i.args));
  }
  out << "\n]}\n";
  return summary;
}

}  // namespace astral::trace
