/* ncclProfiler_v3_t (NCCL 2.24): string names, commHash in the descriptors, kernel channel and
 * net plugin events; init without communicator arguments. */
#ifndef ASTRAL_ABI_PROFILER_V3_H
#define ASTRAL_ABI_PROFILER_V3_H

#include <stddef.h>

#include "abi/profiler_common.h"

typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
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
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v3_t;

typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} ncclProfilerEventStateArgs_v3_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v3_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v3_t eState,
                                   ncclProfilerEventStateArgs_v3_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v3_t;

ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v3_t, coll) == 24, "profiler v3 descriptor union offset");

#endif
