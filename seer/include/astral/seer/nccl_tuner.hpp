#pragma once
// What Seer answers for NCCL's tuner interface: the collective model for one communicator, filling
// NCCL's cost table for each collective. The plugin's ABI layer (plugin/) owns NCCL's structs and
// calls this with plain numbers, so the logic is tested without NCCL.
#include <cstddef>

#include "astral/seer/network.hpp"

namespace astral::seer {

class NcclTunerModel {
 public:
  // A communicator of `n_ranks` ranks on `n_nodes` hosts of `net` (NCCL places ranks host by
  // host). `nccl`: NCCL's latency constants when the tuner interface hands them over (v5).
  NcclTunerModel(const Network& net, int n_ranks, int n_nodes, const LatencyConstants* nccl = nullptr);

  // NCCL's getCollInfo: `table` is NCCL's contiguous float[num_algo][num_proto] cost table in µs
  // (one block, indexed table[a * num_proto + p]). Entries NCCL disabled (negative) stay
  // disabled, entries Seer does not model keep NCCL's value, the others get Seer's estimate.
  // `coll_type` is ncclFunc_t (Broadcast 0 ... AllReduce 4); `bytes` NCCL's nBytes. Returns the
  // number of entries written; never throws and never reads or writes outside the table.
  int fill(int coll_type, std::size_t bytes, float* table, int num_algo, int num_proto) const noexcept;

  const CollectiveModel& model() const { return model_; }

 private:
  CollectiveModel model_;
};

// The group NCCL forms for a communicator of n_ranks on n_nodes hosts.
Group communicator_group(int n_ranks, int n_nodes);

}  // namespace astral::seer
