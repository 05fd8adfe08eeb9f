#pragma once
// Network candidates, in two stages (candidates_net.cpp puts them together):
//   1. evidence collectors, one per kind of witness, each adding what it saw to the record of the
//      cable (host NIC port <-> leaf switch port) or, when the fabric does not know the cable, of
//      the NIC or switch port alone:
//        collect_nic_evidence     host kernel and NCCL: link/port events, NIC health, fatal events
//                                 (collect_unresolved_nic_evidence: those whose NIC nobody named)
//        collect_cable_evidence   the switch side: port state, flaps, BER/FEC, optics, IB counters
//        collect_edge_evidence    NCCL completion errors between two NICs (the common end)
//        collect_metric_evidence  metric changes before/after onset (kind "metric_change")
//        collect_transfer_evidence  transfers that ran slow across a link (kind "slow_transfers",
//                                 conn_paths.cpp), for records the other witnesses opened
//        collect_switch_evidence  switch-wide failures (a reboot, many ports at once)
//   2. one scoring step (score_network_evidence) that turns each record's mix into a fault, a
//      component and a score.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis.hpp"

namespace astral::monitor {

// Metric-change events, the input of collect_metric_evidence. A source that compares a metric
// before and after onset (Prometheus range queries, exposition files) emits one per significant
// change:
//   kind       "metric_change"
//   component  what the metric is about: a switch port ({switch_port, switch, port}), a NIC or NIC
//              port ({nic|port, host, device = mlx5_N or netdev, port}), an optic, a link
//   time_us    when the change began
//   attrs      metric (e.g. node_infiniband_symbol_error_total, symbol_errors), before, after (rates,
//              per second), onset_offset_s (change start minus incident onset; negative = before)
// Components not on the network (GPUs, facility) are left to their own candidate builders.
inline constexpr std::string_view kMetricChangeKind = "metric_change";
enum class MetricClass { link_errors, link_down, congestion, other };
// By name: symbol/receive/FEC/CRC/BER errors, link-downed/carrier counters, pauses/discards.
MetricClass classify_metric(std::string_view metric);
// Which side of a cable a metric change stands on, for the network collector: the switch side
// (a switch port, its optic or link), the host side (a NIC, port, optic or link on a host), or
// neither (a GPU, the plant, or a metric the collector does not weigh).
enum class MetricSide { none, switch_side, host_side };
MetricSide network_metric_side(const Event& e);

// Transitions reported by one source; a second report within a second is the same transition.
struct TransitionCount {
  int n = 0;
  int64_t last = kUnknownTime;
  void add(int64_t t);
};

// What every witness said about one cable (or lone NIC / switch port).
struct CableEvidence {
  std::string host, nic, sw, port;
  bool host_known = false, switch_known = false;
  TransitionCount kernel_downs, nccl_downs, switch_downs;
  int kernel_ups = 0, nccl_ups = 0, switch_ups = 0;
  int flaps = 0, nic_internal = 0, optic_switch = 0, optic_host = 0, ber = 0, admin = 0, async = 0;
  int metric_errors_switch = 0, metric_errors_host = 0, metric_downs = 0;
  int64_t last_down = kUnknownTime, last_up = kUnknownTime;
  double transfer_support = 0;  // slow transfers across it: more confidence, never a ranking alone
  std::vector<int64_t> down_times;
  NoisyOr physical;
  double edges = 0;
  std::set<std::string> peers;
  Candidate c;
};

struct NetEvidence {
  const Bundle& b;
  const JobModel& job;
  const Symptoms& s;
  std::map<std::string, CableEvidence> records;  // "cable:sw|port", "nic:host|nic", "sp:sw|portkey"
  std::vector<size_t> unresolved;                // host-side events whose NIC has no NCCL name
  std::set<std::string> absorbed;                // records explained by a switch-wide failure
  std::vector<Candidate> switch_candidates;

  CableEvidence& for_cable(const Cable& cable);
  CableEvidence& for_nic(const std::string& host, const std::string& nic);
  CableEvidence& for_switch_port(const std::string& sw, const std::string& port);
};

void collect_nic_evidence(NetEvidence&);
void collect_unresolved_nic_evidence(NetEvidence&);  // after the others: a host's only record
void collect_cable_evidence(NetEvidence&);
void collect_edge_evidence(NetEvidence&);
void collect_metric_evidence(NetEvidence&);
void collect_switch_evidence(NetEvidence&);
void collect_transfer_evidence(NetEvidence&);  // last: joins records the others opened
std::vector<Candidate> score_network_evidence(NetEvidence&);

// How much a NIC's trouble bears on the job (its ranks failed, it carried job traffic, ...).
double nic_job_link(const JobModel& job, const Symptoms& s, const std::string& host, const std::string& nic);

}  // namespace astral::monitor
