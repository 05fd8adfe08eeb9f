#pragma once
// Job placement and traffic patterns: who sends how many bytes to whom. Per-GPU demands from one
// host to one destination are emitted consecutively, so that the consumer can aggregate the
// shared PXN connection without a map.
#include <astral/seer/flowsim.hpp>
#include <astral/topo/fabric.hpp>
#include <cstdint>
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

// Receives demands in the order above.
class DemandSink {
 public:
  virtual ~DemandSink() = default;
  virtual void demand(int src_gpu, int dst_gpu, double bytes) = 0;
  // Every GPU of src_host except dst_gpu sends `bytes` to dst_gpu (uniform all-to-all: one call
  // instead of one per GPU of the host).
  virtual void host_demand(int src_host, int dst_gpu, double bytes) = 0;
};

// Emits the job's demands in the order above. Uniform and MoE all-to-all stream (they can be
// hundreds of millions); the others are built, sorted and replayed.
void for_each_demand(const topo::Fabric& fabric, const Job& job, const FlowSimOptions& options,
                     std::mt19937_64& rng, DemandSink& sink);

// Upper estimate of the number of demands, to choose between storing flows and streaming.
size_t demand_count(const topo::Fabric& fabric, const Job& job, const FlowSimOptions& options);

// nccl-tests bus-bandwidth factor of the pattern for n ranks.
double busbw_factor(TrafficPattern pattern, int ranks);

}  // namespace astral::seer::detail
