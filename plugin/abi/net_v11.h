/* ncclNet_v11_t: the net plugin interface NCCL 2.28 looks up first ("ncclNetPlugin_v11").
 * Our own declaration from the documented ABI (reference: nccl-plugin-abi.md §1.3). v11 is used by
 * NCCL without a wrapper; init/finalize are per communicator. */
#ifndef ASTRAL_ABI_NET_V11_H
#define ASTRAL_ABI_NET_V11_H

#include "nccl_common.h"

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v11_t;

typedef struct {
  int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF or a plugin-specific value */
} ncclNetCommConfig_v11_t;

typedef struct {
  char* name;         /* unique per device: the key of the NIC in NCCL's topology */
  char* pciPath;      /* sysfs path of the PCI device; pairs the NIC with its GPUs */
  uint64_t guid;      /* NIC chip; with port identifies a physical port */
  int ptrSupport;     /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
  int regIsGlobal;    /* regMr is not tied to one comm */
  int forceFlush;     /* force iflush after GPU receives */
  int speed;          /* Mbps */
  int port;           /* port number */
  float latency;      /* microseconds, 0 = NCCL default */
  int maxComms;       /* maximum number of comms */
  int maxRecvs;       /* maximum grouped receives per irecv */
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes; /* in (0, NCCL_MAX_NET_SIZE_BYTES] */
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;    /* bit mask of ncclFunc_t values */
  uint32_t algo;  /* bit mask of NCCL_ALGO_* */
  uint32_t proto; /* bit mask of NCCL_PROTO_* */
} ncclNetAttr_v11_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

/* Sizes and offsets measured on x86-64 against NCCL 2.28.9's headers (reference §1.3). */
ASTRAL_ABI_ASSERT(sizeof(ncclNet_v11_t) == 176, "ncclNet_v11_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v11_t, finalize) == 160, "ncclNet_v11_t.finalize offset");
ASTRAL_ABI_ASSERT(offsetof(ncclNet_v11_t, setNetAttr) == 168, "ncclNet_v11_t.setNetAttr offset");
ASTRAL_ABI_ASSERT(sizeof(ncclNetProperties_v11_t) == 112, "ncclNetProperties_v11_t size");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, vProps) == 64, "props.vProps offset");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "props.maxP2pBytes");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96, "props.maxCollBytes");
ASTRAL_ABI_ASSERT(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104,
                  "props.maxMultiRequestSize offset");
ASTRAL_ABI_ASSERT(sizeof(ncclNetAttr_v11_t) == 44, "ncclNetAttr_v11_t size");

#endif
