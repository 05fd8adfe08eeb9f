/* ncclProfiler_v1_t (NCCL 2.22): function, datatype, algorithm and protocol as small integers
 * (NCCL's enum values; names in profiler_export.cpp), commHash in the descriptors. */
#ifndef ASTRAL_ABI_PROFILER_V1_H
#define ASTRAL_ABI_PROFILER_V1_H

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
      uint8_t func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype;
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;
      uint8_t proto;
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
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
  };
} ncclProfilerEventDescr_v1_t;

typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v1_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v1_t eState,
                                   ncclProfilerEventStateArgs_v1_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v1_t;

ASTRAL_ABI_ASSERT(offsetof(ncclProfilerEventDescr_v1_t, coll) == 24, "profiler v1 descriptor union offset");

#endif
