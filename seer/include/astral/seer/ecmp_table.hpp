#pragma once
// The ECMP-efficiency table: what the flow simulator measured on one fabric, per traffic pattern,
// group (communicator) size, placement and QP count, for Seer's network model to read instead of
// a uniform-fabric assumption. Format (docs/fabric.md §7):
//
//   {"format": "astral-ecmp-efficiency", "version": 1,
//    "fabric": {"name", "design", "gpus", "rails", "planes", "radix", "tiers", "oversubscription"},
//    "hash_model": {"routing", "polarisation", "balance", "seed"}, "bytes_per_gpu": ...,
//    "entries": [{"pattern": "alltoall", "placement": "packed", "group_size": 64, "qps": 1,
//                 "tier": 2, "ranks_per_leaf": 8, "efficiency": 0.97}, ...]}
//
// efficiency = ideal / simulated completion of the pattern on that group alone (1 = the network
// adds nothing beyond the endpoints' own bandwidth); tier = the highest switch tier its traffic
// crossed; ranks_per_leaf = the group's hosts under one leaf (per rail), as placed.
#include <nlohmann/json_fwd.hpp>

#include <astral/topo/fabric.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astral/seer/flowsim.hpp"
#include "astral/seer/network.hpp"

namespace astral::seer {

inline constexpr const char* kEcmpTableFormat = "astral-ecmp-efficiency";
inline constexpr int kEcmpTableVersion = 1;

struct EcmpEntry {
  std::string pattern;    // "alltoall" | "ring" | "tree" | "moe" | "permutation"
  std::string placement;  // "packed" | "fragmented"
  int group_size = 0;     // GPUs in the group
  int qps = 1;
  int tier = 1;
  int ranks_per_leaf = 1;
  double efficiency = 1;
};

struct EcmpTable {
  std::string fabric_name, design;
  int gpus = 0, rails = 1, planes = 1, radix = 0, tiers = 0;
  double oversubscription = 1;
  std::string routing, balance;
  double polarisation = 0;
  std::uint64_t seed = 1;
  double bytes_per_gpu = 0;
  std::vector<EcmpEntry> entries;
};

struct EcmpTableOptions {
  FlowSimOptions sim;  // routing, balance, polarisation, seed, bytes, faults; pattern/qps/placement per entry
  std::vector<TrafficPattern> patterns{TrafficPattern::kAllToAll, TrafficPattern::kRingAllReduce};
  std::vector<Placement> placements{Placement::kPacked, Placement::kFragmented};
  std::vector<int> qps{1, 4};
  int min_group_hosts = 2;  // group sizes: this many hosts, doubling up to the whole fabric
};

// Runs one simulation per entry (group sizes x patterns x placements x QPs).
EcmpTable make_ecmp_table(const topo::Fabric& fabric, const EcmpTableOptions& options,
                          const Progress& progress = {});

nlohmann::json to_json(const EcmpTable& table);
// Throws SpecError naming the field ("ecmp table entries[3].efficiency: ...").
EcmpTable ecmp_table_from_json(const nlohmann::json& doc);
EcmpTable load_ecmp_table(const std::string& path);

// The entry nearest to a group: same pattern ("all-to-all"/"alltoall", "all-reduce"/"ring"), the
// same placement when the table has it, then the nearest group size and QP count on a log scale
// (ties: the smaller group). nullopt when the table has no entry of that pattern.
std::optional<EcmpEntry> nearest_entry(const EcmpTable& table, std::string_view pattern,
                                       int group_size, int qps = 1,
                                       std::string_view placement = "packed");

// Loads the table at `path` onto the network it was simulated on. A table of another fabric size
// would describe other groups, so that is a SpecError naming the file and both sizes.
void attach_ecmp_table(Network& network, const std::string& path);

}  // namespace astral::seer
