#pragma once
// Paths of connections. Astral trace files name each connection's local NIC and its peer; on
// the fabric graph that is a path of links (host cable, leaf-spine trunks, the peer's cable).
// Transfers that ran far below the job's usual rate make their connections slow; a link that
// most slow connections crossed becomes a `slow_transfers` event about that link, which the
// diagnosis joins to the candidates on the same cable as evidence.
#include <cstdint>
#include <string>
#include <vector>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/event.hpp"
#include "astral/monitor/fabric_graph.hpp"
#include "astral/trace/reader.hpp"

namespace astral::monitor {

struct ConnectionPath {
  uint64_t conn_id = 0;
  std::string host, nic, peer_host, peer_nic;
  // Links crossed, in order: kind link with host/device (a host cable) and switch/port (its
  // leaf end), or only switch/port for a trunk's lower end. With the fabric JSON's hash model
  // and the QPs' UDP source ports (the plugin's path note), the trunks are the ones the switches'
  // hash chose (`hashed`); otherwise every parallel trunk is listed and `ambiguous` set.
  std::vector<Component> hops;
  bool ambiguous = false;
  bool hashed = false;
  uint64_t transfers = 0;
  uint64_t bytes = 0;
  double gbps = 0;  // bytes over the summed transfer times
  bool slow = false;
  int64_t first_slow_us = kUnknownTime;  // wall time of the first slow transfer
};

// One path per sending end of a connection; `slow` below half the median rate of all.
std::vector<ConnectionPath> connection_paths(const std::vector<trace::TraceFile>& files, const FabricGraph& fabric);
// Links crossed by at least two slow connections, most of which were slow.
std::vector<Event> slow_link_events(const std::vector<ConnectionPath>& paths);
// Reads the bundle's trace files and adds their slow-link events; returns how many.
size_t add_connection_evidence(Bundle& b);

}  // namespace astral::monitor
