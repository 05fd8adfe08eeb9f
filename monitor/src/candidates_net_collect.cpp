// Evidence collectors of the network candidates (candidates_net.hpp): each reads one kind of
// witness and adds what it saw to the cable's record.
#include <algorithm>
#include <cctype>

#include "candidates_net.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

const std::set<std::string>& host_side_kinds() {
  static const std::set<std::string> k = {"nic_link_down", "nic_link_up",  "ib_port_error", "ib_port_active",
                                          "ib_fatal_event", "nic_health",  "nic_fatal",     "nic_power",
                                          "nic_command_timeout", "nic_temperature", "optic_event", "ib_device_failed"};
  return k;
}
const std::set<std::string>& switch_side_kinds() {
  static const std::set<std::string> k = {"port_down", "port_up", "port_flap", "port_ber",
                                          "optic_alarm", "port_admin_down", "port_admin_up"};
  return k;
}
bool is_nic_edge(const Event& e) {
  return e.kind == "retry_exceeded" || e.kind == "rnr_retry_exceeded" || e.kind == "ib_completion_error" ||
         e.kind == "ib_flush_error" || (e.kind == "nccl_socket_error" && !e.attr("peer_ip").empty());
}

// Old news (boot-time link-ups, a flap hours before) says nothing about this incident.
bool stale_for_incident(const Event& e, double rel) {
  const bool up = e.kind == "nic_link_up" || e.kind == "ib_port_active" || e.kind == "port_up" ||
                  e.kind == "port_admin_up";
  return rel < 0.3 || (up && rel < 0.5);
}

void note_down(CableEvidence& r, TransitionCount& count, int64_t t, double weight) {
  count.add(t);
  r.last_down = std::max(r.last_down, t);
  r.physical.add(weight, "down");
}

// One host-side event on the record of its NIC.
void add_host_event(CableEvidence& r, const Event& e, double rel) {
  const std::string& k = e.kind;
  if (k == "nic_link_down") note_down(r, r.kernel_downs, e.time_us, 0.6 * rel);
  else if (k == "nic_link_up") ++r.kernel_ups, r.last_up = std::max(r.last_up, e.time_us);
  else if (k == "ib_port_error") note_down(r, r.nccl_downs, e.time_us, 0.5 * rel);
  else if (k == "ib_port_active") ++r.nccl_ups, r.last_up = std::max(r.last_up, e.time_us);
  else if (k == "optic_event") {
    if (e.severity >= Severity::error) ++r.optic_host, r.physical.add(0.6 * rel, "optic");
    else if (e.severity == Severity::warning) r.physical.add(0.3 * rel, "optic");
  } else if (k == "ib_device_failed") {
    ++r.async, r.physical.add(0.5 * rel, "down");
  } else if (k != "nic_temperature") {
    ++r.nic_internal, r.physical.add(0.8 * rel, "nic");
  } else {
    r.physical.add(0.2 * rel, "nic");
  }
  if (k == "nic_link_down" || k == "ib_port_error") r.down_times.push_back(e.time_us);
}

// A host event naming a netdev NCCL never named: the host's only troubled NIC, if it has one.
void add_unresolved_event(CableEvidence& r, const Event& e, double rel) {
  if (e.kind == "nic_link_down") note_down(r, r.kernel_downs, e.time_us, 0.6 * rel);
  else if (e.kind == "nic_link_up") ++r.kernel_ups;
  else if (e.kind == "optic_event" && e.severity >= Severity::error) ++r.optic_host, r.physical.add(0.6 * rel, "optic");
  else if (e.kind != "nic_link_up" && e.kind != "optic_event") ++r.nic_internal, r.physical.add(0.7 * rel, "nic");
}

// The NIC on `peer` on the same rail as `nic` on `host` (rail-optimised fabrics).
std::string same_rail_nic(const JobModel& job, const Bundle& b, const std::string& host, const std::string& nic,
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

}  // namespace

void collect_nic_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (!host_side_kinds().count(e.kind)) continue;
    const double rel = time_relevance(e.time_us, e.time_confidence_s, ev.s);
    if (stale_for_incident(e, rel)) continue;
    std::string nic = ev.job.nic_of(e);
    if (nic.empty()) {
      ev.unresolved.push_back(i);
      continue;
    }
    CableEvidence& r = ev.for_nic(e.host, nic);
    add_host_event(r, e, rel);
    add_evidence(r.c, b, i, e.layer == Layer::nccl ? "NCCL saw the port event" : "host kernel: NIC/port event");
  }
}

// Host events whose NIC nobody named (run after the other collectors: a host's only troubled
// record takes them).
void collect_unresolved_nic_evidence(NetEvidence& ev) {
  std::map<std::string, std::vector<CableEvidence*>> records_of_host;
  for (auto& [key, r] : ev.records)
    if (r.host_known) records_of_host[r.host].push_back(&r);
  for (size_t i : ev.unresolved) {
    const Event& e = ev.b.events[i];
    if (e.kind == "nic_link_up") continue;  // recoveries of unnamed NICs prove nothing alone
    const std::vector<CableEvidence*>& on_host = records_of_host[e.host];
    CableEvidence* r = on_host.size() == 1 ? on_host[0] : nullptr;
    if (!r) r = &ev.for_nic(e.host, e.component.device.empty() ? std::string(e.attr("netdev")) : e.component.device);
    add_unresolved_event(*r, e, time_relevance(e.time_us, e.time_confidence_s, ev.s));
    add_evidence(r->c, ev.b, i, "host kernel: NIC/port event");
  }
}

void collect_cable_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (!switch_side_kinds().count(e.kind)) continue;
    const double rel = time_relevance(e.time_us, e.time_confidence_s, ev.s);
    if (stale_for_incident(e, rel)) continue;
    const Cable* cable = b.fabric.cable_at(e.component.switch_name, e.component.port);
    CableEvidence& r = cable ? ev.for_cable(*cable) : ev.for_switch_port(e.component.switch_name, e.component.port);
    const std::string& k = e.kind;
    if (k == "port_down") note_down(r, r.switch_downs, e.time_us, 0.6 * rel);
    else if (k == "port_up") ++r.switch_ups, r.last_up = std::max(r.last_up, e.time_us);
    else if (k == "port_flap") ++r.flaps, r.physical.add(0.7 * rel, "flap");
    else if (k == "port_ber") {
      if (e.severity >= Severity::warning) ++r.ber;
      r.physical.add((e.severity >= Severity::error ? 0.6 : 0.3) * rel, "optic");
    } else if (k == "optic_alarm") {
      if (e.severity >= Severity::warning) ++r.optic_switch;
      r.physical.add((e.severity >= Severity::error ? 0.6 : e.severity == Severity::warning ? 0.35 : 0.05) * rel,
                     "optic");
    } else if (k == "port_admin_down") {
      ++r.admin, r.physical.add(0.5 * rel, "admin");
    }
    if (k == "port_down" || k == "port_flap") r.down_times.push_back(e.time_us);
    if (k != "port_admin_up") add_evidence(r.c, b, i, "switch: port event");
  }
}

void collect_edge_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  std::map<std::string, std::pair<double, std::set<std::string>>> votes;  // "host|nic" -> (weight, peers)
  std::map<std::string, std::vector<size_t>> edge_events;
  for (size_t i : ev.s.events) {
    const Event& e = b.events[i];
    if (!is_nic_edge(e)) continue;
    std::string nic = ev.job.nic_of(e);
    std::string peer = b.canonical_host(e.attr("peer_ip"));
    double w = e.kind == "ib_flush_error" || e.kind == "nccl_socket_error" ? 0.5 : 1.0;
    if (!nic.empty()) {
      auto& v = votes[e.host + "|" + nic];
      v.first += w;
      if (!peer.empty()) v.second.insert(peer);
      edge_events[e.host + "|" + nic].push_back(i);
    }
    if (!peer.empty() && peer != e.host && !names::is_ip_address(peer)) {
      std::string their = nic.empty() ? "" : same_rail_nic(ev.job, b, e.host, nic, peer);
      if (their.empty()) continue;
      auto& v = votes[peer + "|" + their];
      v.first += w;
      v.second.insert(e.host);
      edge_events[peer + "|" + their].push_back(i);
    }
  }
  size_t max_peers = 0;
  for (auto& [key, v] : votes) max_peers = std::max(max_peers, v.second.size());
  std::map<std::string, CableEvidence*> by_nic;  // "host|nic" -> its record
  for (auto& [k, r] : ev.records)
    if (r.host_known) by_nic[r.host + "|" + r.nic] = &r;
  for (auto& [key, v] : votes) {
    size_t bar = key.find('|');
    std::string host = key.substr(0, bar), nic = key.substr(bar + 1);
    bool central = v.second.size() == max_peers && max_peers >= 2;
    auto found = by_nic.find(key);
    CableEvidence* r = found == by_nic.end() ? nullptr : found->second;
    if (!r && !central) continue;
    if (!r) r = &ev.for_nic(host, nic);
    r->edges = v.first;
    r->peers = v.second;
    for (size_t i : edge_events[key])
      if (r->c.evidence.size() < 40)
        add_evidence(r->c, b, i, b.events[i].host == host ? "NCCL on this NIC: completion error to a peer"
                                                           : "NCCL on a peer: completion error towards this NIC");
  }
}

MetricClass classify_metric(std::string_view metric) {
  std::string m(metric);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  auto has = [&](std::string_view w) { return m.find(w) != std::string::npos; };
  if (has("link_downed") || has("link_down") || has("carrier_change") || has("carrier_down") || has("flap"))
    return MetricClass::link_down;
  if (has("symbol_error") || has("rcv_error") || has("receive_error") || has("recv_error") || has("fec") ||
      has("ber") || has("crc") || has("phy_error") || has("integrity") || has("rcv_remote_physical"))
    return MetricClass::link_errors;
  if (has("pause") || has("pfc") || has("xmit_wait") || has("congest") || has("ecn") || has("discard"))
    return MetricClass::congestion;
  return MetricClass::other;
}

MetricSide network_metric_side(const Event& e) {
  if (e.kind != kMetricChangeKind || classify_metric(e.attr("metric")) == MetricClass::other) return MetricSide::none;
  const ComponentKind k = e.component.kind;
  if (!e.component.switch_name.empty() &&
      (k == ComponentKind::switch_port || k == ComponentKind::optic || k == ComponentKind::link))
    return MetricSide::switch_side;
  if (!e.component.host.empty() && (k == ComponentKind::nic || k == ComponentKind::port ||
                                    k == ComponentKind::optic || k == ComponentKind::link))
    return MetricSide::host_side;
  return MetricSide::none;
}

void collect_metric_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    const MetricSide side = network_metric_side(e);
    if (side == MetricSide::none) continue;
    const MetricClass mc = classify_metric(e.attr("metric"));
    const bool switch_side = side == MetricSide::switch_side;
    const double rel = time_relevance(e.time_us, e.time_confidence_s, ev.s);
    if (rel < 0.3) continue;
    CableEvidence* r = nullptr;
    if (switch_side) {
      const Cable* cable = b.fabric.cable_at(e.component.switch_name, e.component.port);
      r = cable ? &ev.for_cable(*cable) : &ev.for_switch_port(e.component.switch_name, e.component.port);
    } else {
      std::string nic = ev.job.nic_of(e);
      r = &ev.for_nic(e.component.host, nic.empty() ? e.component.device : nic);
    }
    // A counter that climbs is a measurement, not a report: it weighs like a warning line, and
    // is strong when it rose before the incident began.
    const double lead = e.attr_int("onset_offset_s", 0) <= 0 ? 1.0 : 0.7;
    if (mc == MetricClass::link_errors) {
      ++(switch_side ? r->metric_errors_switch : r->metric_errors_host);
      r->physical.add(0.55 * rel * lead, "optic");
    } else if (mc == MetricClass::link_down) {
      ++r->metric_downs;
      r->physical.add(0.5 * rel * lead, "down");
    } else {
      r->physical.add(0.15 * rel * lead, "congestion");
    }
    add_evidence(r->c, b, i, "metric: " + std::string(e.attr("metric")) + " rose from " +
                                 std::string(e.attr("before")) + " to " + std::string(e.attr("after")));
  }
}

void collect_transfer_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (e.kind != "slow_transfers" || e.component.switch_name.empty()) continue;
    const Cable* cable = b.fabric.cable_at(e.component.switch_name, e.component.port);
    const std::string key = cable ? "cable:" + names::canonical_host(cable->sw.switch_name) + "|" + cable->sw.port
                                  : "sp:" + e.component.switch_name + "|" + names::port_key(e.component.port);
    auto it = ev.records.find(key);
    if (it == ev.records.end()) continue;  // slowness alone names no part
    CableEvidence& r = it->second;
    add_evidence(r.c, b, i, "transfers across this link ran slow (" + std::string(e.attr("slow_connections")) +
                                " of " + std::string(e.attr("connections")) + " connections)");
    r.transfer_support = std::max(r.transfer_support, 0.3 * time_relevance(e.time_us, e.time_confidence_s, ev.s));
  }
}

void collect_switch_evidence(NetEvidence& ev) {
  const Bundle& b = ev.b;
  const Symptoms& s = ev.s;
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> downs_by_switch;
  std::map<std::string, std::vector<size_t>> reboots;
  for (auto& [key, r] : ev.records)
    if (!r.sw.empty())
      for (int64_t t : r.down_times)
        if (t != kUnknownTime) downs_by_switch[names::canonical_host(r.sw)].push_back({t, key});
  for (size_t i = 0; i < b.events.size(); ++i)
    if (b.events[i].kind == "switch_reboot") reboots[names::canonical_host(b.events[i].component.switch_name)].push_back(i);
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
      CableEvidence& r = ev.records[key];
      for (auto& [i, why] : r.c.evidence)
        if (c.evidence.size() < 60) add_evidence(c, b, i, "a port of this switch went down with the others");
      if (r.host_known) {
        link = std::max(link, nic_job_link(ev.job, s, r.host, r.nic));
        for (int rank : ev.job.ranks_on(r.host)) c.ranks.insert(rank);
      }
      ev.absorbed.insert(key);
    }
    if (!ev.job.has_job_logs) link = 0.8;
    double strength = std::min(0.97, 0.55 + 0.08 * double(std::min<size_t>(best, 5)) + (rebooted ? 0.15 : 0.0));
    double rel = c.first_us == kUnknownTime ? 0.6 : time_relevance(c.first_us, 1, s);
    c.score = strength * std::max(rel, 0.5) * (s.any ? link : 1.0);
    c.job_related = s.any && link > 0.3;
    c.summary = "switch " + sw + (rebooted ? " rebooted" : " lost many ports at once") + ": " +
                std::to_string(best) + " ports went down together";
    ev.switch_candidates.push_back(std::move(c));
  }
}

}  // namespace astral::monitor
