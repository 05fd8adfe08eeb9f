#pragma once
// The version-neutral tuner core behind every ncclTunerPlugin_vN table (plugin/abi/tuner_export.cpp).
// One Context per communicator holds Seer's collective model for that communicator's ranks, nodes
// and fabric, built once at init; getCollInfo only evaluates it (no allocation, no lock).
//
// The tuner is optional to NCCL, so nothing here fails a communicator: a bad setting or input is
// logged and the tuner falls back to defaults or stays out of the way (NCCL's own choice stands).
// Like the net and profiler cores (core/guard.hpp), every call is noexcept and reports
// ncclResult_t: ncclSuccess, or ncclInvalidArgument for input it does not model, with the outputs
// untouched. The ABI layer logs nothing more and returns ncclSuccess to NCCL either way, because
// a tuner error would fail the collective (reference §2.3).
#include <cstddef>
#include <cstdint>

#include "abi/nccl_common.h"
#include "astral/seer/network.hpp"
#include "core/config.hpp"

namespace astral::plugin::tuner {

struct NvlDomains {
  int domains = 0;
  int min_ranks = 0;
  int max_ranks = 0;
};

struct InitArgs {
  uint64_t comm_id = 0;
  std::size_t n_ranks = 1;
  std::size_t n_nodes = 1;
  ncclDebugLogger_t logger = nullptr;
  int abi_version = 5;                            // for the log line
  const NvlDomains* nvl = nullptr;                // v5 only
  const seer::LatencyConstants* nccl = nullptr;   // v5 only: NCCL's latency constants, µs
};

class Context;

// Never null unless memory ran out; a disabled context (ASTRAL_TUNER=off, unusable inputs) makes
// every call below a no-op.
Context* init(const InitArgs& args, const EnvLookup& env) noexcept;

// NCCL's cost table (contiguous float[num_algo][num_proto], µs): entries NCCL disabled (< 0) stay
// disabled, entries Seer does not model keep NCCL's value, the rest get Seer's estimate for
// `num_pipe_ops` aggregated operations. *n_channels is left as NCCL passed it (0 = NCCL decides).
ncclResult_t fill_cost_table(Context* ctx, int coll, std::size_t bytes, int num_pipe_ops,
                             float* table, int num_algo, int num_proto) noexcept;

// The v2 interface: Seer's cheapest algorithm/protocol among those NCCL can run (tree, ring, and
// NVLS when `nvls_supported`), or both left untouched when Seer has no opinion.
ncclResult_t choose(Context* ctx, int coll, std::size_t bytes, bool nvls_supported, int num_pipe_ops,
                    int* algorithm, int* protocol) noexcept;

// The v6 getChunkSize: *chunk_bytes is NCCL's choice for (coll, bytes, algorithm, protocol,
// n_channels), NCCL_ALGO_*/NCCL_PROTO_* numbers. Changed only where Seer's collective model has
// a chunk-size answer, and then never below the protocol's grain; otherwise left as NCCL passed
// it. Inputs the tuner does not model (size 0, an unknown algorithm or protocol) get one WARN per
// communicator and leave the value untouched.
ncclResult_t chunk_size(Context* ctx, int coll, std::size_t bytes, int algorithm, int protocol,
                        int n_channels, std::size_t* chunk_bytes) noexcept;

// NCCL's protocol grain (LL 16, LL128 1920, Simple 512 bytes); 0 for an unknown protocol.
std::size_t protocol_grain(int protocol) noexcept;

// Logs the communicator's summary (calls, choices) and frees the context; null is fine.
void finalize(Context* ctx) noexcept;

// The process environment.
EnvLookup process_env();

}  // namespace astral::plugin::tuner
