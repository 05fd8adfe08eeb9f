/* Astral's own declarations of the types NCCL shares with every plugin (results, logger, device
 * offload handle, profiler callback), written from NCCL 2.28.9's documented ABI
 * (reference: nccl-plugin-abi.md §1.2). Plain C so that a C program can include it too. */
#ifndef ASTRAL_ABI_NCCL_COMMON_H
#define ASTRAL_ABI_NCCL_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define ASTRAL_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define ASTRAL_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7 /* public nccl.h only; a net plugin must never return it */
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 1,
  NCCL_COLL = 2,
  NCCL_P2P = 4,
  NCCL_SHM = 8,
  NCCL_NET = 16,
  NCCL_GRAPH = 32,
  NCCL_TUNING = 64,
  NCCL_ENV = 128,
  NCCL_ALLOC = 256,
  NCCL_CALL = 512,
  NCCL_PROXY = 1024,
  NCCL_NVLS = 2048,
  NCCL_BOOTSTRAP = 4096,
  NCCL_REG = 8192,
  NCCL_PROFILE = 16384,
  NCCL_RAS = 32768,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* Net-plugin events reported to NCCL's profiler (net v10+ init argument). */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop,
  ncclProfilerNetEventUpdate,
  ncclProfilerNetEventUpdateAndStop
};
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* phandle,
                                               int64_t pluginId, void* extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L) /* 1 TB */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#define NCCL_NET_ATTR_UNDEF -1
#define NCCL_NET_MAX_SIZE_P2P (1024 * 1024 * 1024L) /* NCCL's MAX_NET_SIZE: 1 GiB */

/* Device offload: Astral is a host-proxy plugin (HOST, version 0). */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;

/* Sizes measured on x86-64 (reference §1.3). */
ASTRAL_ABI_ASSERT(sizeof(ncclNetDeviceHandle_v11_t) == 32, "ncclNetDeviceHandle_v11_t size");
ASTRAL_ABI_ASSERT(sizeof(ncclResult_t) == 4, "ncclResult_t is an int-sized enum");

#endif
