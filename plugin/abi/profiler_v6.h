/* ncclProfiler_v6_t (NCCL 2.29.2+): the v5 descriptor plus three copy-engine (CE) event types, same
 * 112-byte descriptor with every v5 member at its v5 offset (reference:
 * nccl-2.30-plugin-changes.md §3). CE events come from the thread that launches the group; NCCL
 * records no states for them. */
#ifndef ASTRAL_ABI_PROFILER_V6_H
#define ASTRAL_ABI_PROFILER_V6_H

#include <stdbool.h>
#include <stddef.h>

#include "abi/profiler_v5.h"

enum {
  ncclProfileCeColl = (1 << 12),  /* v6 */
  ncclProfileCeSync = (1 << 13),  /* v6 */
  ncclProfileCeBatch = (1 << 14)  /* v6 */
};

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy; /* "MC" (NVLS multicast) or "UC" */
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

typedef ncclProfilerEventState_v5_t ncclProfilerEventState_v6_t;
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

/* Measured on x86-64 against NCCL 2.30.7 (reference §7). */
ASTRAL_ABI_ASSERT(sizeof(ncclProfilerEventDescr_v6_t) == 112, "profiler v6 descriptor size");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, coll.parentGroup) == 104, "v6 coll.parentGroup");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.seqNumber) == 24, "v6 ceColl.seqNumber");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.syncStrategy) == 80, "v6 ceColl.syncStrategy");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.intraBatchSync) == 88, "v6 ceColl.intraBatchSync");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.batchSize) == 92, "v6 ceColl.batchSize");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.numBatches) == 96, "v6 ceColl.numBatches");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.ceSeqNum) == 100, "v6 ceColl.ceSeqNum");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceColl.stream) == 104, "v6 ceColl.stream");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceCollSync.nRanks) == 28, "v6 ceCollSync.nRanks");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.totalBytes) == 32, "v6 ceCollBatch.totalBytes");
ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v6_t, ceCollBatch.useIntraSync) == 40, "v6 ceCollBatch.useIntraSync");
ASTRAL_ABI_ASSERT(sizeof(ncclProfilerEventStateArgs_v6_t) == 8, "profiler v6 state args size");
ASTRAL_ABI_ASSERT(sizeof(ncclProfiler_v6_t) == 48, "ncclProfiler_v6_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclProfiler_v6_t, finalize) == 40, "ncclProfiler_v6_t.finalize");

#endif
