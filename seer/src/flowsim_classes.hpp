#pragma once
// The class engine: uniform all-to-all routed by classes of connections instead of one connection
// at a time. A class is the connections from the NICs under one leaf (and rail) to the GPUs under
// another; its members see the same switches up to the ECMP choices. Per class:
// * host links, NVLink legs (PXN) and endpoint demands are loaded with their multiplicity
//   (counted, not enumerated);
// * ECMP collisions come from the hash model: every QP's hash is computed exactly as the
//   per-connection simulator computes it (PathSelector::walk), and counted per class in a small
//   table that stays in cache, then loaded in bulk;
// * connections a fault makes irregular (a NIC port down, a leaf pair cut off) are routed by the
//   exact per-connection path (TrafficBuilder::exact_connection), only those.
// The loads, connection and subflow counts equal the per-connection simulator's (up to
// floating-point summation order); tests/seer/flowsim_classes_test.cpp checks it.
#include <cstddef>
#include <string>

#include "flowsim_build.hpp"
#include "flowsim_counted.hpp"
#include "flowsim_traffic.hpp"

namespace astral::seer::detail {

struct ClassStats {
  size_t classes = 0;            // (source leaf, destination leaf) classes with traffic
  size_t exact_connections = 0;  // connections routed one by one (irregular)
  size_t counted_classes = 0;    // classes whose ECMP collisions were counted (EcmpCounter)
};

// Whether the class engine can route this job; `why` (when given) says what it lacks.
bool classes_apply(const topo::Fabric& fabric, const Job& job, const FlowSimOptions& options,
                   std::string* why = nullptr);

// Adds the job's traffic to `builder` (between begin_job and end_job, streaming mode). `counted`:
// regular classes' ECMP collisions are counted from the hash model (flowsim_counted.hpp) instead of
// hashed QP by QP.
void route_by_classes(TrafficBuilder& builder, const Job& job, const FlowSimOptions& options,
                      ClassStats& stats, bool counted = false);

}  // namespace astral::seer::detail
