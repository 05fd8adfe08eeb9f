// Connections of Astral trace files mapped onto the fabric graph, and slow transfers joined to
// the links they crossed.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "astral/monitor/metrics.hpp"
#include "astral/monitor/paths.hpp"
#include "hash_routing.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

struct Rate {
  uint64_t bytes = 0, ns = 0, n = 0;
  std::vector<std::pair<uint64_t, double>> samples;  // monotonic time, Gb/s
};

double gbps_of(uint64_t bytes, uint64_t ns) { return ns ? double(bytes) * 8.0 / double(ns) : 0; }

// Wall time (us) of a monotonic reading of `f`, from its clock points.
int64_t wall_us(const trace::TraceFile& f, uint64_t mono_ns) {
  uint64_t mono0 = f.info.start_mono_ns, wall0 = f.info.start_wall_ns;
  if (!f.clock.empty()) mono0 = f.clock.front().mono_ns, wall0 = f.clock.front().wall_ns;
  return int64_t((wall0 + (mono_ns - mono0)) / 1000);
}

Component cable_hop(const Cable& c) {
  return {ComponentKind::link, names::canonical_host(c.nic.host), c.nic.nic, c.sw.switch_name, c.sw.port, -1};
}

// The trunks between two leaves: direct ones, else leaf -> spine -> leaf (ECMP: all of them).
void add_trunks(const FabricGraph& fabric, const std::string& a, const std::string& b, ConnectionPath& p) {
  auto far_end = [](const Trunk& t, const std::string& from) -> std::pair<SwitchEnd, SwitchEnd> {
    return names::canonical_host(t.a.switch_name) == from ? std::make_pair(t.a, t.b) : std::make_pair(t.b, t.a);
  };
  std::vector<std::pair<SwitchEnd, SwitchEnd>> direct, up;
  for (const Trunk* t : fabric.trunks_of(a)) {
    auto ends = far_end(*t, a);
    (names::canonical_host(ends.second.switch_name) == b ? direct : up).push_back(ends);
  }
  std::vector<Component> lower, upper;
  if (!direct.empty()) {
    for (auto& [near, far] : direct) lower.push_back({ComponentKind::link, "", "", near.switch_name, near.port, -1});
  } else {
    for (auto& [near, spine] : up) {
      const std::string s = names::canonical_host(spine.switch_name);
      bool reaches = false;
      for (const Trunk* t : fabric.trunks_of(s)) {
        auto ends = far_end(*t, s);
        if (names::canonical_host(ends.second.switch_name) != b) continue;
        reaches = true;
        upper.push_back({ComponentKind::link, "", "", ends.second.switch_name, ends.second.port, -1});
      }
      if (reaches) lower.push_back({ComponentKind::link, "", "", near.switch_name, near.port, -1});
    }
  }
  p.ambiguous = lower.size() > 1 || upper.size() > 1;
  p.hops.insert(p.hops.end(), lower.begin(), lower.end());
  p.hops.insert(p.hops.end(), upper.begin(), upper.end());
}

// What the sending end's path plan says about a connection's QPs: its plane and the UDP source
// port of each RoCE QP. The plugin logs the plan as a trace note "connection 0x<id> path {json}"
// (plan_to_json: "plane", "qps": [{"udp_sport", "dlid", ...}]); trace files with a path field
// of their own use the same key names (docs/trace-format.md, "Connection path"). A note cut
// short by the string table's bound still gives the ports it holds.
struct NotedPath {
  int plane = -1;
  std::vector<uint16_t> udp_sports;
};

std::optional<std::pair<uint64_t, NotedPath>> path_of_note(std::string_view text) {
  if (text.rfind("connection 0x", 0) != 0) return std::nullopt;
  const size_t at = text.find(" path ");
  if (at == std::string_view::npos) return std::nullopt;
  uint64_t id = 0;
  for (char c : text.substr(13, at - 13)) {
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0) return std::nullopt;
    id = id * 16 + uint64_t(v);
  }
  const std::string_view body = text.substr(at + 6);
  NotedPath p;
  auto number_after = [&](std::string_view key, size_t from, size_t& next) -> std::optional<int64_t> {
    const size_t k = body.find(key, from);
    if (k == std::string_view::npos) return std::nullopt;
    size_t i = k + key.size();
    while (i < body.size() && (body[i] == ' ' || body[i] == ':')) ++i;
    bool neg = i < body.size() && body[i] == '-';
    if (neg) ++i;
    if (i >= body.size() || body[i] < '0' || body[i] > '9') return std::nullopt;
    int64_t v = 0;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9' && v < (int64_t(1) << 40)) v = v * 10 + (body[i++] - '0');
    if (i >= body.size()) return std::nullopt;  // cut short in the middle of the number
    next = i;
    return neg ? -v : v;
  };
  size_t next = 0;
  if (auto plane = number_after("\"plane\"", 0, next)) p.plane = int(*plane);
  for (size_t from = 0;;) {
    auto sport = number_after("\"udp_sport\"", from, next);
    if (!sport) break;
    if (*sport > 0 && *sport <= 0xFFFF) p.udp_sports.push_back(uint16_t(*sport));
    from = next;
  }
  return std::make_pair(id, std::move(p));
}

// The same from a connection record's own path (ConnectionRecord::path, std::optional<NetPath>,
// where the trace library has it: the ib transport then writes no note). A template so that this
// file builds against trace readers with and without the field.
template <class Record>
std::optional<NotedPath> path_of_record(const Record& r) {
  if constexpr (requires { r.path->qps.front().udp_sport; r.path->plane; }) {
    if (!r.path) return std::nullopt;
    NotedPath p;
    p.plane = int(r.path->plane);
    for (const auto& q : r.path->qps)
      if (q.udp_sport) p.udp_sports.push_back(uint16_t(q.udp_sport));
    return p;
  } else {
    return std::nullopt;
  }
}

// Exact trunks from the hash model: the union over the connection's QPs. False when a QP's
// source port is unknown (label 0: mlx5 hashed the QP numbers) or an end is not in the model.
bool add_hashed_trunks(const HashRouting& routing, const NotedPath& noted, ConnectionPath& p) {
  if (noted.udp_sports.empty()) return false;
  std::vector<Component> hops;
  std::set<std::string> seen;
  for (uint16_t sport : noted.udp_sports) {
    auto qp = routing.trunk_hops(p.host, p.nic, p.peer_host, p.peer_nic, noted.plane, sport);
    if (!qp) return false;
    for (Component& h : *qp)
      if (seen.insert(h.switch_name + "|" + h.port).second) hops.push_back(std::move(h));
  }
  p.hops.insert(p.hops.end(), hops.begin(), hops.end());
  p.hashed = true;
  return true;
}

std::string hop_key(const Component& c) { return c.host + "|" + c.device + "|" + c.switch_name + "|" + c.port; }

std::string hop_name(const Component& c) {
  if (!c.host.empty()) return c.device + " on " + c.host + (c.switch_name.empty() ? "" : " <-> " + c.switch_name + " " + c.port);
  return c.switch_name + " " + c.port;
}

}  // namespace

std::vector<ConnectionPath> connection_paths(const std::vector<trace::TraceFile>& files, const FabricGraph& fabric) {
  std::map<std::pair<std::string, uint64_t>, std::string> nic_of_end;
  for (const auto& f : files)
    for (const auto& c : f.connections)
      nic_of_end[{names::canonical_host(f.info.host), c.connection.conn_id}] = std::string(f.str(c.connection.nic));
  std::vector<ConnectionPath> out;
  std::vector<Rate> rates;
  std::vector<const trace::TraceFile*> file_of;
  for (const auto& f : files) {
    const std::string host = names::canonical_host(f.info.host);
    std::map<uint64_t, size_t> index;
    std::map<uint64_t, NotedPath> noted;
    if (fabric.hash_routing())
      for (const auto& e : f.events)
        if (const auto* n = e.kind == trace::EventKind::Note ? e.as<trace::Note>() : nullptr)
          if (auto path = path_of_note(f.str(n->text))) noted[path->first] = std::move(path->second);
    for (const auto& c : f.connections) {
      if (!c.connection.is_send) continue;
      if (fabric.hash_routing())
        if (auto path = path_of_record(c)) noted[c.connection.conn_id] = std::move(*path);
      ConnectionPath p;
      p.conn_id = c.connection.conn_id;
      p.host = host;
      p.nic = std::string(f.str(c.connection.nic));
      p.peer_host = names::canonical_host(f.str(c.connection.remote_host));
      if (p.peer_host.empty()) p.peer_host = fabric.host_of_ip(names::canonical_ip(f.str(c.connection.remote_addr)));
      if (auto it = nic_of_end.find({p.peer_host, p.conn_id}); it != nic_of_end.end()) p.peer_nic = it->second;
      const Cable* mine = fabric.cable_of_nic(p.host, p.nic);
      const Cable* theirs = p.peer_nic.empty() ? nullptr : fabric.cable_of_nic(p.peer_host, p.peer_nic);
      if (mine) p.hops.push_back(cable_hop(*mine));
      if (mine && theirs && names::canonical_host(mine->sw.switch_name) != names::canonical_host(theirs->sw.switch_name)) {
        auto it = noted.find(p.conn_id);
        if (it == noted.end() || !add_hashed_trunks(*fabric.hash_routing(), it->second, p))
          add_trunks(fabric, names::canonical_host(mine->sw.switch_name), names::canonical_host(theirs->sw.switch_name), p);
      }
      if (theirs) p.hops.push_back(cable_hop(*theirs));
      index[p.conn_id] = out.size();
      out.push_back(std::move(p));
      rates.emplace_back();
      file_of.push_back(&f);
    }
    for (const auto& e : f.events) {
      if (e.kind != trace::EventKind::NetSendDone) continue;
      const auto* t = e.as<trace::Transfer>();
      auto it = t ? index.find(t->conn_id) : index.end();
      if (it == index.end() || !t->duration_ns) continue;
      Rate& r = rates[it->second];
      r.bytes += t->bytes;
      r.ns += t->duration_ns;
      ++r.n;
      r.samples.emplace_back(e.time_ns, gbps_of(t->bytes, t->duration_ns));
    }
  }
  std::vector<double> all;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].transfers = rates[i].n;
    out[i].bytes = rates[i].bytes;
    out[i].gbps = gbps_of(rates[i].bytes, rates[i].ns);
    if (rates[i].n) all.push_back(out[i].gbps);
  }
  if (all.size() < 3) return out;  // no "usual rate" to compare with
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  const double median = all[all.size() / 2];
  for (size_t i = 0; i < out.size(); ++i) {
    if (!rates[i].n || out[i].gbps >= 0.5 * median) continue;
    out[i].slow = true;
    for (auto [mono, g] : rates[i].samples)
      if (g < 0.5 * median) {
        out[i].first_slow_us = wall_us(*file_of[i], mono);
        break;
      }
  }
  return out;
}

std::vector<Event> slow_link_events(const std::vector<ConnectionPath>& paths) {
  struct Tally {
    Component hop;
    int crossing = 0, slow = 0;
    double slow_gbps = 0;
    int64_t first = kUnknownTime;
  };
  std::map<std::string, Tally> tally;
  std::vector<double> rates;
  int slow_total = 0;
  for (const ConnectionPath& p : paths) {
    if (!p.transfers) continue;
    rates.push_back(p.gbps);
    slow_total += p.slow;
    std::set<std::string> seen;
    for (const Component& h : p.hops) {
      if (!seen.insert(hop_key(h)).second) continue;
      Tally& t = tally[hop_key(h)];
      t.hop = h;
      ++t.crossing;
      if (!p.slow) continue;
      ++t.slow;
      t.slow_gbps += p.gbps;
      if (p.first_slow_us != kUnknownTime && (t.first == kUnknownTime || p.first_slow_us < t.first)) t.first = p.first_slow_us;
    }
  }
  std::vector<Event> out;
  if (rates.empty()) return out;
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  const double median = rates[rates.size() / 2];
  for (auto& [key, t] : tally) {
    // Most of what crossed the link was slow, and it carried at least half of all slow traffic.
    if (t.slow < 2 || t.slow * 10 < t.crossing * 6 || t.slow * 2 < slow_total) continue;
    Event& e = out.emplace_back();
    e.time_us = t.first;
    e.time_confidence_s = 1;
    e.host = t.hop.host.empty() ? t.hop.switch_name : t.hop.host;
    e.layer = Layer::astral;
    e.component = t.hop;
    e.severity = Severity::warning;
    e.kind = "slow_transfers";
    char rate[96];
    std::snprintf(rate, sizeof rate, " (%.1f Gb/s against a median of %.1f Gb/s)", t.slow_gbps / t.slow, median);
    e.message = std::to_string(t.slow) + " of " + std::to_string(t.crossing) + " connections across " +
                hop_name(t.hop) + " ran below half the usual rate" + rate;
    e.set_attr("slow_connections", std::to_string(t.slow));
    e.set_attr("connections", std::to_string(t.crossing));
  }
  return out;
}

size_t add_connection_evidence(Bundle& b) {
  std::vector<trace::TraceFile> traces;
  for (const FileStats& f : b.files) {
    if (f.kind != FileKind::astral_trace) continue;
    try {
      traces.push_back(trace::read_trace_file(f.path == b.root ? b.root : b.root + "/" + f.path));
    } catch (const std::exception&) {
      continue;  // a damaged trace file says nothing about paths; the parsers counted it
    }
  }
  if (traces.empty()) return 0;
  const auto paths = connection_paths(traces, b.fabric);
  std::vector<Event> events = slow_link_events(paths);
  const size_t n = events.size();
  if (n) add_metric_events(b, std::move(events), "paths:" + b.root, paths.size());
  return n;
}

}  // namespace astral::monitor
