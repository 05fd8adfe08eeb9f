#pragma once
// Generators for the three cluster designs compared by `astral fabric compare`:
//
// * same-rail-t2: Astral's design. Leaves (ToRs) per rail, plane and segment; tier-2 spines that
//   join only the leaves of ONE rail (and plane), so same-rail traffic between segments crosses one
//   ECMP choice and never the core; a core tier joins the rails for cross-rail traffic. Beyond one
//   spine's reach the rail spines come in pods, and the core joins every pod's rail spines, so
//   same-rail traffic between pods crosses it too.
// * fat-tree: the classic rail-optimised fat tree (NVIDIA SuperPOD style). Same leaves, but tier-2
//   spines are shared by all rails; beyond one spine's reach a third tier (pods + core) is added,
//   so traffic between pods crosses two ECMP stages.
// * rail-only: leaves and same-rail spines, no core; cross-rail traffic must be forwarded over
//   NVLink inside the host (PXN), as in Wang et al.'s rail-only design.
//
// Every switch has `radix` ports of `port_gbps`. A host port slower than a switch port uses one lane
// of a broken-out port (e.g. 2 x 200G on a 400G port). Tiers are 1:1 except where
// `oversubscription` is applied: at the top boundary of each design (leaf->spine for 2-tier
// fat-tree and rail-only, spine->core for same-rail-t2 and 3-tier fat-tree).
//
// Each leaf has one link to each spine of its group (so a leaf's uplink choice is the only ECMP
// choice below the core, as in the published designs); spines are only as full as the cluster
// needs. `bundle` builds the fewest spines instead, with parallel leaf-spine links, which adds a
// hashed choice among the parallel links on the way down. Core switches always take parallel
// links from the spines so that their ports are filled.
#include <optional>
#include <string>
#include <string_view>

#include "astral/topo/fabric.hpp"

namespace astral::topo {

enum class FabricKind { kSameRailT2, kFatTree, kRailOnly };

std::optional<FabricKind> parse_fabric_kind(std::string_view text);  // "same-rail-t2" ...
const char* fabric_kind_name(FabricKind kind);

struct GenerateOptions {
  FabricKind kind = FabricKind::kSameRailT2;
  int gpus = 1024;
  int gpus_per_host = 8;  // one NIC (rail) per GPU
  int radix = 128;
  double port_gbps = 400;    // switch port speed
  double nic_gbps = 400;     // per NIC; split over two ports with dual_plane
  double oversubscription = 1.0;
  bool dual_plane = false;   // each NIC has two ports on two leaves in two planes (dual-ToR)
  // Multi-plane NICs: 1, 2 or 4 ports per NIC, port p on a leaf of plane p-1, each plane its own
  // rail fabric up to the core, each port nic_gbps / planes. 0 = 2 with dual_plane, else 1.
  int planes = 0;
  int tiers = 0;             // fat-tree only: 0 = fewest that fit, or force 2 or 3
  bool bundle = false;       // fewest tier-2 switches, parallel leaf-spine links
  double nvlink_gbps = 3600; // per GPU and direction (H100/H200: 450 GB/s)
};

// Builds and validates the fabric. Throws FabricError when the options cannot be built (e.g. more
// GPUs than the core can join at this radix), naming the limit and what to change.
Fabric generate_fabric(const GenerateOptions& options);

// The largest GPU count generate_fabric accepts for these options (other fields as given).
int max_gpus(const GenerateOptions& options);

}  // namespace astral::topo
