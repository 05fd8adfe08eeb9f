// Candidates in the network: each cable (host NIC port <-> leaf switch port) collects what both
// ends and NCCL say about it; the mix of evidence decides what failed:
//   transceiver alarms or FEC/BER errors        -> optic (at the end that reports them)
//   NIC-internal errors (health, fatal events)  -> nic
//   two or more down/up transitions             -> link (flapping)
//   one down that stays down                    -> nic (host saw it) or switch_port (only the switch)
// Many ports of one switch going down together, or the switch rebooting, is the switch.
// Retry-exceeded errors (IB status 12) are edges between two NICs; the NIC on most edges with
// distinct peers is the common end.
#include <algorithm>
#include <map>
#include <set>

#include "analysis.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

// Transitions reported by one source; a second report within a second is the same transition.
struct Count {
  int n = 0;
  int64_t last = kUnknownTime;
  void add(int64_t t) {
    if (t != kUnknownTime && last != kUnknownTime && std::llabs(t - last) < 1'000'000) return;
    ++n;
    if (t != kUnknownTime) last = t;
  }
};

struct Cluster {
  std::string host, nic, sw, port;
  bool host_known = false, switch_known = false;
  Count kernel_downs, nccl_downs, switch_downs;
  int kernel_ups = 0, nccl_ups = 0, switch_ups = 0;
  int flaps = 0, nic_internal = 0, optic_switch = 0, optic_host = 0, ber = 0, admin = 0, async = 0;
  int64_t last_down = kUnknownTime, last_up = kUnknownTime;
  std::vector<int64_t> down_times;
  NoisyOr physical;
  double edges = 0;
  std::set<std::string> peers;
  Candidate c;
};

const std::set<std::string>& host_kinds() {
  static const std::set<std::string> k = {"nic_link_down", "nic_link_up",  "ib_port_error", "ib_port_active",
                                          "ib_fatal_event", "nic_health",  "nic_fatal",     "nic_power",
                                          "nic_command_timeout", "nic_temperature", "optic_event", "ib_device_failed"};
  return k;
}
const std::set<std::string>& switch_kinds() {
  static const std::set<std::string> k = {"port_down", "port_up", "port_flap", "port_ber",
                                          "optic_alarm", "port_admin_down", "port_admin_up"};
  return k;
}
bool is_edge(const Event& e) {
  return e.kind == "retry_exceeded" || e.kind == "rnr_retry_exceeded" || e.kind == "ib_completion_error" ||
         e.kind == "ib_flush_error" || (e.kind == "nccl_socket_error" && !e.attr("peer_ip").empty());
}

// The NIC on `peer` on the same rail as `nic` on `host` (rail-optimised fabrics).
std::string same_rail(const JobModel& job, const Bundle& b, const std::string& host, const std::string& nic,
                      const std::string& peer) {
  auto mine = job.nics_of_host.find(host);
  auto theirs = job.nics_of_host.find(peer);
  if (mine != job.nics_of_host.end() && theirs != job.nics_of_host.end()) {
    auto it = std::find(mine->second.begin(), mine->second.end(), nic);
    size_t idx = size_t(it - mine->second.begin());
    if (it != mine->second.end() && idx < theirs->second.size()) return theirs->second[idx];
  }
  if (const Cable* c = b.fabric.cable_of_nic(host, nic); c && c->nic.rail >= 0)
    for (const Cable* p : b.fabric.cables_of_host(peer))
      if (p->nic.rail == c->nic.rail) return p->nic.nic;
  return nic;
}

double job_link(const JobModel& job, const Symptoms& s, const std::string& host, const std::string& nic) {
  auto it = job.ranks_of_nic.find(host + "|" + nic);
  if (it != job.ranks_of_nic.end())
    for (int r : it->second)
      if (s.culprits.count(r) || s.missing_ranks.count(r) || (s.ranks.count(r) && s.ranks.at(r).errored)) return 1.0;
  if (it != job.ranks_of_nic.end() && !it->second.empty()) return 0.95;
  if (job.is_job_host(host)) return 0.8;
  if (!job.has_job_logs) return 0.8;
  return 0.25;
}

}  // namespace

std::vector<Candidate> network_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::map<std::string, Cluster> clusters;
  std::vector<size_t> unresolved;  // host-side events whose NIC has no NCCL name
  auto cluster_for_cable = [&](const Cable& cable) -> Cluster& {
    Cluster& cl = clusters["cable:" + names::canonical_host(cable.sw.switch_name) + "|" + cable.sw.port];
    cl.host = names::canonical_host(cable.nic.host);
    cl.nic = cable.nic.nic;
    cl.sw = cable.sw.switch_name;
    cl.port = cable.sw.port;
    cl.host_known = cl.switch_known = true;
    return cl;
  };
  auto cluster_for_nic = [&](const std::string& host, const std::string& nic) -> Cluster& {
    if (const Cable* cable = b.fabric.cable_of_nic(host, nic)) return cluster_for_cable(*cable);
    Cluster& cl = clusters["nic:" + host + "|" + nic];
    cl.host = host;
    cl.nic = nic;
    cl.host_known = true;
    return cl;
  };
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    const double rel = time_relevance(e.time_us, e.time_confidence_s, s);
    // Old news (boot-time link-ups, a flap hours before) says nothing about this incident.
    const bool up = e.kind == "nic_link_up" || e.kind == "ib_port_active" || e.kind == "port_up" ||
                    e.kind == "port_admin_up";
    if (rel < 0.3 || (up && rel < 0.5)) continue;
    if (host_kinds().count(e.kind)) {
      std::string nic = job.nic_of(e);
      if (nic.empty()) {
        unresolved.push_back(i);
        continue;
      }
      Cluster& cl = cluster_for_nic(e.host, nic);
      const std::string& k = e.kind;
      if (k == "nic_link_down") cl.kernel_downs.add(e.time_us), cl.last_down = std::max(cl.last_down, e.time_us), cl.physical.add(0.6 * rel, "down");
      else if (k == "nic_link_up") ++cl.kernel_ups, cl.last_up = std::max(cl.last_up, e.time_us);
      else if (k == "ib_port_error") cl.nccl_downs.add(e.time_us), cl.last_down = std::max(cl.last_down, e.time_us), cl.physical.add(0.5 * rel, "down");
      else if (k == "ib_port_active") ++cl.nccl_ups, cl.last_up = std::max(cl.last_up, e.time_us);
      else if (k == "optic_event") {
        if (e.severity >= Severity::error) ++cl.optic_host, cl.physical.add(0.6 * rel, "optic");
        else if (e.severity == Severity::warning) cl.physical.add(0.3 * rel, "optic");
      } else if (k == "ib_device_failed") {
        ++cl.async, cl.physical.add(0.5 * rel, "down");
      } else if (k != "nic_temperature") {
        ++cl.nic_internal, cl.physical.add(0.8 * rel, "nic");
      } else {
        cl.physical.add(0.2 * rel, "nic");
      }
      if (k == "nic_link_down" || k == "ib_port_error") cl.down_times.push_back(e.time_us);
      add_evidence(cl.c, b, i, e.layer == Layer::nccl ? "NCCL saw the port event" : "host kernel: NIC/port event");
    } else if (switch_kinds().count(e.kind)) {
      const Cable* cable = b.fabric.cable_at(e.component.switch_name, e.component.port);
      Cluster* clp;
      if (cable) {
        clp = &cluster_for_cable(*cable);
      } else {
        clp = &clusters["sp:" + e.component.switch_name + "|" + names::port_key(e.component.port)];
        clp->sw = e.component.switch_name;
        clp->port = e.component.port;
        clp->switch_known = true;
      }
      Cluster& cl = *clp;
      const std::string& k = e.kind;
      if (k == "port_down") cl.switch_downs.add(e.time_us), cl.last_down = std::max(cl.last_down, e.time_us), cl.physical.add(0.6 * rel, "down");
      else if (k == "port_up") ++cl.switch_ups, cl.last_up = std::max(cl.last_up, e.time_us);
      else if (k == "port_flap") ++cl.flaps, cl.physical.add(0.7 * rel, "flap");
      else if (k == "port_ber") {
        if (e.severity >= Severity::warning) ++cl.ber;
        cl.physical.add((e.severity >= Severity::error ? 0.6 : 0.3) * rel, "optic");
      } else if (k == "optic_alarm") {
        if (e.severity >= Severity::warning) ++cl.optic_switch;
        cl.physical.add((e.severity >= Severity::error ? 0.6 : e.severity == Severity::warning ? 0.35 : 0.05) * rel,
                        "optic");
      } else if (k == "port_admin_down") {
        ++cl.admin, cl.physical.add(0.5 * rel, "admin");
      }
      if (k == "port_down" || k == "port_flap") cl.down_times.push_back(e.time_us);
      if (k != "port_admin_up") add_evidence(cl.c, b, i, "switch: port event");
    }
  }
  // Kernel events naming a netdev NCCL never named: the host's only troubled NIC, if one.
  std::map<std::string, std::vector<Cluster*>> clusters_of_host;
  for (auto& [key, cl] : clusters)
    if (cl.host_known) clusters_of_host[cl.host].push_back(&cl);
  for (size_t i : unresolved) {
    const Event& e = b.events[i];
    if (e.kind == "nic_link_up") continue;  // recoveries of unnamed NICs prove nothing alone
    const std::vector<Cluster*>& on_host = clusters_of_host[e.host];
    Cluster* cl = on_host.size() == 1 ? on_host[0] : nullptr;
    if (!cl) {
      std::string dev = e.component.device.empty() ? std::string(e.attr("netdev")) : e.component.device;
      cl = &clusters["nic:" + e.host + "|" + dev];
      cl->host = e.host;
      cl->nic = dev;
      cl->host_known = true;
    }
    const double rel = time_relevance(e.time_us, e.time_confidence_s, s);
    if (e.kind == "nic_link_down") cl->kernel_downs.add(e.time_us), cl->last_down = std::max(cl->last_down, e.time_us), cl->physical.add(0.6 * rel, "down");
    else if (e.kind == "nic_link_up") ++cl->kernel_ups;
    else if (e.kind == "optic_event" && e.severity >= Severity::error) ++cl->optic_host, cl->physical.add(0.6 * rel, "optic");
    else if (e.kind != "nic_link_up" && e.kind != "optic_event") ++cl->nic_internal, cl->physical.add(0.7 * rel, "nic");
    add_evidence(cl->c, b, i, "host kernel: NIC/port event");
  }
  // Retry-exceeded and friends: edges between two NICs.
  std::map<std::string, std::pair<double, std::set<std::string>>> votes;  // "host|nic" -> (weight, peers)
  std::map<std::string, std::vector<size_t>> edge_events;
  for (size_t i : s.events) {
    const Event& e = b.events[i];
    if (!is_edge(e)) continue;
    std::string nic = job.nic_of(e);
    std::string peer = b.canonical_host(e.attr("peer_ip"));
    double w = e.kind == "ib_flush_error" || e.kind == "nccl_socket_error" ? 0.5 : 1.0;
    if (!nic.empty()) {
      auto& v = votes[e.host + "|" + nic];
      v.first += w;
      if (!peer.empty()) v.second.insert(peer);
      edge_events[e.host + "|" + nic].push_back(i);
    }
    if (!peer.empty() && peer != e.host && !names::is_ip_address(peer)) {
      std::string their = nic.empty() ? "" : same_rail(job, b, e.host, nic, peer);
      if (their.empty()) continue;
      auto& v = votes[peer + "|" + their];
      v.first += w;
      v.second.insert(e.host);
      edge_events[peer + "|" + their].push_back(i);
    }
  }
  size_t max_peers = 0;
  for (auto& [key, v] : votes) max_peers = std::max(max_peers, v.second.size());
  std::map<std::string, Cluster*> by_nic;  // "host|nic" -> its cluster
  for (auto& [k, c] : clusters)
    if (c.host_known) by_nic[c.host + "|" + c.nic] = &c;
  for (auto& [key, v] : votes) {
    size_t bar = key.find('|');
    std::string host = key.substr(0, bar), nic = key.substr(bar + 1);
    bool central = v.second.size() == max_peers && max_peers >= 2;
    auto found = by_nic.find(key);
    Cluster* cl = found == by_nic.end() ? nullptr : found->second;
    if (!cl && !central) continue;
    if (!cl) cl = &cluster_for_nic(host, nic);
    cl->edges = v.first;
    cl->peers = v.second;
    for (size_t i : edge_events[key])
      if (cl->c.evidence.size() < 40)
        add_evidence(cl->c, b, i, b.events[i].host == host ? "NCCL on this NIC: completion error to a peer"
                                                            : "NCCL on a peer: completion error towards this NIC");
  }
  // Switch-wide failures: many ports of one switch down within three minutes, or a reboot.
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> downs_by_switch;
  std::map<std::string, std::vector<size_t>> reboots;
  for (auto& [key, cl] : clusters)
    if (!cl.sw.empty())
      for (int64_t t : cl.down_times)
        if (t != kUnknownTime) downs_by_switch[names::canonical_host(cl.sw)].push_back({t, key});
  for (size_t i = 0; i < b.events.size(); ++i)
    if (b.events[i].kind == "switch_reboot") reboots[names::canonical_host(b.events[i].component.switch_name)].push_back(i);
  std::vector<Candidate> out;
  std::set<std::string> absorbed;
  std::set<std::string> switch_names;
  for (auto& [sw, v] : downs_by_switch) switch_names.insert(sw);
  for (auto& [sw, v] : reboots) switch_names.insert(sw);
  for (const std::string& sw : switch_names) {
    auto& downs = downs_by_switch[sw];
    std::sort(downs.begin(), downs.end());
    size_t best = 0, together = 0;
    std::set<std::string> best_ports;
    for (size_t a = 0, q = 0, z = 0; z < downs.size(); ++z) {
      while (downs[z].first - downs[a].first > 180'000'000) ++a;
      while (downs[z].first - downs[q].first > 10'000'000) ++q;
      std::set<std::string> ports, close;
      for (size_t k = a; k <= z; ++k) ports.insert(downs[k].second);
      for (size_t k = q; k <= z; ++k) close.insert(downs[k].second);
      if (ports.size() > best) best = ports.size(), best_ports = ports;
      together = std::max(together, close.size());
    }
    const bool rebooted = !reboots[sw].empty();
    // Three ports within minutes, or two within seconds (independent failures are not that
    // synchronised), or a reboot that took ports down.
    if (best < 3 && together < 2 && !(rebooted && best >= 1)) continue;
    Candidate c;
    c.component = {ComponentKind::switch_, "", "", sw, "", -1};
    c.group = "switch:" + sw;
    c.fault = rebooted ? "switch_reboot" : "switch_down";
    for (size_t i : reboots[sw]) add_evidence(c, b, i, "the switch rebooted");
    double link = 0.3;
    for (const std::string& key : best_ports) {
      Cluster& cl = clusters[key];
      for (auto& [i, why] : cl.c.evidence)
        if (c.evidence.size() < 60) add_evidence(c, b, i, "a port of this switch went down with the others");
      if (cl.host_known) {
        link = std::max(link, job_link(job, s, cl.host, cl.nic));
        for (int r : job.ranks_on(cl.host)) c.ranks.insert(r);
      }
      absorbed.insert(key);
    }
    if (!job.has_job_logs) link = 0.8;
    double strength = std::min(0.97, 0.55 + 0.08 * double(std::min<size_t>(best, 5)) + (rebooted ? 0.15 : 0.0));
    double rel = c.first_us == kUnknownTime ? 0.6 : time_relevance(c.first_us, 1, s);
    c.score = strength * std::max(rel, 0.5) * (s.any ? link : 1.0);
    c.job_related = s.any && link > 0.3;
    c.summary = "switch " + sw + (rebooted ? " rebooted" : " lost many ports at once") + ": " +
                std::to_string(best) + " ports went down together";
    out.push_back(std::move(c));
  }
  // One candidate per cable/NIC/port, of the kind its evidence points at.
  for (auto& [key, cl] : clusters) {
    Candidate& c = cl.c;
    const int host_downs = std::max(cl.kernel_downs.n, cl.nccl_downs.n);
    const int transitions = std::max(host_downs, cl.switch_downs.n) + cl.flaps;
    const bool stays_down = cl.last_down != kUnknownTime && (cl.last_up == kUnknownTime || cl.last_up < cl.last_down);
    Component host_nic{ComponentKind::nic, cl.host, cl.nic, "", "", -1};
    Component link{ComponentKind::link, cl.host, cl.nic, cl.sw, cl.port, -1};
    Component sport{ComponentKind::switch_port, "", "", cl.sw, cl.port, -1};
    std::string alternative_kind;
    if (cl.admin > 0) {
      c.component = sport, c.fault = "port_admin_down";
    } else if (cl.optic_switch + cl.ber > 0 && cl.switch_known) {
      c.component = {ComponentKind::optic, "", "", cl.sw, cl.port, -1};
      c.fault = cl.ber > 0 && cl.optic_switch == 0 ? "high_ber" : "optic_degraded";
    } else if (cl.optic_host > 0) {
      c.component = {ComponentKind::optic, cl.host, cl.nic, "", "", -1};
      c.fault = "optic_degraded";
    } else if (cl.nic_internal > 0 && cl.host_known) {
      c.component = host_nic, c.fault = "nic_failure";
    } else if (transitions >= 2) {
      c.component = cl.host_known && cl.switch_known ? link : cl.host_known ? host_nic : sport;
      if (c.component.kind == ComponentKind::nic) c.component.kind = ComponentKind::link;
      c.fault = "link_flap";
    } else if (transitions == 1 && stays_down) {
      c.component = cl.host_known && host_downs > 0 ? host_nic : cl.switch_known ? sport : host_nic;
      c.fault = c.component.kind == ComponentKind::nic ? "nic_down" : "port_down";
    } else if (transitions == 1) {
      c.component = cl.host_known && cl.switch_known ? link : cl.host_known ? host_nic : sport;
      c.fault = "link_flap";
    } else if (cl.host_known) {
      c.component = host_nic, c.fault = cl.async ? "nic_errors" : "network_path_errors";
    } else {
      c.component = sport, c.fault = "port_errors";
    }
    c.group = "cable:" + key;
    double physical = cl.physical.value();
    double edge = cl.edges > 0 ? std::min(1.0, 0.35 + 0.12 * double(cl.peers.size()) + 0.05 * cl.edges) : 0.0;
    double both_sides = (host_downs > 0 || cl.optic_host || cl.nic_internal) && (cl.switch_downs.n || cl.flaps || cl.optic_switch || cl.ber) ? 0.08 : 0.0;
    double strength = std::min(0.98, 0.7 * physical + 0.3 * edge + both_sides + (physical > 0 && edge > 0 ? 0.1 : 0.0));
    if (physical == 0) strength = 0.75 * edge;  // NCCL's word alone: the common end of the errors
    double linkf = cl.host_known ? job_link(job, s, cl.host, cl.nic) : (job.has_job_logs ? 0.3 : 0.8);
    if (absorbed.count(key)) strength *= 0.35;
    c.score = strength * (s.any ? linkf : 1.0);
    c.job_related = s.any && linkf > 0.3;
    if (cl.host_known)
      if (auto it = job.ranks_of_nic.find(cl.host + "|" + cl.nic); it != job.ranks_of_nic.end())
        c.ranks.insert(it->second.begin(), it->second.end());
    std::string where = cl.host_known ? cl.nic + " on " + cl.host : "";
    if (cl.switch_known) where += (where.empty() ? "" : " <-> ") + cl.sw + " " + cl.port;
    c.summary = c.fault + ": " + where;
    if (c.score < 0.05 || c.evidence.empty()) continue;
    out.push_back(c);
    // The same cable seen as its other parts, for operators who replace by kind.
    if (c.component.kind != ComponentKind::link && cl.host_known && cl.switch_known && c.fault != "port_admin_down") {
      Candidate alt = c;
      alt.component = link;
      alt.fault = "link_suspect";
      alt.score = c.score * 0.55;
      out.push_back(std::move(alt));
    }
    if (c.component.kind == ComponentKind::link) {
      Candidate alt = c;
      alt.component = cl.host_known ? host_nic : sport;
      alt.fault = "nic_suspect";
      alt.score = c.score * 0.5;
      out.push_back(std::move(alt));
    }
  }
  return out;
}

}  // namespace astral::monitor
