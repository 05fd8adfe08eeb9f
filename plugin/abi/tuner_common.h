/* Astral's own declarations of what every NCCL tuner interface version shares: the collective
 * kinds, algorithm and protocol indices and the "ignore" marker of the cost table, written from
 * NCCL 2.28.9's documented tuner ABI (reference: nccl-plugin-abi.md §3.1). Plain C. */
#ifndef ASTRAL_ABI_TUNER_COMMON_H
#define ASTRAL_ABI_TUNER_COMMON_H

#include "nccl_common.h"

/* The collectives that reach getCollInfo (Send/Recv and AlltoAll never do). An int-sized enum. */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4
} ncclFunc_t;
#define NCCL_NUM_FUNCTIONS 5

#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

/* A cost-table entry NCCL disabled (or the plugin forbids). The table is one contiguous
 * float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] passed cast to float**: index it as
 * ((float (*)[NCCL_NUM_PROTOCOLS])table)[algo][proto], never as a real float**. */
#define NCCL_ALGO_PROTO_IGNORE -1.0

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2

ASTRAL_ABI_ASSERT(sizeof(ncclFunc_t) == 4, "ncclFunc_t is an int-sized enum");

#endif
