/* Astral's own declarations of NCCL's profiler plugin constants (event types, event states) and of
 * the descriptor our net transport passes to our profiler through NCCL's profiler callback,
 * written from NCCL 2.28.9's documented ABI (reference: nccl-plugin-abi.md §4). Plain C. */
#ifndef ASTRAL_ABI_PROFILER_COMMON_H
#define ASTRAL_ABI_PROFILER_COMMON_H

#include <stdint.h>
#include <sys/types.h>

#include "abi/nccl_common.h"

/* Event types (eDescr->type, and bits of the activation mask). */
enum {
  ncclProfileGroup = (1 << 0),
  ncclProfileColl = (1 << 1),
  ncclProfileP2p = (1 << 2),
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),   /* v3+ */
  ncclProfileNetPlugin = (1 << 7),  /* v3+ */
  ncclProfileGroupApi = (1 << 8),   /* v5 */
  ncclProfileCollApi = (1 << 9),    /* v5 */
  ncclProfileP2pApi = (1 << 10),    /* v5 */
  ncclProfileKernelLaunch = (1 << 11) /* v5 */
};

/* Event states (recordEventState). One enum for every version: older versions use a subset. */
typedef enum {
  ncclProfilerProxyOpSendPosted = 0, /* deprecated in v4 */
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24
} ncclProfilerEventState_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v1_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v2_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;

/* Net-plugin events: pluginId = type | version. NCCL's own transports use types 1<<16 (IB) and
 * 2<<16 (socket); Astral's transport uses a private type. */
#define NCCL_PROFILER_NET_VER_BITS 16
#define NCCL_PROFILER_NET_TYPE_ASTRAL (7 << 16)
#define ASTRAL_PROFILER_NET_VERSION 1
#define ASTRAL_PROFILER_NET_ID (NCCL_PROFILER_NET_TYPE_ASTRAL | ASTRAL_PROFILER_NET_VERSION)

/* What our transport hands NCCL as extData for each transfer; NCCL passes it to our profiler's
 * startEvent as netPlugin.data (valid only during the call). */
typedef struct {
  uint64_t connection_id; /* identical at both ends of the connection */
  uint64_t request_id;    /* the transfer's message-level request id (trace join key) */
  uint64_t bytes;
  uint32_t sequence; /* message ordinal on the connection */
  uint8_t is_send;
  uint8_t reserved[3];
} astralProfilerNetDescr_v1_t;

#endif
