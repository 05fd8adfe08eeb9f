#pragma once
// Internal model of the diagnosis: who ran where (JobModel), what went wrong for the job
// (Symptoms), and the candidate causes found in each layer.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"

namespace astral::monitor {

struct RankInfo {
  int rank = -1;
  std::string host;
  int64_t pid = -1;
  std::string gpu;  // canonical PCI address when known
  int cuda_dev = -1;
  std::vector<std::string> nics;  // NICs it sends on (mlx5_N), most used first
};

// Ranks, their GPUs and NICs, and the names each layer uses for the same NIC.
struct JobModel {
  int world_size = 0;
  uint64_t world_comm = 0;
  bool has_job_logs = false;  // any NCCL / PyTorch / trace output at all
  std::map<int, RankInfo> ranks;
  std::map<std::string, std::vector<int>> ranks_of_host;
  std::map<std::string, int> rank_of_pid;                   // "host:pid"
  std::map<std::string, int> rank_of_gpu;                   // "host|pci"
  std::map<std::string, std::vector<int>> ranks_of_nic;     // "host|nic"
  std::map<std::string, std::vector<std::string>> nics_of_host;        // NCCL device list order
  std::map<std::string, std::map<std::string, std::string>> nic_alias;  // host -> netdev/bdf -> nic
  // NCCL's device index -> HCA, from its "NET/IB : Using [0]mlx5_0:1/IB ..." line: per process
  // ("host:pid") and per host (when every process of the host listed the same devices).
  std::map<std::string, std::map<int, std::string>> nic_of_index;

  // Global rank of the process an event came from; -1 when unknown.
  int rank_of(const Event& e) const;
  // The NIC (as NCCL names it) an event is about; "" when it cannot be resolved.
  std::string nic_of(const Event& e) const;
  std::vector<int> ranks_on(const std::string& host) const;
  bool is_job_host(const std::string& host) const { return ranks_of_host.count(host) > 0; }
};

JobModel build_job_model(const Bundle& bundle);

// Per-host clock offsets (seconds the host's clock is ahead of the reference), estimated from
// events that happen at the same instant everywhere: the start of a stuck collective on every
// rank of its group, collective ends in timing records, both ends of a link going down.
std::map<std::string, double> estimate_clock_offsets(const Bundle& bundle, const JobModel& job);
void apply_clock_offsets(Bundle& bundle, const std::map<std::string, double>& offsets);

// What the job itself reports.
struct RankState {
  int64_t timed_out_seq = -1;
  std::string op;
  int64_t last_enqueued = -1;
  int64_t last_completed = -1;
  bool timed_out = false;
  bool errored = false;
  int64_t first_error_us = kUnknownTime;
  std::vector<size_t> events;
};

struct Symptoms {
  bool any = false;          // the job failed, hung or slowed
  std::vector<size_t> events;  // symptom event indices, by time
  std::map<int, RankState> ranks;
  std::string process_group;
  int64_t stuck_seq = -1;
  std::string stuck_op;
  int64_t onset_us = kUnknownTime;        // when the stuck collective was enqueued / first error
  int64_t first_symptom_us = kUnknownTime;
  int64_t last_symptom_us = kUnknownTime;
  std::set<int> affected_ranks;
  std::set<std::string> affected_hosts;
  // Ranks singled out by the job's own bookkeeping, with why.
  std::map<int, std::vector<std::pair<size_t, std::string>>> culprits;
  std::map<int, std::string> culprit_reason;
  std::set<int> missing_ranks;  // ranks that went silent while the others timed out
  // Straggler from timing records: rank and evidence text.
  int straggler_rank = -1;
  double straggler_score = 0;
  std::string straggler_note;
  std::vector<uint32_t> straggler_files;
  int64_t straggler_since_us = kUnknownTime;  // start of its first collective that others waited on
  bool peers_dead_reported = false;
  bool finished_cleanly = false;  // the ranks destroyed the world communicator (Destroy COMPLETE)
};

// At least 3/4 of the world communicator's ranks logged "Destroy COMPLETE" for it.
bool job_finished_cleanly(const Bundle& bundle, const JobModel& job);

Symptoms find_symptoms(const Bundle& bundle, const JobModel& job);

struct Candidate {
  Component component;
  std::string fault;
  double score = 0;
  std::string summary;
  std::vector<std::pair<size_t, std::string>> evidence;  // event index, why it matters
  std::vector<uint32_t> files;  // evidence without a line (timing records)
  int64_t first_us = kUnknownTime;
  int64_t last_us = kUnknownTime;
  std::set<int> ranks;
  std::string group;  // physical identity shared by alternatives (a cable, a GPU)
  bool job_related = true;
  // An operator's deliberate act (a port set admin-down): only a cause when a job suffered from it.
  bool deliberate = false;
  std::vector<Component> also_suspect;  // alternatives folded into this one (same evidence)
};

// Independent pieces of evidence combined: 1 - prod(1 - w); remembers the strongest one's fault.
struct NoisyOr {
  double miss = 1.0;
  double best = 0;
  std::string fault;
  void add(double w, const std::string& f) {
    miss *= 1.0 - (w < 0 ? 0 : w > 0.99 ? 0.99 : w);
    if (w > best) {
      best = w;
      fault = f;
    }
  }
  double value() const { return 1.0 - miss; }
};

void add_evidence(Candidate& c, const Bundle& b, size_t event, std::string why);

std::vector<Candidate> gpu_candidates(const Bundle&, const JobModel&, const Symptoms&);
std::vector<Candidate> network_candidates(const Bundle&, const JobModel&, const Symptoms&);
std::vector<Candidate> process_candidates(const Bundle&, const JobModel&, const Symptoms&);
std::vector<Candidate> host_candidates(const Bundle&, const JobModel&, const Symptoms&);
// Plant faults (cooling loss, power capping, leak) joined to the job through the site layout
// (candidates_facility.cpp), and throttled GPUs of lagging ranks with no plant fault behind them.
std::vector<Candidate> facility_candidates(const Bundle&, const JobModel&, const Symptoms&);
std::vector<Candidate> throttle_candidates(const Bundle&, const JobModel&, const Symptoms&);

// How much an event at time t bears on an incident that started at onset (1 near it, less far).
double time_relevance(int64_t t, double confidence_s, const Symptoms& s);

}  // namespace astral::monitor
