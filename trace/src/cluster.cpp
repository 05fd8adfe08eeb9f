// Matching transfers across trace files, and aligning the clocks of their hosts.
#include "astral/trace/cluster.hpp"

#include "astral/common/checked.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace astral::trace {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct SideRef {
  MatchedTransfer* t;
  TransferSide* side;
};

class Matcher {
 public:
  explicit Matcher(Matching& out) : out_(out) {}

  void add_file(const TraceFile& f, size_t file) {
    for (const Event& e : f.events) {
      if (auto* t = e.as<Transfer>()) on_transfer(e, *t, file);
      if (auto* s = e.as<ProxyStep>()) on_step(e, *s, file);
    }
  }

 private:
  TransferSide* side(uint64_t id, TransferLevel level, const Event& e, bool send, size_t file) {
    auto& index = level == TransferLevel::Message ? message_ : step_;
    auto [it, fresh] = index.try_emplace(id, out_.transfers.size());
    if (fresh) {
      MatchedTransfer t;
      t.request_id = id;
      t.comm_hash = e.comm_hash;
      t.level = level;
      t.channel = e.channel;
      out_.transfers.push_back(t);
    }
    MatchedTransfer& t = out_.transfers[it->second];
    TransferSide& s = send ? t.send : t.recv;
    if (s.present() && s.file != file) {
      ++out_.duplicates;
      return nullptr;
    }
    s.file = file;
    s.thread = e.thread;
    if (t.channel == kNoChannel) t.channel = e.channel;
    return &s;
  }

  void on_transfer(const Event& e, const Transfer& t, size_t file) {
    if (t.request_id == 0) return;  // a receive not yet matched to a message: nothing to join
    const bool send = e.kind == EventKind::NetSendPosted || e.kind == EventKind::NetSendDone;
    const bool posted = e.kind == EventKind::NetSendPosted || e.kind == EventKind::NetRecvPosted;
    TransferSide* s = side(t.request_id, TransferLevel::Message, e, send, file);
    if (!s) return;
    s->conn_id = t.conn_id;
    if (posted) {
      s->posted = true;
      s->posted_ns = e.time_ns;
      s->seq = t.seq;
      if (!s->done) s->bytes = t.bytes;  // a receive's posted size is only its buffer size
    } else {
      s->done = true;
      s->done_ns = e.time_ns;
      s->bytes = t.bytes;
      if (!s->posted && t.duration_ns <= e.time_ns) {  // the Posted event was lost (wrap): rebuild it
        s->posted_ns = e.time_ns - t.duration_ns;
      }
    }
  }

  void on_step(const Event& e, const ProxyStep& p, size_t file) {
    if (p.request_id == 0) return;
    TransferSide* s = side(p.request_id, TransferLevel::Step, e, p.is_send, file);
    if (!s) return;
    s->peer = p.peer;
    s->bytes = std::max(s->bytes, p.bytes);
    if (e.kind == EventKind::ProxyStepBegin) {
      s->posted = true;
      s->posted_ns = e.time_ns;
    } else if (e.kind == EventKind::ProxyStepEnd) {
      s->done = true;
      s->done_ns = e.time_ns;
    }
  }

  Matching& out_;
  std::unordered_map<uint64_t, size_t> message_, step_;
};

// Difference constraints x[to] <= x[from] + w.
struct Edge {
  size_t from, to;
  double w;
};

// Shortest distances from `source` (or from a virtual source reaching every node when source
// is npos); false when a negative cycle exists (the constraints are inconsistent).
bool shortest_paths(size_t n, const std::vector<Edge>& edges, size_t source, double slack, bool reverse,
                    std::vector<double>& dist) {
  dist.assign(n, source == kNoFile ? 0.0 : kInf);
  if (source != kNoFile) dist[source] = 0;
  for (size_t round = 0; round <= n; ++round) {
    bool changed = false;
    for (const Edge& e : edges) {
      const size_t from = reverse ? e.to : e.from, to = reverse ? e.from : e.to;
      if (dist[from] == kInf) continue;
      const double d = dist[from] + e.w + slack;
      if (d < dist[to] - 1e-6) {
        dist[to] = d;
        changed = true;
      }
    }
    if (!changed) return true;
  }
  return false;
}

// The smallest slack that makes the constraints consistent (0 when they already are).
double consistency_slack(size_t n, const std::vector<Edge>& edges) {
  std::vector<double> dist;
  if (shortest_paths(n, edges, kNoFile, 0, false, dist)) return 0;
  double lo = 0, hi = 1;
  for (const Edge& e : edges) hi = std::max(hi, 2 * std::fabs(e.w));
  for (int i = 0; i < 60 && hi - lo > 1.0; ++i) {
    const double mid = (lo + hi) / 2;
    (shortest_paths(n, edges, kNoFile, mid, false, dist) ? hi : lo) = mid;
  }
  return hi;
}

size_t find_root(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string rank_label(const TraceFile& file) {
  return file.info.rank >= 0 ? "rank " + std::to_string(file.info.rank) : "pid " + std::to_string(file.info.pid);
}

Matching match_transfers(const std::vector<TraceFile>& files) {
  Matching out;
  Matcher matcher(out);
  for (size_t i = 0; i < files.size(); ++i) matcher.add_file(files[i], i);
  for (const auto& t : out.transfers) {
    if (t.send.present() && t.recv.present()) ++out.matched;
    else if (t.send.present()) ++out.unmatched_sends;
    else ++out.unmatched_recvs;
  }
  return out;
}

Alignment align_clocks(const std::vector<TraceFile>& files, const Matching& matching, AlignMode mode) {
  Alignment a;
  // Clock domains: one per host boot (same boot id = same CLOCK_MONOTONIC).
  std::map<std::pair<std::string, std::string>, size_t> by_key;
  std::vector<size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return files[x].info.host < files[y].info.host; });
  a.domain_of_file.assign(files.size(), 0);
  for (size_t i : order) {
    const auto& info = files[i].info;
    const std::string clock_key = info.boot_id.empty() ? "pid:" + std::to_string(info.pid) : info.boot_id;
    auto [it, fresh] = by_key.try_emplace({info.host, clock_key}, a.domains.size());
    if (fresh) {
      ClockDomain d;
      d.host = info.host;
      d.boot_id = info.boot_id;
      a.domains.push_back(d);
    }
    a.domain_of_file[i] = it->second;
    a.domains[it->second].files.push_back(i);
  }
  const size_t n = a.domains.size();
  for (auto& d : a.domains) {
    std::vector<int64_t> w;
    for (size_t f : d.files) w.push_back(files[f].wall_offset_ns());
    d.wall_offset_ns = median(w);
    d.offset_ns = d.wall_offset_ns;
    d.method = "wall clock";
  }

  // Per ordered domain pair, the tightest bound x[B] - x[A] >= max(send posted - recv done).
  std::map<std::pair<size_t, size_t>, double> lower;
  for (const auto& t : matching.transfers) {
    if (!t.send.present() || !t.recv.present() || !t.send.posted || !t.recv.done) continue;
    const size_t da = a.domain_of_file[t.send.file], db = a.domain_of_file[t.recv.file];
    if (da == db) continue;
    const double bound = double(int64_t(t.send.posted_ns - t.recv.done_ns));
    auto [it, fresh] = lower.try_emplace({da, db}, bound);
    if (!fresh) it->second = std::max(it->second, bound);
    ++a.domains[da].pairs;
    ++a.domains[db].pairs;
    ++a.constraints;
  }
  if (mode == AlignMode::Transfers && !lower.empty()) {
    std::vector<Edge> edges;
    std::vector<size_t> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    for (const auto& [ab, l] : lower) {
      edges.push_back({ab.second, ab.first, -l});  // x[A] <= x[B] - l
      parent[find_root(parent, ab.first)] = find_root(parent, ab.second);
    }
    a.inconsistency_ns = consistency_slack(n, edges);
    const double slack = a.inconsistency_ns;
    std::map<size_t, std::vector<size_t>> components;
    for (size_t d = 0; d < n; ++d) components[find_root(parent, d)].push_back(d);
    for (auto& [root, members] : components) {
      if (members.size() < 2) continue;  // no matched transfers: stays on its wall clock
      const size_t ref = *std::max_element(members.begin(), members.end(), [&](size_t x, size_t y) {
        return a.domains[x].pairs < a.domains[y].pairs;
      });
      std::vector<double> up, down, x(n, 0.0);
      shortest_paths(n, edges, ref, slack, false, up);   // x[d] - x[ref] <= up[d]
      shortest_paths(n, edges, ref, slack, true, down);  // x[ref] - x[d] <= down[d]
      for (size_t d : members) {
        const double hi = up[d], lo = -down[d];
        const double wall_guess = double(a.domains[d].wall_offset_ns - a.domains[ref].wall_offset_ns);
        ClockDomain& dom = a.domains[d];
        dom.reference = ref;
        if (d == ref) {
          x[d] = 0;
          dom.uncertainty_ns = 0;
          dom.method = "reference";
        } else if (std::isfinite(hi) && std::isfinite(lo)) {
          x[d] = (lo + hi) / 2;
          dom.uncertainty_ns = (hi - lo) / 2;
          dom.method = "matched transfers";
        } else {
          x[d] = std::clamp(wall_guess, std::isfinite(lo) ? lo : -kInf, std::isfinite(hi) ? hi : kInf);
          dom.uncertainty_ns = kInf;
          dom.method = "one-sided bound";
        }
      }
      // Per-domain midpoints need not satisfy every pair at once: project onto each violated
      // bound in turn (the bounds are consistent up to `slack`, so this settles).
      for (int sweep = 0; sweep < 200; ++sweep) {
        bool moved = false;
        for (const auto& [ab, l] : lower) {
          if (find_root(parent, ab.first) != root) continue;
          const double gap = (x[ab.second] - x[ab.first]) - (l - slack);
          if (gap < -1e-3) {
            x[ab.second] -= gap / 2;
            x[ab.first] += gap / 2;
            moved = true;
          }
        }
        if (!moved) break;
      }
      // Anchor the component to the hosts' wall clocks (the median disagreement becomes 0). A
      // domain whose offset is beyond kMaxClockNs (a damaged or hostile trace's times) cannot be
      // placed: it stays on its wall clock, as a domain without matched transfers does. So
      // to_global (a reading below kMaxClockNs plus an offset within it) never overflows.
      std::vector<int64_t> shift;
      std::vector<std::optional<int64_t>> placed(n);
      for (size_t d : members) {
        placed[d] = checked_round<int64_t>(x[d]);
        const auto s = placed[d] ? checked_sub(a.domains[d].wall_offset_ns, *placed[d]) : std::nullopt;
        if (s) shift.push_back(*s);
        else placed[d].reset();
      }
      const int64_t base = median(shift);
      for (size_t d : members) {
        ClockDomain& dom = a.domains[d];
        const auto offset = placed[d] ? checked_add(base, *placed[d]) : std::nullopt;
        if (offset && *offset > -int64_t(kMaxClockNs) && *offset < int64_t(kMaxClockNs)) {
          dom.offset_ns = *offset;
        } else {
          dom.offset_ns = dom.wall_offset_ns;
          dom.uncertainty_ns = kInf;
          dom.method = "wall clock";
        }
      }
    }
  }
  for (const auto& t : matching.transfers) {
    if (!t.send.present() || !t.recv.present() || !t.send.posted || !t.recv.done) continue;
    if (a.to_global(t.recv.file, t.recv.done_ns) + 1 < a.to_global(t.send.file, t.send.posted_ns))
      ++a.causality_violations;
  }
  return a;
}

}  // namespace astral::trace
