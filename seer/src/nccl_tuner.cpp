// Seer's answers to NCCL's tuner: the collective model written into NCCL's cost table.
#include "astral/seer/nccl_tuner.hpp"

#include <algorithm>

namespace astral::seer {

Group communicator_group(int n_ranks, int n_nodes) {
  Group g;
  g.ranks = std::max(n_ranks, 1);
  n_nodes = std::clamp(n_nodes, 1, g.ranks);
  g.per_host = g.ranks % n_nodes == 0 ? g.ranks / n_nodes : 1;
  g.host_stride = 1;
  return g;
}

NcclTunerModel::NcclTunerModel(const Network& net, int n_ranks, int n_nodes, const LatencyConstants* nccl)
    : model_(net, communicator_group(n_ranks, n_nodes), nccl) {}

int NcclTunerModel::fill(int coll_type, std::size_t bytes, float* table, int num_algo, int num_proto) const noexcept {
  if (!table || num_algo <= 0 || num_proto <= 0) return 0;
  if (coll_type < int(Collective::kBroadcast) || coll_type > int(Collective::kAllReduce)) return 0;
  CostTable ours;
  model_.cost_table(static_cast<Collective>(coll_type), double(bytes), ours);
  const int algos = std::min(num_algo, kAlgorithms), protos = std::min(num_proto, kProtocols);
  int written = 0;
  for (int a = 0; a < algos; ++a)
    for (int p = 0; p < protos; ++p) {
      float& entry = table[a * num_proto + p];
      if (entry < 0 || ours[a][p] < 0) continue;  // NCCL disabled it, or Seer has no opinion
      entry = float(ours[a][p] * 1e6);
      ++written;
    }
  return written;
}

}  // namespace astral::seer
