// Candidates in the network: each cable (host NIC port <-> leaf switch port) collects what both
// ends, NCCL and the metrics say about it (candidates_net_collect.cpp); the mix of evidence
// decides what failed:
//   transceiver alarms, FEC/BER errors or climbing error counters -> optic (at the end that shows them)
//   NIC-internal errors (health, fatal events)                    -> nic
//   two or more down/up transitions                               -> link (flapping)
//   one down that stays down                                      -> nic (host saw it) or switch_port (only the switch)
// Many ports of one switch going down together, or the switch rebooting, is the switch.
// Retry-exceeded errors (IB status 12) are edges between two NICs; the NIC on most edges with
// distinct peers is the common end.
#include <algorithm>
#include <cstdlib>

#include "candidates_net.hpp"
#include "names.hpp"

namespace astral::monitor {

void TransitionCount::add(int64_t t) {
  if (t != kUnknownTime && last != kUnknownTime && std::llabs(t - last) < 1'000'000) return;
  ++n;
  if (t != kUnknownTime) last = t;
}

CableEvidence& NetEvidence::for_cable(const Cable& cable) {
  CableEvidence& r = records["cable:" + names::canonical_host(cable.sw.switch_name) + "|" + cable.sw.port];
  r.host = names::canonical_host(cable.nic.host);
  r.nic = cable.nic.nic;
  r.sw = cable.sw.switch_name;
  r.port = cable.sw.port;
  r.host_known = r.switch_known = true;
  return r;
}

CableEvidence& NetEvidence::for_nic(const std::string& host, const std::string& nic) {
  if (const Cable* cable = b.fabric.cable_of_nic(host, nic)) return for_cable(*cable);
  CableEvidence& r = records["nic:" + host + "|" + nic];
  r.host = host;
  r.nic = nic;
  r.host_known = true;
  return r;
}

CableEvidence& NetEvidence::for_switch_port(const std::string& sw, const std::string& port) {
  CableEvidence& r = records["sp:" + sw + "|" + names::port_key(port)];
  r.sw = sw;
  r.port = port;
  r.switch_known = true;
  return r;
}

double nic_job_link(const JobModel& job, const Symptoms& s, const std::string& host, const std::string& nic) {
  auto it = job.ranks_of_nic.find(host + "|" + nic);
  if (it != job.ranks_of_nic.end())
    for (int r : it->second)
      if (s.culprits.count(r) || s.missing_ranks.count(r) || (s.ranks.count(r) && s.ranks.at(r).errored)) return 1.0;
  if (it != job.ranks_of_nic.end() && !it->second.empty()) return 0.95;
  if (job.is_job_host(host)) return 0.8;
  if (!job.has_job_logs) return 0.8;
  return 0.25;
}

namespace {

// The fault a record's evidence points at, and the part to replace.
void classify_record(CableEvidence& r) {
  Candidate& c = r.c;
  const int host_downs = std::max(r.kernel_downs.n, r.nccl_downs.n);
  const int transitions = std::max({host_downs, r.switch_downs.n, r.metric_downs > 0 ? 1 : 0}) + r.flaps;
  const bool stays_down = r.last_down != kUnknownTime && (r.last_up == kUnknownTime || r.last_up < r.last_down);
  const Component host_nic{ComponentKind::nic, r.host, r.nic, "", "", -1};
  const Component link{ComponentKind::link, r.host, r.nic, r.sw, r.port, -1};
  const Component sport{ComponentKind::switch_port, "", "", r.sw, r.port, -1};
  const int optic_on_switch = r.optic_switch + r.ber + r.metric_errors_switch;
  if (r.admin > 0) {
    c.component = sport, c.fault = "port_admin_down";
  } else if (optic_on_switch > 0 && r.switch_known) {
    // The physical evidence sits on the switch side of the cable: the switch port's optic.
    c.component = {ComponentKind::optic, "", "", r.sw, r.port, -1};
    c.fault = r.optic_switch == 0 ? "high_ber" : "optic_degraded";
  } else if (r.optic_host + r.metric_errors_host > 0 && r.host_known) {
    c.component = {ComponentKind::optic, r.host, r.nic, "", "", -1};
    c.fault = r.optic_host > 0 ? "optic_degraded" : "high_ber";
  } else if (r.nic_internal > 0 && r.host_known) {
    c.component = host_nic, c.fault = "nic_failure";
  } else if (transitions >= 2) {
    c.component = r.host_known && r.switch_known ? link : r.host_known ? host_nic : sport;
    if (c.component.kind == ComponentKind::nic) c.component.kind = ComponentKind::link;
    c.fault = "link_flap";
  } else if (transitions == 1 && stays_down) {
    c.component = r.host_known && host_downs > 0 ? host_nic : r.switch_known ? sport : host_nic;
    c.fault = c.component.kind == ComponentKind::nic ? "nic_down" : "port_down";
  } else if (transitions == 1) {
    c.component = r.host_known && r.switch_known ? link : r.host_known ? host_nic : sport;
    c.fault = "link_flap";
  } else if (r.host_known) {
    c.component = host_nic, c.fault = r.async ? "nic_errors" : "network_path_errors";
  } else {
    c.component = sport, c.fault = "port_errors";
  }
}

double record_strength(const CableEvidence& r) {
  const int host_downs = std::max(r.kernel_downs.n, r.nccl_downs.n);
  const double physical = r.physical.value();
  const double edge = r.edges > 0 ? std::min(1.0, 0.35 + 0.12 * double(r.peers.size()) + 0.05 * r.edges) : 0.0;
  const bool host_saw = host_downs > 0 || r.optic_host || r.nic_internal || r.metric_errors_host;
  const bool switch_saw = r.switch_downs.n || r.flaps || r.optic_switch || r.ber || r.metric_errors_switch;
  const double both_sides = host_saw && switch_saw ? 0.08 : 0.0;
  if (physical == 0) return 0.75 * edge;  // NCCL's word alone: the common end of the errors
  return std::min(0.98, 0.7 * physical + 0.3 * edge + both_sides + (edge > 0 ? 0.1 : 0.0));
}

}  // namespace

std::vector<Candidate> score_network_evidence(NetEvidence& ev) {
  std::vector<Candidate> out = std::move(ev.switch_candidates);
  const JobModel& job = ev.job;
  const Symptoms& s = ev.s;
  for (auto& [key, r] : ev.records) {
    classify_record(r);
    Candidate& c = r.c;
    c.group = "cable:" + key;
    double strength = record_strength(r);
    double linkf = r.host_known ? nic_job_link(job, s, r.host, r.nic) : (job.has_job_logs ? 0.3 : 0.8);
    if (ev.absorbed.count(key)) strength *= 0.35;
    c.score = strength * (s.any ? linkf : 1.0);
    c.score += (1.0 - c.score) * r.transfer_support;
    c.job_related = s.any && linkf > 0.3;
    if (r.host_known)
      if (auto it = job.ranks_of_nic.find(r.host + "|" + r.nic); it != job.ranks_of_nic.end())
        c.ranks.insert(it->second.begin(), it->second.end());
    std::string where = r.host_known ? r.nic + " on " + r.host : "";
    if (r.switch_known) where += (where.empty() ? "" : " <-> ") + r.sw + " " + r.port;
    c.summary = c.fault + ": " + where;
    c.deliberate = c.fault == "port_admin_down";
    if (c.score < 0.05 || c.evidence.empty()) continue;
    out.push_back(c);
    // The same cable seen as its other parts, for operators who replace by kind.
    const Component link{ComponentKind::link, r.host, r.nic, r.sw, r.port, -1};
    if (c.component.kind != ComponentKind::link && r.host_known && r.switch_known && c.fault != "port_admin_down") {
      Candidate alt = c;
      alt.component = link;
      alt.fault = "link_suspect";
      alt.score = c.score * 0.55;
      out.push_back(std::move(alt));
    }
    if (c.component.kind == ComponentKind::link) {
      Candidate alt = c;
      alt.component = r.host_known ? Component{ComponentKind::nic, r.host, r.nic, "", "", -1}
                                   : Component{ComponentKind::switch_port, "", "", r.sw, r.port, -1};
      alt.fault = "nic_suspect";
      alt.score = c.score * 0.5;
      out.push_back(std::move(alt));
    }
  }
  return out;
}

std::vector<Candidate> network_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  NetEvidence ev{b, job, s, {}, {}, {}, {}};
  collect_nic_evidence(ev);
  collect_cable_evidence(ev);
  collect_unresolved_nic_evidence(ev);
  collect_metric_evidence(ev);
  collect_edge_evidence(ev);
  collect_switch_evidence(ev);
  collect_transfer_evidence(ev);
  return score_network_evidence(ev);
}

}  // namespace astral::monitor
