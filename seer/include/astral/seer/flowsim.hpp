#pragma once
// Flow-level network simulator on the fabric model: traffic patterns of training jobs placed on
// hosts, routed QP by QP (ECMP hash, pinning, same-rail/PXN), rates max-min fair (fluid model).
//
// Completion time is computed three ways, whichever is exact and affordable (FlowSimResult::method):
// * "max-load": when all subflows crossing any one resource carry equal bytes (uniform patterns
//   with equal QP split), the max-min makespan equals max over resources of load / capacity:
//   every subflow always gets at least capacity / (subflows on its busiest resource), and the
//   busiest resource must carry its load. Streaming, no flow storage: this is what makes 16K-GPU
//   all-to-all cheap.
// * "event": event-driven max-min re-solved at each completion (unequal sizes, adaptive QPs,
//   several jobs), up to event_sim_limit subflows.
// * "bounds": beyond that, a proven interval: max load / capacity <= T <= max over subflows of
//   bytes x (subflows on its busiest resource) / capacity.
// The ideal is the endpoint bound (each GPU's bytes through its own NIC and NVLink at full rate),
// i.e. what a perfectly balanced network would achieve; efficiency = ideal / completion.
#include <nlohmann/json_fwd.hpp>

#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace astral::seer {

enum class TrafficPattern { kAllToAll, kMoeAllToAll, kPermutation, kRingAllReduce, kTreeAllReduce };
enum class Placement { kPacked, kFragmented };
// How a connection's bytes are spread over its QPs: NCCL splits evenly (a connection is as fast
// as its slowest QP); adaptive moves bytes to whichever QP is free (HPN-style least-loaded QP).
enum class QpBalance { kEqualSplit, kAdaptive };
// How connections are routed: one at a time (the reference), or by classes of connections with
// their multiplicity (uniform all-to-all; same loads, far less work). Auto uses classes wherever
// they apply and nothing needs the stored flows (goodput, event simulation).
// `counted` is classes with the ECMP collisions counted from the hash model (a multinomial draw per
// switch and destination leaf) instead of hashed QP by QP: one realisation of the same hash model,
// so it agrees with the reference statistically (closer the larger the fabric) at a cost that no
// longer grows with the QPs. Auto counts above `count_above` QP subflows.
enum class SimEngine { kAuto, kConnections, kClasses, kCounted };

std::optional<TrafficPattern> parse_pattern(std::string_view text);  // alltoall, moe, permutation,
                                                                     // ring, tree
const char* pattern_name(TrafficPattern pattern);
std::optional<Placement> parse_placement(std::string_view text);  // packed, fragmented
const char* placement_name(Placement placement);

struct FlowSimOptions {
  TrafficPattern pattern = TrafficPattern::kAllToAll;
  // Per GPU: the all-to-all send buffer (nccl-tests convention: 1/n of it to each rank), the
  // all-reduce buffer, or the permutation message.
  double bytes = 64.0 * 1024 * 1024;
  topo::RoutingPolicy routing;
  int qps = 1;  // QPs per connection and NIC port (NCCL_IB_QPS_PER_CONNECTION)
  QpBalance balance = QpBalance::kEqualSplit;
  Placement placement = Placement::kPacked;
  int jobs = 1;              // jobs sharing the cluster, each running the pattern on its hosts
  double fill = 1.0;         // fraction of hosts allocated to jobs
  double moe_skew = 1.0;     // Zipf exponent of expert popularity (moe pattern)
  // All-to-all patterns: only pairs of hosts in different segments (the traffic of the published
  // ECMP baselines, which leaves out what stays under one leaf).
  bool cross_segment_only = false;
  int trials = 1;            // independent hash seeds / draws; results are means
  std::uint64_t seed = 1;
  std::vector<std::string> fail_links;  // taken down first: "r3-07:17", "node0001:mlx5_0:1", "#12"
  std::vector<std::string> fail_switches;  // every link of these switches down: "s3-00", "r3-07"
  int fail_random_links = 0;            // random switch-to-switch links taken down
  size_t event_sim_limit = 200000;      // subflows beyond which "event" falls back to "bounds"
  bool force_event = false;             // use the event simulation even where max-load is exact
  // Event simulation: transfers finishing within this fraction of the elapsed time of the next
  // completion are completed in the same re-solve (at their own finish times). Bounds the number
  // of max-min solves to about ln(T_last / T_first) / tolerance.
  double event_tolerance = 0.005;
  size_t goodput_limit = 2000000;       // subflows beyond which the t=0 goodput is skipped
  SimEngine engine = SimEngine::kAuto;
  // auto: QP subflows above which ECMP is counted. A same-rail all-to-all has 8.4 M at 8K GPUs
  // and 33.6 M at 16K (0.18 % from the hashes there; 2^25 narrowly missed it); at 4K and below,
  // with few QPs per uplink, a draw can be 1-7 % from the hashes, so those keep hashing.
  size_t count_above = size_t(1) << 24;
  // Refuse up front, with the estimate, a simulation whose memory would exceed this.
  double memory_limit_gib = 8.0;
};

// Link load relative to the ideal: (bytes / capacity) / ideal time. 1.0 = as busy as the busiest
// NIC of a perfectly balanced network; the maximum over all resources is 1 / efficiency when the
// completion is "max-load".
struct LoadDistribution {
  std::string link_class;  // host->leaf, leaf->spine, spine->core, ..., nvlink
  long resources = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct JobOutcome {
  int hosts = 0, gpus = 0;
  double completion_s = 0, ideal_s = 0, efficiency = 0;
  int segments = 0;  // segments (sets of leaves) its hosts span
};

struct FlowSimResult {
  std::string fabric, pattern, routing, placement, balance, method;
  std::string engine;            // "counted", "classes" or "connections" (first trial)
  size_t classes = 0;            // leaf-pair classes routed by the class engine
  size_t exact_connections = 0;  // connections it routed one by one (irregular: faults)
  size_t counted_classes = 0;    // classes whose ECMP collisions were counted
  double memory_estimate_gib = 0;
  int gpus = 0, hosts = 0, jobs = 0, qps = 0, trials = 0;
  double bytes_per_gpu = 0;
  size_t connections = 0, subflows = 0, unroutable = 0;
  double completion_s = 0;        // "bounds": the lower bound
  double completion_upper_s = 0;  // equals completion_s unless "bounds"
  double ideal_s = 0;
  double efficiency = 0;  // ideal / completion, mean over trials
  double efficiency_stdev = 0, efficiency_min = 0, efficiency_max = 0;
  double algbw_gbytes_s = 0;  // per GPU, as nccl-tests reports it
  double busbw_gbytes_s = 0;
  // Max-min throughput at t = 0 over network connections, as a fraction of each connection's
  // endpoint share (mean over trials): adaptive = sum of its QPs' rates; equal split = QPs x the
  // slowest QP's rate.
  std::optional<double> goodput_adaptive, goodput_equal_split;
  std::vector<LoadDistribution> loads;       // first trial
  // First trial: the load factor of every resource by link class (for plots; not in to_json).
  std::map<std::string, std::vector<double>> load_factors;
  std::vector<JobOutcome> job_outcomes;      // first trial
  std::vector<std::string> notes;
  int events = 0;
  double runtime_s = 0;
};

using Progress = std::function<void(const std::string& message)>;

// Throws std::invalid_argument for options that do not make sense for the fabric (naming the
// option) or a simulation whose memory estimate exceeds memory_limit_gib, topo::FabricError for a
// link spec that names nothing.
FlowSimResult simulate(const topo::Fabric& fabric, const FlowSimOptions& options,
                       const Progress& progress = {});

// Memory the simulation would need (GiB): routing tables, per-resource loads and, where the
// options make it store flows, the flows.
double estimate_memory_gib(const topo::Fabric& fabric, const FlowSimOptions& options);

nlohmann::json to_json(const FlowSimResult& result);
std::string format_result(const FlowSimResult& result);

}  // namespace astral::seer
