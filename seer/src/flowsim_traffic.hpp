#pragma once
// Job placement and traffic patterns: who sends how many bytes to whom. Demands are emitted
// grouped by source host, then by destination GPU, then by source GPU, so that the consumer can
// aggregate PXN connections and NVLink transfers without a map.
#include <astral/seer/flowsim.hpp>
#include <astral/topo/fabric.hpp>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace astral::seer::detail {

struct Job {
  std::vector<int> hosts;  // in rank order
  std::vector<int> gpus;   // global GPU indices in rank order (host by host)
};

// Allocates round(fill x hosts) hosts to `jobs` jobs: packed = contiguous blocks in host order,
// fragmented = hosts drawn at random from the whole cluster, in random rank order (ranks follow the
// scheduler's host list, which knows nothing of leaves).
std::vector<Job> place_jobs(const topo::Fabric& fabric, int jobs, double fill, Placement placement,
                            std::mt19937_64& rng);

using DemandFn = std::function<void(int src_gpu, int dst_gpu, double bytes)>;

// Emits the job's demands in the order above. Uniform and MoE all-to-all stream (they can be
// hundreds of millions); the others are built, sorted and replayed.
void for_each_demand(const topo::Fabric& fabric, const Job& job, const FlowSimOptions& options,
                     std::mt19937_64& rng, const DemandFn& emit);

// Upper estimate of the number of demands, to choose between storing flows and streaming.
size_t demand_count(const topo::Fabric& fabric, const Job& job, const FlowSimOptions& options);

// nccl-tests bus-bandwidth factor of the pattern for n ranks.
double busbw_factor(TrafficPattern pattern, int ranks);

}  // namespace astral::seer::detail
