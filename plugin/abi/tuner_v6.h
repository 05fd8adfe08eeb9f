/* ncclTuner_v6_t (NCCL 2.30.3+, symbol "ncclTunerPlugin_v6"): v5's four members plus an optional
 * getChunkSize, called after NCCL chose algorithm, protocol and channels (reference:
 * nccl-2.30-plugin-changes.md §2). The constants and NVLink-domain types are v5's. */
#ifndef ASTRAL_ABI_TUNER_V6_H
#define ASTRAL_ABI_TUNER_V6_H

#include "tuner_v5.h"

typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

/* NCCL rounds the chunk size down to a multiple of these (ncclProtoGrainSize); a value below
 * the grain becomes 0 and NCCL then divides by it. */
#define NCCL_PROTO_GRAIN_LL 16
#define NCCL_PROTO_GRAIN_LL128 1920
#define NCCL_PROTO_GRAIN_SIMPLE 512

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
  /* algo and proto are NCCL_ALGO_ and NCCL_PROTO_ numbers (not bit masks). An error fails the
   * collective; a value above the protocol buffer is clamped by NCCL. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

/* Measured on x86-64 against NCCL 2.30.7 (reference §7). */
ASTRAL_ABI_ASSERT(sizeof(ncclTuner_v6_t) == 40, "ncclTuner_v6_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclTuner_v6_t, finalize) == 24, "ncclTuner_v6_t.finalize offset");
ASTRAL_ABI_ASSERT(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "ncclTuner_v6_t.getChunkSize");
ASTRAL_ABI_ASSERT(sizeof(ncclNvlDomainInfo_v6_t) == 12, "ncclNvlDomainInfo_v6_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclTunerConstants_v6_t) == 1152, "ncclTunerConstants_v6_t size");

#endif
