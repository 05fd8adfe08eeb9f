// The only file that knows NCCL's tuner plugin versions. It exports ncclTunerPlugin_v6 (NCCL 2.30:
// v5 plus getChunkSize), ncclTunerPlugin_v5 (NCCL 2.28:
// communicator id, NVLink domains and NCCL's tuning constants at init), _v4 and _v3 (cost table,
// with and without regBuff) and _v2 (one algorithm/protocol answer), and maps each onto the
// version-neutral core (plugin/src/tuner). Nothing is thrown across NCCL, and no call returns an
// error: an error from init would abort the communicator and one from getCollInfo the collective
// (reference §3.2), while NCCL tunes well enough on its own.
#include <cstring>

#include "abi/tuner_v2.h"
#include "abi/tuner_v3.h"
#include "abi/tuner_v4.h"
#include "abi/tuner_v5.h"
#include "abi/tuner_v6.h"
#include "tuner/tuner.hpp"

#define ASTRAL_EXPORT __attribute__((visibility("default")))

namespace {
namespace tuner = astral::plugin::tuner;
using astral::seer::LatencyConstants;

constexpr const char* kTunerName = "Astral";

// Our latency constants have NCCL's v5 layout; any drift breaks the build, not a job.
static_assert(sizeof(LatencyConstants::base) == sizeof(ncclTunerConstants_v5_t::baseLatencies));
static_assert(sizeof(LatencyConstants::hw) == sizeof(ncclTunerConstants_v5_t::hwLatencies));
static_assert(NCCL_NUM_ALGORITHMS == astral::seer::kAlgorithms);
static_assert(NCCL_NUM_PROTOCOLS == astral::seer::kProtocols);
static_assert(NCCL_ALGO_RING == int(astral::seer::Algorithm::kRing));
static_assert(NCCL_PROTO_SIMPLE == int(astral::seer::Protocol::kSimple));
static_assert(NCCL_PROTO_LL == int(astral::seer::Protocol::kLL));
static_assert(NCCL_PROTO_LL128 == int(astral::seer::Protocol::kLL128));

tuner::Context* tuner_as_context(void* ctx) { return static_cast<tuner::Context*>(ctx); }

// What NCCL sees of a tuner call: always ncclSuccess. The core has logged what it did not model
// and left NCCL's values as they were; an error here would fail the collective (reference §2.3).
ncclResult_t as_tuner_result(ncclResult_t /*core_result*/) { return ncclSuccess; }

ncclResult_t tuner_init_common(const tuner::InitArgs& args, void** context) noexcept {
  if (!context) return ncclSuccess;
  *context = tuner::init(args, tuner::process_env());
  return ncclSuccess;  // a null context (out of memory) makes every later call a no-op
}

// ---- v5 -----------------------------------------------------------------------------------------

ncclResult_t tuner_init_v5_v6(int version, void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                              ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl_info,
                              ncclTunerConstants_v5_t* constants) {
  tuner::InitArgs args;
  args.comm_id = comm_id;
  args.n_ranks = n_ranks;
  args.n_nodes = n_nodes;
  args.logger = logger;
  args.abi_version = version;
  tuner::NvlDomains nvl;
  if (nvl_info) {
    nvl = {nvl_info->nNvlDomains, nvl_info->minRanksPerNvlDomain, nvl_info->maxRanksPerNvlDomain};
    args.nvl = &nvl;
  }
  // NCCL's own latency constants (possibly set by NCCL_*_LATENCY variables) are read, not edited:
  // Seer's bandwidth model replaces NCCL's, its latencies start from NCCL's.
  LatencyConstants latencies;
  if (constants) {
    std::memcpy(latencies.base, constants->baseLatencies, sizeof latencies.base);
    std::memcpy(latencies.hw, constants->hwLatencies, sizeof latencies.hw);
    args.nccl = &latencies;
  }
  return tuner_init_common(args, context);
}

ncclResult_t tuner_init_v5(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                           ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl_info,
                           ncclTunerConstants_v5_t* constants) {
  return tuner_init_v5_v6(5, context, comm_id, n_ranks, n_nodes, logger, nvl_info, constants);
}

ncclResult_t tuner_get_coll_info_v4_v5(void* context, ncclFunc_t coll, size_t bytes, int num_pipe_ops,
                                 float** cost_table, int num_algo, int num_proto, int /*reg_buff*/,
                                 int* /*n_channels: 0 keeps NCCL's channel count*/) {
  // NCCL passes its contiguous float[algorithms][protocols] cast to float**.
  return as_tuner_result(tuner::fill_cost_table(tuner_as_context(context), int(coll), bytes, num_pipe_ops,
                                                reinterpret_cast<float*>(cost_table), num_algo, num_proto));
}

ncclResult_t tuner_finalize(void* context) {
  tuner::finalize(tuner_as_context(context));
  return ncclSuccess;
}

// ---- v6 -----------------------------------------------------------------------------------------

ncclResult_t tuner_init_v6(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                           ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t* nvl_info,
                           ncclTunerConstants_v6_t* constants) {
  return tuner_init_v5_v6(6, context, comm_id, n_ranks, n_nodes, logger, nvl_info, constants);
}

// An error here fails the collective (reference §2.3): always ncclSuccess.
ncclResult_t tuner_get_chunk_size_v6(void* context, ncclFunc_t coll, size_t bytes, int algo, int proto,
                                     int n_channels, size_t* chunk_size) {
  return as_tuner_result(
      tuner::chunk_size(tuner_as_context(context), int(coll), bytes, algo, proto, n_channels, chunk_size));
}

// ---- v4, v3, v2 ---------------------------------------------------------------------------------

ncclResult_t tuner_init_legacy(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, int version,
                         void** context) {
  tuner::InitArgs args;
  args.n_ranks = n_ranks;
  args.n_nodes = n_nodes;
  args.logger = logger;
  args.abi_version = version;
  return tuner_init_common(args, context);
}
ncclResult_t tuner_init_v4(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, void** context) {
  return tuner_init_legacy(n_ranks, n_nodes, logger, 4, context);
}
ncclResult_t tuner_init_v3(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, void** context) {
  return tuner_init_legacy(n_ranks, n_nodes, logger, 3, context);
}
ncclResult_t tuner_init_v2(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, void** context) {
  return tuner_init_legacy(n_ranks, n_nodes, logger, 2, context);
}

ncclResult_t tuner_get_coll_info_v3(void* context, ncclFunc_t coll, size_t bytes, int num_pipe_ops,
                              float** cost_table, int num_algo, int num_proto, int* n_channels) {
  return tuner_get_coll_info_v4_v5(context, coll, bytes, num_pipe_ops, cost_table, num_algo, num_proto, 0,
                             n_channels);
}

ncclResult_t tuner_get_coll_info_v2(void* context, ncclFunc_t coll, size_t bytes, int /*coll_net_support*/,
                              int nvls_support, int num_pipe_ops, int* algorithm, int* protocol,
                              int* /*n_channels*/) {
  // CollNet is never proposed: Seer does not model in-network reduction.
  return as_tuner_result(tuner::choose(tuner_as_context(context), int(coll), bytes, nvls_support == 1,
                                       num_pipe_ops, algorithm, protocol));
}

}  // namespace

extern "C" ASTRAL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = kTunerName,
    .init = tuner_init_v6,
    .getCollInfo = tuner_get_coll_info_v4_v5,
    .finalize = tuner_finalize,
    .getChunkSize = tuner_get_chunk_size_v6,
};

extern "C" ASTRAL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = kTunerName,
    .init = tuner_init_v5,
    .getCollInfo = tuner_get_coll_info_v4_v5,
    .finalize = tuner_finalize,
};

extern "C" ASTRAL_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = kTunerName,
    .init = tuner_init_v4,
    .getCollInfo = tuner_get_coll_info_v4_v5,
    .destroy = tuner_finalize,
};

extern "C" ASTRAL_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = kTunerName,
    .init = tuner_init_v3,
    .getCollInfo = tuner_get_coll_info_v3,
    .destroy = tuner_finalize,
};

extern "C" ASTRAL_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = kTunerName,
    .init = tuner_init_v2,
    .getCollInfo = tuner_get_coll_info_v2,
    .destroy = tuner_finalize,
};
