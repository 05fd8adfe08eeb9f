/* ncclTuner_v2_t (older NCCL releases, symbol "ncclTunerPlugin_v2"): no cost table; getCollInfo
 * names one algorithm and protocol (NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF: no opinion), told whether
 * CollNet and NVLS are available (reference: nccl-plugin-abi.md §3.2, "Older versions"). */
#ifndef ASTRAL_ABI_TUNER_V2_H
#define ASTRAL_ABI_TUNER_V2_H

#include "tuner_common.h"

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

ASTRAL_ABI_ASSERT(sizeof(ncclTuner_v2_t) == 4 * sizeof(void*), "ncclTuner_v2_t size");

#endif
