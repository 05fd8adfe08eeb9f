// Orchestration: job model -> clock alignment -> symptoms -> candidates in every layer ->
// ranking (best explanation of the incident first) -> root causes with evidence and blast radius.
#include "astral/monitor/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis.hpp"

namespace astral::monitor {

namespace {

// The evidence shown for a root cause: one of each kind first (so every layer that speaks is
// heard), then the rest by time.
std::vector<Evidence> select_evidence(const Candidate& c, const Bundle& b, size_t max) {
  std::vector<std::pair<size_t, std::string>> ev = c.evidence;
  std::stable_sort(ev.begin(), ev.end(), [&](const auto& x, const auto& y) {
    const Event& a = b.events[x.first];
    const Event& d = b.events[y.first];
    if (a.has_time() != d.has_time()) return a.has_time();
    return a.time_us < d.time_us;
  });
  std::vector<size_t> chosen;
  std::set<std::string> kinds;
  // Timing records (files without lines) keep a place: they are often the job's only word.
  const size_t room = max - std::min<size_t>(c.files.size(), std::min<size_t>(max / 4, 2));
  for (size_t k = 0; k < ev.size() && chosen.size() < room; ++k)
    if (kinds.insert(b.events[ev[k].first].kind + "@" + b.events[ev[k].first].host).second) chosen.push_back(k);
  for (size_t k = 0; k < ev.size() && chosen.size() < room; ++k)
    if (std::find(chosen.begin(), chosen.end(), k) == chosen.end()) chosen.push_back(k);
  std::sort(chosen.begin(), chosen.end());
  std::vector<Evidence> out;
  for (size_t k : chosen) {
    const Event& e = b.events[ev[k].first];
    out.push_back({e.file, e.line, e.time_us, e.host, e.layer, e.kind, e.message, ev[k].second});
  }
  for (uint32_t f : c.files)
    if (out.size() < max) out.push_back({f, 0, kUnknownTime, b.files[f].host, Layer::nccl, "timing_records", "", "per-collective timing"});
  return out;
}

BlastRadius blast_of(const Candidate& c, const Symptoms& s, const JobModel& job) {
  BlastRadius br;
  std::set<int> ranks(c.ranks.begin(), c.ranks.end());
  if (c.job_related) ranks.insert(s.affected_ranks.begin(), s.affected_ranks.end());
  br.ranks.assign(ranks.begin(), ranks.end());
  std::set<std::string> hosts;
  for (int r : ranks) {
    auto it = job.ranks.find(r);
    if (it != job.ranks.end() && !it->second.host.empty()) hosts.insert(it->second.host);
  }
  if (c.job_related)
    for (const auto& h : s.affected_hosts) hosts.insert(h);
  if (!c.component.host.empty()) hosts.insert(c.component.host);
  br.hosts.assign(hosts.begin(), hosts.end());
  if (c.job_related && !s.process_group.empty()) br.process_groups.push_back(s.process_group);
  if (c.job_related && job.world_comm) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(job.world_comm));
    br.communicators.push_back(buf);
  }
  return br;
}

RootCause to_root_cause(const Candidate& c, const Bundle& b, const Symptoms& s, const JobModel& job,
                        const DiagnoseOptions& o) {
  RootCause rc;
  rc.component = c.component;
  rc.fault = c.fault;
  rc.confidence = std::round(std::clamp(c.score, 0.0, 1.0) * 1000) / 1000;
  rc.summary = c.summary;
  rc.evidence = select_evidence(c, b, o.max_evidence);
  rc.window_start_us = c.first_us;
  rc.window_end_us = c.last_us;
  if (c.job_related && s.onset_us != kUnknownTime) {
    if (rc.window_start_us == kUnknownTime || s.onset_us < rc.window_start_us) rc.window_start_us = s.onset_us;
    rc.window_end_us = std::max(rc.window_end_us, s.last_symptom_us);
  }
  rc.blast = blast_of(c, s, job);
  rc.also_suspect = c.also_suspect;
  return rc;
}

// True when every piece of `c`'s evidence is also `leader`'s: c is another reading of the
// same observations, not a second hypothesis.
bool same_evidence(const Candidate& c, const Candidate& leader) {
  std::set<size_t> lead;
  for (const auto& [event, why] : leader.evidence) lead.insert(event);
  return std::all_of(c.evidence.begin(), c.evidence.end(), [&](const auto& e) { return lead.count(e.first) > 0; });
}

Incident describe(const Symptoms& s, const JobModel& job) {
  Incident in;
  in.present = s.any;
  in.world_size = job.world_size;
  if (!s.any) return in;
  in.onset_us = s.onset_us;
  in.first_symptom_us = s.first_symptom_us;
  in.last_symptom_us = s.last_symptom_us;
  in.process_group = s.process_group;
  in.seq = s.stuck_seq;
  in.op = s.stuck_op;
  int timed_out = 0, errored = 0;
  for (auto& [r, rs] : s.ranks) {
    timed_out += rs.timed_out;
    errored += rs.errored;
  }
  in.ranks_reporting = int(s.affected_ranks.size());
  for (auto& [r, why] : s.culprits) in.stopped_first.push_back(r);
  if (in.stopped_first.empty())
    for (int r : s.missing_ranks) in.stopped_first.push_back(r);
  if (in.stopped_first.empty()) {
    int64_t first = kUnknownTime;
    int who = -1;
    for (auto& [r, rs] : s.ranks)
      if (rs.first_error_us != kUnknownTime && (first == kUnknownTime || rs.first_error_us < first))
        first = rs.first_error_us, who = r;
    if (who >= 0) in.stopped_first.push_back(who);
  }
  in.kind = timed_out > 0 ? "hang" : errored > 0 ? "errors" : s.straggler_rank >= 0 ? "slowdown" : "errors";
  std::string what = in.kind == "hang" ? std::to_string(timed_out) + " ranks timed out" +
                                             (in.seq >= 0 ? " in " + in.op + " seq " + std::to_string(in.seq) : "")
                     : in.kind == "slowdown" ? "collectives slowed by one rank"
                                             : std::to_string(errored) + " ranks reported errors";
  in.summary = what + (in.process_group.empty() ? "" : " (process group " + in.process_group + ")");
  return in;
}

// A GPU, process, host or link on the racks a failed plant part serves, which the job felt, is
// the plant's victim: the throttled GPU, the rank that fell behind, the host the leak shut down.
void demote_plant_victims(std::vector<Candidate>& all, const JobModel& job) {
  for (const Candidate& plant : all) {
    if (!plant.group.starts_with("plant:") || !plant.job_related || plant.score < 0.5) continue;
    std::set<std::string> hosts;
    for (int r : plant.ranks)
      if (auto it = job.ranks.find(r); it != job.ranks.end()) hosts.insert(it->second.host);
    for (Candidate& c : all) {
      if (c.group.starts_with("plant:")) continue;
      const bool shares = hosts.count(c.component.host) > 0 ||
                          std::any_of(c.ranks.begin(), c.ranks.end(), [&](int r) { return plant.ranks.count(r) > 0; });
      // The throttling under a failed plant part is the plant's evidence, not a GPU fault of its own.
      if (shares) c.score *= c.fault == "gpu_thermal" || c.fault == "gpu_power_capped" ? 0 : 0.5;
    }
  }
}

}  // namespace

Diagnosis diagnose(Bundle& b, const DiagnoseOptions& o) {
  Diagnosis d;
  JobModel job = build_job_model(b);
  d.clock_offsets_s = estimate_clock_offsets(b, job);
  apply_clock_offsets(b, d.clock_offsets_s);
  Symptoms s = find_symptoms(b, job);
  std::vector<Candidate> all;
  for (auto&& list : {gpu_candidates(b, job, s), network_candidates(b, job, s), process_candidates(b, job, s),
                      host_candidates(b, job, s), facility_candidates(b, job, s), throttle_candidates(b, job, s)})
    for (auto& c : list) all.push_back(c);
  demote_plant_victims(all, job);
  // A process singled out by the job whose GPU or NIC failed is a victim, not the cause.
  for (Candidate& c : all) {
    if (c.component.kind != ComponentKind::process || c.fault == "gpu_straggler") continue;
    for (const Candidate& hw : all) {
      if (hw.component.kind == ComponentKind::process || hw.score < 0.45) continue;
      bool same_rank = std::any_of(c.ranks.begin(), c.ranks.end(), [&](int r) { return hw.ranks.count(r) > 0; });
      bool same_host = !c.component.host.empty() && c.component.host == hw.component.host;
      if (same_rank || (same_host && c.fault == "rank_silent")) {
        c.score *= 0.5;
        break;
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
  // The best reading of each physical thing leads. Its other readings on the same evidence are
  // folded into it (named, not ranked again); readings with evidence of their own follow at
  // lower confidence.
  std::map<std::string, size_t> leader_of_group;
  std::vector<Candidate> ranked;
  for (Candidate& c : all) {
    auto [it, fresh] = leader_of_group.emplace(c.group, ranked.size());
    if (!fresh) {
      Candidate& leader = ranked[it->second];
      if (!c.group.empty() && same_evidence(c, leader)) {
        if (c.component != leader.component) leader.also_suspect.push_back(c.component);
        continue;
      }
      c.score = std::min(c.score, leader.score * 0.6);
    }
    ranked.push_back(std::move(c));
  }
  all = std::move(ranked);
  std::stable_sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
  const bool judge_job = s.any || !job.has_job_logs;
  for (const Candidate& c : all) {
    if (c.score < o.min_confidence) continue;
    RootCause rc = to_root_cause(c, b, s, job, o);
    if (c.deliberate && !s.any) d.findings.push_back(std::move(rc));
    else if (judge_job && c.job_related) d.root_causes.push_back(std::move(rc));
    else if (judge_job && !job.has_job_logs) d.root_causes.push_back(std::move(rc));
    else d.findings.push_back(std::move(rc));
    if (d.root_causes.size() >= 10) break;
  }
  d.incident = describe(s, job);
  return d;
}

std::string compress_ranks(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(r[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(r[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace astral::monitor
