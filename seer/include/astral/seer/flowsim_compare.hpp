#pragma once
// `astral fabric compare`: the same traffic on a rail-optimised fat tree and on a same-rail Tier-2
// fabric of the same GPU count, switch radix and host design.
//
// Rows (each a fabric and a routing):
//   fat-tree ecmp              the traditional baseline: every QP hashed at every stage, no PXN
//   fat-tree same-rail         the same fabric with NCCL's default PXN (rail-aligned traffic)
//   same-rail-t2 same-rail     Astral: PXN onto the rail, one ECMP choice among same-rail spines
//   same-rail-t2 same-rail-pinned   the same with the spine pinned by destination port
// gain = efficiency(same-rail-t2 same-rail) / efficiency(fat-tree ecmp) - 1.
#include <nlohmann/json_fwd.hpp>

#include <astral/topo/fabric_generate.hpp>
#include <astral/topo/fabric_summary.hpp>
#include <string>
#include <vector>

#include "astral/seer/flowsim.hpp"

namespace astral::seer {

// One failure case on one row: the element failed (chosen the same way in every design), its blast
// radius (GPUs whose NIC lost every port / some port) and the all-to-all and ring all-reduce
// outcomes with it.
struct FailureOutcome {
  std::string failure;  // "spine" | "tor" | "nic-port" | "links:K"
  std::string element;  // "s0-00", "r0-00a", "node0001:mlx5_0:1", "12 random links"
  int gpus_cut_off = 0, gpus_degraded = 0;
  double alltoall_efficiency = 0, allreduce_efficiency = 0;  // relative to the ideal
  double alltoall_slowdown = 0, allreduce_slowdown = 0;      // completion / no-failure completion - 1
};

struct CompareRow {
  std::string fabric_kind;
  std::string routing;
  topo::FabricSummary summary;
  FlowSimResult result;
  double allreduce_efficiency = 0;  // ring all-reduce, only when failures are asked
  std::vector<FailureOutcome> failures;
};

struct FabricComparison {
  int gpus = 0;
  std::vector<CompareRow> rows;
  double gain = 0;          // same-rail-t2 same-rail vs fat-tree ecmp
  double gain_vs_pxn = 0;   // same-rail-t2 same-rail vs fat-tree same-rail (PXN)
  double pinned_gain = 0;   // same-rail-t2 same-rail-pinned vs fat-tree ecmp
};

// Generates both fabrics from `fabric` (kind and gpus are set per row) and runs `sim` with each
// row's routing; sim.routing.seed and polarisation are kept, its choice/pxn replaced.
// `failures`: cases run on every row ("spine", "tor", "nic-port", "links:K"); throws
// std::invalid_argument for an unknown case.
FabricComparison compare_fabrics(int gpus, const topo::GenerateOptions& fabric, const FlowSimOptions& sim,
                                 const Progress& progress = {},
                                 const std::vector<std::string>& failures = {});

nlohmann::json to_json(const FabricComparison& comparison);
std::string format_comparisons(const std::vector<FabricComparison>& comparisons);

}  // namespace astral::seer
