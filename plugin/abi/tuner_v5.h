/* ncclTuner_v5_t (NCCL 2.28, symbol "ncclTunerPlugin_v5"): per-communicator init with the
 * communicator id, NVLink-domain information and NCCL's tuning constants, which the plugin may
 * edit in place (reference: nccl-plugin-abi.md §3.1; layout of libnccl's internal header, with
 * perChMaxNVLSTreeBws, 1152 bytes). */
#ifndef ASTRAL_ABI_TUNER_V5_H
#define ASTRAL_ABI_TUNER_V5_H

#include "tuner_common.h"

typedef struct {
  int nNvlDomains;          /* number of NVLink domains */
  int minRanksPerNvlDomain; /* fewest ranks in one NVLink domain */
  int maxRanksPerNvlDomain; /* most ranks in one NVLink domain */
} ncclNvlDomainInfo_v5_t;

#define NCCL_NUM_ALGORITHMS_V5 7 /* tree, ring, CollNet direct and chain, NVLS, NVLS tree, PAT */
#define NCCL_NUM_PROTOCOLS_V5 3  /* LL/LL128/Simple */
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4   /* Volta, Ampere, Hopper, Blackwell */
#define NCCL_NUM_TUNING_SCALES_V5 3 /* 1 node, 2 nodes, 4+ nodes */

typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];                    /* µs */
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5]; /* µs */
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  /* collCostTable: see NCCL_ALGO_PROTO_IGNORE. *nChannels == 0 keeps NCCL's choice. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

/* Sizes measured on x86-64 against libnccl 2.28.9 (reference §3.1). */
ASTRAL_ABI_ASSERT(sizeof(ncclNvlDomainInfo_v5_t) == 12, "ncclNvlDomainInfo_v5_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclTunerConstants_v5_t) == 1152, "ncclTunerConstants_v5_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclTuner_v5_t) == 4 * sizeof(void*), "ncclTuner_v5_t size");

#endif
