// What the job reports about itself: timeouts, errors, crashes and slowdowns; per process group
// and sequence number which collective got stuck, who reached it and who stopped first; the
// straggler in timing records (the rank whose collectives are consistently the shortest is the
// one everybody else waits for).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis.hpp"
#include "text.hpp"

namespace astral::monitor {

namespace {

// One name per collective whoever printed it: watchdog "ALLREDUCE", "_REDUCE_SCATTER_BASE";
// Flight Recorder "nccl:all_reduce", "nccl:_reduce_scatter_base".
std::string normalised_op(std::string_view op) {
  if (op.substr(0, 5) == "nccl:") op.remove_prefix(5);
  std::string out;
  for (char c : op)
    if (c != '_' && c != ' ') out += char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Events dated only by neighbouring lines cannot say when the incident started.
constexpr double kOnsetConfidenceS = 120;

bool is_symptom(const Event& e) {
  static const char* kinds[] = {"watchdog_timeout", "watchdog_status", "watchdog_stuck", "retry_exceeded",
                                "rnr_retry_exceeded", "ib_completion_error", "ib_flush_error", "nccl_socket_error",
                                "nccl_proxy_error", "cuda_error", "nccl_error", "nccl_async_failure",
                                "process_abort", "ras_peer_dead", "ras_lagging_rank", "ras_missing_rank",
                                "desync_report", "ib_device_failed", "dump_signal", "ib_verbs_error",
                                "ib_fatal_event", "nccl_last_error", "watchdog_exception", "child_failed",
                                "process_exit"};
  for (const char* k : kinds)
    if (e.kind == k) return true;
  // A crash or OOM kill of a job process (kernel side) is a symptom too.
  if ((e.kind == "process_crash" || e.kind == "process_oom") && e.layer == Layer::kernel) return true;
  if (e.kind == "fr_entry" && e.attr("state") != "completed") return true;
  return false;
}

bool is_error(const Event& e) {
  return e.kind != "watchdog_timeout" && e.kind != "watchdog_status" && e.kind != "dump_signal" &&
         e.kind != "fr_entry" && e.kind != "ras_lagging_rank" && e.kind != "ras_missing_rank";
}

void straggler(const Bundle& b, const JobModel& job, Symptoms& s) {
  std::map<std::pair<uint64_t, int64_t>, std::vector<const CollectiveSample*>> by_coll;
  for (const CollectiveSample& x : b.samples)
    if (x.duration_us >= 0 && x.rank >= 0) by_coll[{x.comm_hash, x.seq}].push_back(&x);
  std::map<int, int> leads;
  std::map<int, std::vector<double>> ratios;
  std::map<int, std::set<uint32_t>> files;
  std::map<int, int64_t> first_lead;  // when each rank first made the others wait
  int groups = 0;
  for (auto& [key, v] : by_coll) {
    if (v.size() < 3) continue;
    std::vector<int64_t> d;
    for (auto* x : v) d.push_back(x->duration_us);
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    double med = double(d[d.size() / 2]);
    if (med <= 0) continue;
    ++groups;
    const CollectiveSample* fastest = *std::min_element(
        v.begin(), v.end(), [](auto* a, auto* c) { return a->duration_us < c->duration_us; });
    double ratio = double(fastest->duration_us) / med;
    ratios[fastest->rank].push_back(ratio);
    if (ratio < 0.7) {
      ++leads[fastest->rank];
      files[fastest->rank].insert(fastest->file);
      if (fastest->start_us != kUnknownTime) {
        auto [it, fresh] = first_lead.emplace(fastest->rank, fastest->start_us);
        if (!fresh) it->second = std::min(it->second, fastest->start_us);
      }
    }
  }
  if (groups < 3) return;
  for (auto& [rank, n] : leads) {
    double share = double(n) / groups;
    if (n < 3 || share < 0.5) continue;
    std::vector<double> r = ratios[rank];
    std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
    double med_ratio = r[r.size() / 2];
    double score = std::min(1.0, share * (1.0 - med_ratio) * 1.6);
    if (score <= s.straggler_score) continue;
    s.straggler_rank = rank;
    s.straggler_score = score;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "rank %d finished first in %d of %d collectives; its collective time is %.0f%% of the median "
                  "(the others wait for it)",
                  rank, n, groups, med_ratio * 100);
    s.straggler_note = buf;
    s.straggler_files.assign(files[rank].begin(), files[rank].end());
    s.straggler_since_us = first_lead.count(rank) ? first_lead[rank] : kUnknownTime;
  }
  (void)job;
}

}  // namespace

double time_relevance(int64_t t, double confidence_s, const Symptoms& s) {
  if (t == kUnknownTime || s.onset_us == kUnknownTime) return 0.6;
  double dt = double(t - s.onset_us) / 1e6;
  double slack = std::min(confidence_s, 3600.0);
  if (dt >= -900 - slack && dt <= 300 + slack) return 1.0;
  if (dt < 0) return std::max(0.15, 1.0 - (-dt - 900 - slack) / 7200.0);
  double last = s.last_symptom_us == kUnknownTime ? 0 : double(s.last_symptom_us - s.onset_us) / 1e6;
  return dt <= last + 60 + slack ? 0.6 : 0.3;
}

namespace {

// A RAS complaint that a later report of the same file no longer makes (its communicators are
// back to OK): a transient lag, not the incident.
std::vector<bool> cleared_ras_events(const Bundle& b) {
  std::vector<bool> cleared(b.events.size(), false);
  std::map<uint32_t, std::vector<uint32_t>> ok_lines;  // file -> lines of "RUNNING ... OK" rows
  for (const Event& e : b.events)
    if (e.kind == "ras_comm_status" && e.attr("errors") == "OK") ok_lines[e.file].push_back(e.line);
  if (ok_lines.empty()) return cleared;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (e.kind != "ras_lagging_rank" && e.kind != "ras_missing_rank") continue;
    auto it = ok_lines.find(e.file);
    if (it == ok_lines.end()) continue;
    for (uint32_t line : it->second) cleared[i] = cleared[i] || line > e.line;
  }
  return cleared;
}

}  // namespace

// Most ranks, not all: a log's last line is the one a collector most often cuts.
bool job_finished_cleanly(const Bundle& b, const JobModel& job) {
  if (job.ranks.empty()) return false;
  std::set<std::string> destroyed;  // "host|comm pointer"
  for (const Event& e : b.events)
    if (e.kind == "nccl_destroy") destroyed.insert(e.host + "|" + std::string(e.attr("comm")));
  if (destroyed.empty()) return false;
  size_t left = 0;
  for (const Event& e : b.events)
    if (e.kind == "nccl_init" && e.keys.comm_hash == job.world_comm && destroyed.count(e.host + "|" + std::string(e.attr("comm"))))
      ++left;
  return left * 4 >= job.ranks.size() * 3;
}

Symptoms find_symptoms(const Bundle& b, const JobModel& job) {
  Symptoms s;
  std::map<std::string, int> timeouts_per_pg;
  const std::vector<bool> cleared = cleared_ras_events(b);
  s.finished_cleanly = job_finished_cleanly(b, job);
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (cleared[i]) continue;
    // A job whose ranks left their communicator cleanly is not stuck: what RAS thought of it on
    // the way is moot.
    if (s.finished_cleanly && e.kind.rfind("ras_", 0) == 0) continue;
    if (e.kind == "fr_pg_status") {
      int rank = e.keys.rank;
      if (rank < 0) continue;
      RankState& rs = s.ranks[rank];
      rs.last_enqueued = std::max(rs.last_enqueued, e.attr_int("last_enqueued"));
      rs.last_completed = std::max(rs.last_completed, e.attr_int("last_completed"));
      rs.events.push_back(i);
      continue;
    }
    if (!is_symptom(e)) continue;
    s.events.push_back(i);
    int rank = job.rank_of(e);
    if (e.has_time() && e.time_confidence_s <= kOnsetConfidenceS) {
      if (s.first_symptom_us == kUnknownTime || e.time_us < s.first_symptom_us) s.first_symptom_us = e.time_us;
      s.last_symptom_us = std::max(s.last_symptom_us, e.time_us);
    }
    if (!e.host.empty() && e.kind.rfind("ras_", 0) != 0) s.affected_hosts.insert(e.host);
    if (rank < 0) continue;
    RankState& rs = s.ranks[rank];
    rs.events.push_back(i);
    if (e.kind == "watchdog_timeout") {
      rs.timed_out = true;
      rs.timed_out_seq = e.keys.seq;
      rs.op = std::string(e.attr("op_type"));
      ++timeouts_per_pg[e.keys.process_group];
    }
    if (!e.attr("last_enqueued").empty()) {
      rs.last_enqueued = std::max(rs.last_enqueued, e.attr_int("last_enqueued"));
      rs.last_completed = std::max(rs.last_completed, e.attr_int("last_completed"));
      if (e.kind == "watchdog_status" && rs.timed_out_seq < 0) rs.timed_out_seq = e.keys.seq;
    }
    if (is_error(e)) {
      rs.errored = true;
      if (e.has_time() && (rs.first_error_us == kUnknownTime || e.time_us < rs.first_error_us))
        rs.first_error_us = e.time_us;
    }
    if (e.kind.rfind("ras_", 0) != 0) s.affected_ranks.insert(rank);
  }
  straggler(b, job, s);
  s.any = !s.events.empty() || s.straggler_rank >= 0;
  if (!s.any) return s;
  // The stuck collective: the PG with the most timeouts, the sequence most ranks timed out on.
  for (auto& [pg, n] : timeouts_per_pg)
    if (s.process_group.empty() || n > timeouts_per_pg[s.process_group]) s.process_group = pg;
  // Flight Recorder entries still pending: the collective each rank is stuck in, and its op.
  for (size_t i : s.events) {
    const Event& e = b.events[i];
    if (e.kind != "fr_entry" || e.keys.rank < 0) continue;
    RankState& rs = s.ranks[e.keys.rank];
    if (rs.timed_out_seq < 0 || (e.keys.seq >= 0 && e.keys.seq < rs.timed_out_seq && !rs.timed_out)) {
      rs.timed_out_seq = e.keys.seq;
      rs.op = std::string(e.attr("op_type"));
      rs.events.push_back(i);
    }
  }
  std::map<int64_t, int> seq_votes;
  std::map<std::string, int> op_votes;
  for (auto& [rank, rs] : s.ranks)
    if (rs.timed_out_seq >= 0) ++seq_votes[rs.timed_out_seq];
  for (auto& [seq, n] : seq_votes)
    if (s.stuck_seq < 0 || n > seq_votes[s.stuck_seq]) s.stuck_seq = seq;
  for (auto& [rank, rs] : s.ranks) {
    rs.op = normalised_op(rs.op);
    if (rs.timed_out_seq == s.stuck_seq && !rs.op.empty()) ++op_votes[rs.op];
  }
  for (auto& [op, n] : op_votes)
    if (s.stuck_op.empty() || n > op_votes[s.stuck_op]) s.stuck_op = op;
  // Onset: when the stuck collective was enqueued (watchdog time - ran for), or the first error.
  std::vector<int64_t> starts;
  int64_t first_error = kUnknownTime;
  for (size_t i : s.events) {
    const Event& e = b.events[i];
    if (!e.has_time() || e.time_confidence_s > kOnsetConfidenceS) continue;
    if (e.kind == "watchdog_timeout" && e.keys.seq == s.stuck_seq && e.attr_int("ran_for_ms") > 0)
      starts.push_back(e.time_us - e.attr_int("ran_for_ms") * 1000);
    else if (is_error(e) && e.kind != "dump_signal" && (first_error == kUnknownTime || e.time_us < first_error))
      first_error = e.time_us;
  }
  if (!starts.empty()) {
    std::nth_element(starts.begin(), starts.begin() + starts.size() / 2, starts.end());
    s.onset_us = starts[starts.size() / 2];
  }
  if (first_error != kUnknownTime && (s.onset_us == kUnknownTime || first_error < s.onset_us)) s.onset_us = first_error;
  if (s.onset_us == kUnknownTime) s.onset_us = s.first_symptom_us;
  // A slowdown alone: it began when the straggler first held the others up.
  if (s.onset_us == kUnknownTime) s.onset_us = s.straggler_since_us;
  // Who did not reach the stuck collective, or reached a different one.
  const int timed_out = int(seq_votes.empty() ? 0 : seq_votes[s.stuck_seq]);
  for (auto& [rank, rs] : s.ranks) {
    if (s.stuck_seq >= 0 && rs.last_enqueued >= 0 && rs.last_enqueued < s.stuck_seq) {
      for (size_t i : rs.events)
        if (!b.events[i].attr("last_enqueued").empty())
          s.culprits[rank].push_back({i, "last enqueued collective " + std::to_string(rs.last_enqueued) +
                                             " < " + std::to_string(s.stuck_seq) + ": never issued it"});
      s.culprit_reason[rank] = "never issued collective " + std::to_string(s.stuck_seq);
    }
    if (!s.stuck_op.empty() && rs.timed_out_seq == s.stuck_seq && !rs.op.empty() && rs.op != s.stuck_op &&
        op_votes[s.stuck_op] > op_votes[rs.op]) {
      for (size_t i : rs.events)
        if (b.events[i].kind == "watchdog_timeout")
          s.culprits[rank].push_back({i, "issued " + rs.op + " where the others issued " + s.stuck_op +
                                             " at sequence " + std::to_string(s.stuck_seq)});
      s.culprit_reason[rank] = "issued " + rs.op + " instead of " + s.stuck_op;
    }
  }
  for (size_t i : s.events) {
    const Event& e = b.events[i];
    int rank = job.rank_of(e);
    if (e.kind == "desync_report") {
      std::string_view list = e.attr("ranks");
      while (!list.empty()) {
        list = text::ltrim(list);
        auto r = text::take_uint(list);
        if (!r) break;
        s.culprits[int(*r)].push_back({i, "PyTorch desync report names it"});
        s.culprit_reason.emplace(int(*r), "named by the desync report");
        text::take(list, ',');
      }
    }
    if ((e.kind == "ras_lagging_rank" || e.kind == "ras_missing_rank") && rank >= 0) {
      s.culprits[rank].push_back({i, "NCCL RAS: " + std::string(e.kind == "ras_lagging_rank" ? "behind the others" : "missing")});
      s.culprit_reason.emplace(rank, "reported by NCCL RAS");
    }
    if (e.kind == "ras_peer_dead") s.peers_dead_reported = true;
  }
  // Ranks that went silent while most of their group timed out.
  if (timed_out >= 2 && job.world_size > 0) {
    std::set<std::string> hosts_with_logs;
    for (const auto& f : b.files) hosts_with_logs.insert(f.host);
    std::vector<int> silent;
    for (auto& [rank, info] : job.ranks) {
      auto it = s.ranks.find(rank);
      bool reported = it != s.ranks.end() && (it->second.timed_out || it->second.last_enqueued >= 0);
      if (!reported) silent.push_back(rank);
    }
    if (!silent.empty() && silent.size() * 4 <= size_t(std::max<int>(job.world_size, 1)))
      for (int r : silent) s.missing_ranks.insert(r);
  }
  s.affected_ranks.insert(s.missing_ranks.begin(), s.missing_ranks.end());
  return s;
}

}  // namespace astral::monitor
