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

struct CompareRow {
  std::string fabric_kind;
  std::string routing;
  topo::FabricSummary summary;
  FlowSimResult result;
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
FabricComparison compare_fabrics(int gpus, const topo::GenerateOptions& fabric, const FlowSimOptions& sim,
                           const Progress& progress = {});

nlohmann::json to_json(const FabricComparison& comparison);
std::string format_comparisons(const std::vector<FabricComparison>& comparisons);

}  // namespace astral::seer
