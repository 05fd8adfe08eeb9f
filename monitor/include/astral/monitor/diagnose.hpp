#pragma once
// Correlation and root-cause localisation. diagnose() joins the bundle's events across layers and
// hosts (ranks -> GPUs and NICs -> fabric ports; per process group and sequence number who
// reached which collective and who stopped first; clocks aligned across hosts) and returns
// ranked root-cause candidates with their evidence, time window and blast radius. A bundle whose
// job shows no failure or slowdown gets an empty root-cause list; hardware problems that did not
// touch the job are listed as findings.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/event.hpp"

namespace astral::monitor {

struct Evidence {
  uint32_t file = 0;
  uint32_t line = 0;
  int64_t time_us = kUnknownTime;  // aligned to the reference clock
  std::string host;
  Layer layer = Layer::kernel;
  std::string kind;
  std::string message;
  std::string why;  // how this line supports the claim
};

struct BlastRadius {
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  std::vector<std::string> process_groups;
  std::vector<std::string> communicators;  // commHash, hex
};

struct RootCause {
  Component component;
  std::string fault;  // nic_down, link_flap, optic_degraded, gpu_xid, gpu_ecc, gpu_straggler, ...
  double confidence = 0;
  std::string summary;
  int64_t window_start_us = kUnknownTime;
  int64_t window_end_us = kUnknownTime;
  std::vector<Evidence> evidence;
  BlastRadius blast;
  // The same physical thing read as its other parts (the cable of a failed NIC, the NIC of a
  // flapping link), for operators who replace by kind: the evidence above supports them too.
  std::vector<Component> also_suspect;
};

struct Incident {
  bool present = false;
  std::string kind;     // hang, crash, errors, slowdown
  int64_t onset_us = kUnknownTime;
  int64_t first_symptom_us = kUnknownTime;
  int64_t last_symptom_us = kUnknownTime;
  std::string process_group;
  int64_t seq = -1;     // the collective that did not complete
  std::string op;
  int world_size = 0;
  int ranks_reporting = 0;
  std::vector<int> stopped_first;  // ranks that did not reach / finish the collective first
  std::string summary;
};

struct Diagnosis {
  Incident incident;
  std::vector<RootCause> root_causes;  // best first; empty when nothing is wrong
  std::vector<RootCause> findings;     // problems seen that do not explain the incident
  std::map<std::string, double> clock_offsets_s;  // host -> seconds its clock runs ahead
};

struct DiagnoseOptions {
  double min_confidence = 0.25;  // candidates below are dropped
  size_t max_evidence = 12;      // per root cause
};

// Aligns the bundle's event times to one clock (in place) and diagnoses.
Diagnosis diagnose(Bundle& bundle, const DiagnoseOptions& options = {});

nlohmann::json to_json(const Diagnosis&, const Bundle&, bool with_files = true);
std::string to_text(const Diagnosis&, const Bundle&);
// "0-7,16,18-23"
std::string compress_ranks(const std::vector<int>& ranks);

}  // namespace astral::monitor
