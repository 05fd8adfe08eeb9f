/* ncclTuner_v4_t (older NCCL releases, symbol "ncclTunerPlugin_v4"): init(nRanks, nNodes, logger,
 * &context), the cost-table getCollInfo with regBuff, and destroy (reference:
 * nccl-plugin-abi.md §3.2, "Older versions"). */
#ifndef ASTRAL_ABI_TUNER_V4_H
#define ASTRAL_ABI_TUNER_V4_H

#include "tuner_common.h"

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

ASTRAL_ABI_ASSERT(sizeof(ncclTuner_v4_t) == 4 * sizeof(void*), "ncclTuner_v4_t size");

#endif
