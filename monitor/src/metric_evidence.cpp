#include "metric_evidence.hpp"

#include <set>

#include "candidates_net.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

// The ends a component stands for, as "nic|host|dev", "sw|switch|port" and "gpu|host|pci"
// keys, the far end of its cable included.
std::set<std::string> ends_of(const Component& c, const FabricGraph& fabric) {
  std::set<std::string> ends;
  const std::string host = names::canonical_host(c.host), sw = names::canonical_host(c.switch_name);
  if (c.kind == ComponentKind::gpu) {
    if (!host.empty() && !c.device.empty()) ends.insert("gpu|" + host + "|" + c.device);
    return ends;
  }
  if (!host.empty() && !c.device.empty()) {
    ends.insert("nic|" + host + "|" + c.device);
    if (const Cable* cable = fabric.cable_of_nic(host, c.device))
      ends.insert("sw|" + names::canonical_host(cable->sw.switch_name) + "|" + names::port_key(cable->sw.port));
  }
  if (!sw.empty() && !c.port.empty()) {
    ends.insert("sw|" + sw + "|" + names::port_key(c.port));
    if (const Cable* cable = fabric.cable_at(sw, c.port))
      ends.insert("nic|" + names::canonical_host(cable->nic.host) + "|" + cable->nic.nic);
  }
  return ends;
}

bool shares_end(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& k : a)
    if (b.count(k)) return true;
  return false;
}

}  // namespace

void attach_metric_evidence(std::vector<Candidate>& candidates, const Bundle& b, const Symptoms& s) {
  std::vector<std::pair<size_t, std::set<std::string>>> changes;
  // Network counters (symbol errors, link downs, pauses) were already weighed, once, by the network
  // collector; this joins the rest: slow transfers, GPU and other counters, to any candidate.
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    const bool joins = e.kind == "slow_transfers" ||
                       (e.kind == kMetricChangeKind && network_metric_side(e) == MetricSide::none);
    if (joins) changes.emplace_back(i, ends_of(e.component, b.fabric));
  }
  if (changes.empty()) return;
  for (Candidate& c : candidates) {
    std::set<std::string> mine = ends_of(c.component, b.fabric);
    for (const Component& alt : c.also_suspect) mine.merge(ends_of(alt, b.fabric));
    double support = 0;
    for (const auto& [i, ends] : changes) {
      if (!shares_end(mine, ends)) continue;
      const Event& e = b.events[i];
      if (e.kind == "slow_transfers")
        add_evidence(c, b, i, "transfers across this link ran slow (" + std::string(e.attr("slow_connections")) + " of " +
                                  std::string(e.attr("connections")) + " connections)");
      else
        add_evidence(c, b, i, "hardware counter changed: " + std::string(e.attr("metric")) + " " +
                                  std::string(e.attr("before")) + " -> " + std::string(e.attr("after")) +
                                  std::string(e.attr("unit")));
      support = std::max(support, 0.3 * time_relevance(e.time_us, e.time_confidence_s, s));
    }
    // Independent physical evidence: a little more confidence, never a new ranking on its own.
    c.score += (1.0 - c.score) * support;
  }
}

}  // namespace astral::monitor
