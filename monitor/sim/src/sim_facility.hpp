#pragma once
// Plant faults of the scenario generator: a CDU pump fails (or the facility water warms), a power
// shelf loses a rectifier and caps its rack, a rack leaks and is shut down. Each writes the whole
// chain in real formats: the site layout, the plant's Redfish Event payloads and the alarms the
// facility reader makes of them (*.events.jsonl), NVML alarms on the hosts, an nvidia-smi -q dump,
// the kernel's thermal lines, and the job slowing down until it times out.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "astral/monitor/event.hpp"
#include "sim_world.hpp"

namespace astral::monitor::sim {

struct PlantOutcome {
  Component component;  // the part that failed, as the plant names it
  std::string description;
  bool hangs = false;        // the job times out in the end (else it only slows)
  std::set<int> dead;        // ranks whose hosts lost power
  std::set<int> late;        // ranks that never reach the stuck collective (too slow)
  int64_t job_normal_until = 0;  // true time the job ran at full speed until
  // The Redfish Event payloads each plant service pushed (source -> payloads): written beside
  // the bundle, since an operator's bundle holds the reader's events file, not the raw stream.
  std::map<std::string, std::vector<std::string>> redfish_events;
  // The failed equipment's Redfish service as a mockup tree (source -> "/redfish/v1/..." -> JSON).
  std::map<std::string, std::map<std::string, std::string>> mockups;
};

// How long before the symptoms the plant fails (drawn once, before the job's output is written).
int64_t plant_lead_us(World& w);

// Writes the plant side and the job's reaction; the caller finishes the hang.
PlantOutcome plant_fault(World& w, FaultKind kind, const Rank& victim, int64_t t_fault, int64_t lead_us,
                         double iter_s);

}  // namespace astral::monitor::sim
