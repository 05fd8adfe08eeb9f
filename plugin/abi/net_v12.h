/* ncclNet_v12_t: the net plugin interface NCCL 2.30 looks up first ("ncclNetPlugin_v12").
 * Our own declaration from the documented ABI (reference: nccl-2.30-plugin-changes.md §1.2-1.3).
 * The function table is v11's; the properties are not v11 plus a tail: vProps holds 8 devices,
 * which moves every later field by 16 bytes, and railId/planeId are new at the end. */
#ifndef ASTRAL_ABI_NET_V12_H
#define ASTRAL_ABI_NET_V12_H

#include "nccl_common.h"

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF -1 /* railId/planeId: not assigned */

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
  int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a plugin-specific value */
} ncclNetCommConfig_v12_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed; /* Mbps */
  int port;
  float latency; /* microseconds, 0 = NCCL default */
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* same value on the same rail of every node; NCCL_NET_ID_UNDEF if unknown */
  int16_t planeId; /* NICs on different planes are never paired by NCCL's graph search */
} ncclNetProperties_v12_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v12_t;

typedef struct {
  ncclNetCommAttr_v12_t sendCommAttr;
  ncclNetCommAttr_v12_t recvCommAttr;
  uint32_t op;    /* bit mask of ncclFunc_t values; 0xFFFFFFFF = undefined */
  uint32_t algo;  /* bit mask of NCCL_ALGO_*; stale on p2p ops */
  uint32_t proto; /* bit mask of NCCL_PROTO_*; stale on p2p ops */
} ncclNetAttr_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

/* Sizes and offsets measured on x86-64 against NCCL 2.30.7 (reference §7). */
ASTRAL_ABI_ASSERT(sizeof(ncclNet_v12_t) == 176, "ncclNet_v12_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v12_t, getProperties) == 24, "ncclNet_v12_t.getProperties");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v12_t, makeVDevice) == 152, "ncclNet_v12_t.makeVDevice");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v12_t, finalize) == 160, "ncclNet_v12_t.finalize");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v12_t, setNetAttr) == 168, "ncclNet_v12_t.setNetAttr");
ASTRAL_ABI_ASSERT(sizeof(ncclNetProperties_v12_t) == 128, "ncclNetProperties_v12_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, vProps) == 64, "v12 props.vProps");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, vProps.devs) == 68, "v12 props.vProps.devs");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "v12 props.maxP2pBytes");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112, "v12 props.maxCollBytes");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120,
                  "v12 props.maxMultiRequestSize");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, railId) == 124, "v12 props.railId");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v12_t, planeId) == 126, "v12 props.planeId");
ASTRAL_ABI_ASSERT(sizeof(ncclNetVDeviceProps_v12_t) == 36, "ncclNetVDeviceProps_v12_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclNetCommConfig_v12_t) == 4, "ncclNetCommConfig_v12_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclNetCommAttr_v12_t) == 16, "ncclNetCommAttr_v12_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclNetAttr_v12_t) == 44, "ncclNetAttr_v12_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, recvCommAttr) == 16, "v12 attr.recvCommAttr");
ASTRAL_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, op) == 32, "v12 attr.op");
ASTRAL_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, algo) == 36, "v12 attr.algo");
ASTRAL_ABI_ASSERT(offsetof(ncclNetAttr_v12_t, proto) == 40, "v12 attr.proto");
ASTRAL_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v12_t) == 32, "ncclNetDeviceHandle_v12_t size");

#endif
