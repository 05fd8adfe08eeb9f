// Facility root causes: a plant fault (cooling loss, power capping, a leak) named at the part that
// failed, joined to the job through the site layout. The chain is read layer by layer:
//   plant     facility alarms (pump failed, low flow, warm supply, rectifier lost, rack capped,
//             leak), placed in the layout by the facility reader (component.site, keys.racks and
//             keys.hosts) or, failing that, by the bundle's own site layout;
//   GPUs      throttling on the hosts those racks hold, by its specific cause: NVML alarms,
//             nvidia-smi dumps, dcgm clock-event bits, the kernel's CPU thermal interrupts;
//   job       the straggler, the ranks that fell behind or went silent, the step time creeping.
// A plant fault no job felt stays a facility alarm (a finding). Throttling with a healthy plant is
// the GPU's own fault (a failed cold plate, a bad fan), named on the rank that fell behind.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "analysis.hpp"
#include "candidates_net.hpp"
#include "facility_faults.hpp"

namespace astral::monitor {

namespace {

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    if (comma != 0) out.emplace_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// Where a plant alarm sits: its site component (or rack) and the hosts that depend on it.
struct Placement {
  std::string site_id;
  std::vector<std::string> racks;
  std::set<std::string> hosts;  // canonical names
};

Placement place(const Event& e, const Bundle& b) {
  Placement p;
  p.site_id = std::string(e.attr("site"));
  p.racks = split_list(e.attr("racks"));
  for (const std::string& h : split_list(e.attr("hosts"))) p.hosts.insert(b.canonical_host(h));
  if (b.site.empty()) return p;
  if (p.site_id.empty())
    if (const facility::SiteComponent* c = b.site.component_for(e.host, e.component.device)) p.site_id = c->id;
  if (p.site_id.empty()) return p;
  if (p.racks.empty()) p.racks = b.site.rack(p.site_id) ? std::vector<std::string>{p.site_id} : b.site.racks_served_by(p.site_id);
  if (p.hosts.empty())
    for (const std::string& r : p.racks)
      if (const facility::SiteRack* rack = b.site.rack(r))
        for (const std::string& h : rack->hosts) p.hosts.insert(b.canonical_host(h));
  return p;
}

// The upstream equipment of the alarm's component (a CDU's loop), named for operators.
std::vector<Component> upstream(const Bundle& b, const Placement& p) {
  std::vector<Component> out;
  const facility::SiteComponent* c = b.site.component(p.site_id);
  if (!c) return out;
  std::set<std::string> seen{c->id};
  std::vector<std::string> todo = c->fed_by;
  while (!todo.empty() && out.size() < 4) {
    std::string id = todo.back();
    todo.pop_back();
    const facility::SiteComponent* up = b.site.component(id);
    if (!up || !seen.insert(id).second) continue;
    auto kind = parse_component_kind(up->kind);
    out.push_back({kind ? *kind : ComponentKind::none, up->source, up->entity.empty() ? up->id : up->entity, "", "", -1});
    todo.insert(todo.end(), up->fed_by.begin(), up->fed_by.end());
  }
  return out;
}

std::string rack_list(const std::vector<std::string>& racks) {
  std::string out;
  for (size_t i = 0; i < racks.size() && i < 6; ++i) out += (i ? ", " : "") + racks[i];
  if (racks.size() > 6) out += ", +" + std::to_string(racks.size() - 6);
  return out;
}

struct PlantRecord {
  Candidate c;
  NoisyOr strength;
  Placement where;
  std::string alarm_kind;  // the strongest alarm's kind (pump_failed, rectifier_fault, ...)
};

// Job-side evidence for one plant record: throttling of the matching cause on its hosts, hosts
// that went down, the ranks that fell behind there, and the step time creeping.
struct JobLink {
  std::set<std::string> throttled_hosts, down_hosts, job_hosts;
  std::set<int> ranks, culprit_ranks, silent_ranks;
};

JobLink link_to_job(PlantRecord& r, const Bundle& b, const JobModel& job, const Symptoms& s,
                    const std::vector<size_t>& step_creep) {
  JobLink l;
  const PlantFault fault = plant_fault_kind(r.c.fault);
  for (const std::string& h : r.where.hosts)
    if (job.is_job_host(h)) l.job_hosts.insert(h);
  for (const std::string& h : l.job_hosts)
    for (int rank : job.ranks_on(h)) {
      l.ranks.insert(rank);
      if (s.culprits.count(rank) || s.missing_ranks.count(rank) || s.straggler_rank == rank) l.culprit_ranks.insert(rank);
      // A rack shut down silences whole hosts, more than the incident's own "missing" rule (a
      // quarter of the world at most) lets through: ranks here that said nothing while others timed out.
      auto st = s.ranks.find(rank);
      const bool reported = st != s.ranks.end() && (st->second.timed_out || st->second.last_enqueued >= 0);
      if (fault == PlantFault::leak && !s.ranks.empty() && !reported) l.silent_ranks.insert(rank);
    }
  l.culprit_ranks.insert(l.silent_ranks.begin(), l.silent_ranks.end());
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (!l.job_hosts.count(e.host) || time_relevance(e.time_us, e.time_confidence_s, s) < 0.5) continue;
    const ThrottleCause cause = throttle_cause(e);
    if (cause != ThrottleCause::none && throttle_explained_by(cause, fault)) {
      // Every throttled host once, then more lines while the record is short.
      if (l.throttled_hosts.insert(e.host).second || r.c.evidence.size() < 24)
        add_evidence(r.c, b, i, std::string(throttle_why(cause)) + " on " + e.host + ", a host this equipment serves");
    } else if (fault == PlantFault::leak && is_host_down(e)) {
      l.down_hosts.insert(e.host);
      add_evidence(r.c, b, i, "host " + e.host + " of the leaking rack went down");
    }
  }
  for (int rank : l.culprit_ranks) {
    auto it = s.culprits.find(rank);
    if (it == s.culprits.end()) continue;
    for (const auto& [event, why] : it->second) add_evidence(r.c, b, event, "rank " + std::to_string(rank) + ": " + why);
  }
  if (s.straggler_rank >= 0 && l.culprit_ranks.count(s.straggler_rank))
    r.c.files.insert(r.c.files.end(), s.straggler_files.begin(), s.straggler_files.end());
  if (!l.throttled_hosts.empty() || !l.down_hosts.empty())
    for (size_t i : step_creep) add_evidence(r.c, b, i, "the job's step time crept up");
  for (size_t k = 0, n = 0; k < s.events.size() && n < 3; ++k)
    if (b.events[s.events[k]].kind == "watchdog_timeout") add_evidence(r.c, b, s.events[k], "the job timed out"), ++n;
  return l;
}

void score_plant(PlantRecord& r, const JobLink& l, const Symptoms& s) {
  const PlantFault fault = plant_fault_kind(r.c.fault);
  const double plant = r.strength.value();
  r.c.ranks = l.ranks;
  r.c.job_related = s.any && !l.job_hosts.empty();
  // A leak is felt as hosts going down: their own last words, or their ranks falling silent.
  const bool felt = fault == PlantFault::leak ? !l.down_hosts.empty() || !l.silent_ranks.empty() : !l.throttled_hosts.empty();
  double link = 0.45 + (felt ? 0.3 : 0) + (l.culprit_ranks.empty() ? 0 : 0.25);
  r.c.score = r.c.job_related ? plant * std::min(1.0, link) : plant;
  std::string what = std::string(plant_fault_name(fault));
  std::string where = r.where.site_id.empty() ? "" : " of " + r.where.site_id;
  std::string racks = r.where.racks.empty() ? "" : " (" + std::string(fault == PlantFault::power ? "powering" : "cooling") +
                                                      " racks " + rack_list(r.where.racks) + ")";
  if (fault == PlantFault::leak) racks = r.where.racks.empty() ? "" : " (racks " + rack_list(r.where.racks) + ")";
  r.c.summary = to_string(r.c.component.kind).empty() ? "facility" : std::string(to_string(r.c.component.kind));
  r.c.summary += " " + r.c.component.device + where + racks + ": " + what + " (" + r.alarm_kind + ")";
  if (!r.c.job_related) {
    r.c.summary += s.any ? "; no host of the job depends on it" : "; no job suffered from it";
    return;
  }
  if (felt)
    r.c.summary += fault == PlantFault::leak ? "; the job's hosts there went down"
                                             : "; GPUs throttled on " + std::to_string(l.throttled_hosts.size()) +
                                                   " job hosts there";
  if (!l.culprit_ranks.empty())
    r.c.summary += "; rank " + compress_ranks(std::vector<int>(l.culprit_ranks.begin(), l.culprit_ranks.end())) +
                   " there fell behind";
}

// Step-time lines of the job whose latest value exceeds the earlier median by 15 % or more.
std::vector<size_t> step_time_creep(const Bundle& b) {
  std::map<std::string, std::vector<size_t>> by_file_host;
  for (size_t i = 0; i < b.events.size(); ++i)
    // Undated trainer lines borrow a neighbour's time (confidence of half an hour): not evidence of when.
    if (b.events[i].kind == "step_time" && b.events[i].time_confidence_s <= 300) by_file_host[b.events[i].host + "|" + std::to_string(b.events[i].file)].push_back(i);
  std::vector<size_t> out;
  for (auto& [key, idx] : by_file_host) {
    if (idx.size() < 4) continue;
    std::vector<double> v;
    for (size_t i : idx) v.push_back(std::atof(std::string(b.events[i].attr("seconds")).c_str()));
    std::vector<double> early(v.begin(), v.begin() + long(v.size() / 2));
    std::nth_element(early.begin(), early.begin() + long(early.size() / 2), early.end());
    const double base = early[early.size() / 2];
    if (base > 0 && v.back() >= 1.15 * base) out.push_back(idx.back());
    if (out.size() >= 2) break;
  }
  return out;
}

}  // namespace

std::vector<Candidate> facility_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::map<std::string, PlantRecord> records;  // fault|site id (or host|device)
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    const PlantAlarm alarm = plant_alarm(e);
    if (alarm.fault == PlantFault::none) continue;
    Placement where = place(e, b);
    const std::string fault(plant_fault_id(alarm.fault));
    const std::string key = fault + "|" + (where.site_id.empty() ? e.host + "|" + e.component.device : where.site_id);
    PlantRecord& r = records[key];
    const double w = alarm.weight * time_relevance(e.time_us, e.time_confidence_s, s);
    if (r.c.group.empty() || w > r.strength.best) {
      // A rack manager's own alarm (a leak in a tray) is about the rack, whatever the BMC calls it.
      const ComponentKind kind = e.attr("site_kind") == "rack" ? ComponentKind::rack : e.component.kind;
      r.c.component = {kind, e.host, e.component.device, "", "", -1};
      r.alarm_kind = e.kind;
    }
    if (r.c.group.empty()) {
      r.c.group = "plant:" + key;
      r.c.fault = fault;
      r.where = std::move(where);
    }
    r.strength.add(w, fault);
    add_evidence(r.c, b, i, std::string(plant_fault_name(alarm.fault)) + " reported by the plant");
  }
  std::vector<Candidate> out;
  if (records.empty()) return out;
  const std::vector<size_t> creep = step_time_creep(b);
  for (auto& [key, r] : records) {
    if (r.strength.value() < 0.15) continue;
    const JobLink l = link_to_job(r, b, job, s, creep);
    score_plant(r, l, s);
    r.c.also_suspect = upstream(b, r.where);
    out.push_back(std::move(r.c));
  }
  return out;
}

std::vector<Candidate> throttle_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::vector<Candidate> out;
  std::vector<int> behind(s.missing_ranks.begin(), s.missing_ranks.end());
  for (const auto& [rank, why] : s.culprits) behind.push_back(rank);
  if (s.straggler_rank >= 0) behind.push_back(s.straggler_rank);
  std::set<std::string> done;
  for (int rank : behind) {
    auto it = job.ranks.find(rank);
    if (it == job.ranks.end() || it->second.host.empty() || !done.insert(it->second.host).second) continue;
    const RankInfo& ri = it->second;
    Candidate c;
    c.component = {ri.gpu.empty() ? ComponentKind::host : ComponentKind::gpu, ri.host, ri.gpu, "", "", rank};
    c.group = ri.gpu.empty() ? "host:" + ri.host : "gpu:" + ri.host + "|" + ri.gpu;
    c.ranks.insert(rank);
    ThrottleCause seen = ThrottleCause::none;
    for (size_t i = 0; i < b.events.size(); ++i) {
      const Event& e = b.events[i];
      if (e.host != ri.host || time_relevance(e.time_us, e.time_confidence_s, s) < 0.5) continue;
      const ThrottleCause cause = throttle_cause(e);
      if (cause == ThrottleCause::none) continue;
      // Another GPU of the host throttling says less about this rank's than its own does.
      if (e.component.kind == ComponentKind::gpu && !ri.gpu.empty() && e.component.device != ri.gpu &&
          e.component.device.find(':') != std::string::npos)
        continue;
      if (seen == ThrottleCause::none || cause == ThrottleCause::thermal) seen = cause;
      add_evidence(c, b, i, std::string(throttle_why(cause)) + " where rank " + std::to_string(rank) + " runs");
    }
    if (c.evidence.empty()) continue;
    c.fault = seen == ThrottleCause::power ? "gpu_power_capped" : "gpu_thermal";
    // The throttling explains the straggler: it leads the straggler's own reading of that GPU.
    c.score = rank == s.straggler_rank ? std::min(0.99, 0.5 + 0.5 * s.straggler_score) : 0.75;
    c.job_related = s.any;
    c.summary = "GPU " + (ri.gpu.empty() ? std::string("?") : ri.gpu) + " on " + ri.host + " (rank " + std::to_string(rank) +
                "): clocks held down (" + std::string(throttle_why(seen)) + ") with no plant fault behind it";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace astral::monitor
