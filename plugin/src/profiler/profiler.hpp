#pragma once
// The profiler plugin's version-neutral core. NCCL reports groups, collectives, p2p operations,
// proxy operations and steps, kernel channels, and (through its profiler callback) our net
// transport's transfers; each is written to the process trace file (ASTRAL_TRACE_DIR) with the
// join keys: commHash, the operation and its sequence number, channel, both ranks and the step,
// so a proxy step's request id (trace::StepKeys) is the same on the sending and the receiving
// rank, and each net transfer is linked to its step, its proxy op and its collective.
//
// plugin/abi/profiler_export.cpp converts each NCCL version's descriptors into EventDescr.
// Tracing off (ASTRAL_TRACE_DIR unset): init sets NCCL's activation mask to 0, so NCCL calls
// nothing else. Handles come from per-communicator rings that live until finalize, never from
// the heap per event: NCCL may start a proxy op after it stopped the op's collective, and still
// hand us the collective's handle as the parent.
#include <cstdint>
#include <sys/types.h>

#include "abi/nccl_common.h"

namespace astral::plugin::profiler {

enum class EventType : uint8_t {
  kGroup,
  kColl,
  kP2p,
  kProxyOp,
  kProxyStep,
  kKernelChannel,
  kNetPlugin,
  kCeColl,  // v6: a copy-engine collective, recorded as a collective with algo "CE"
  kOther,   // ProxyCtrl, the v5 API-level events, v6 CE syncs and batches: not recorded
};

// What init knows about the communicator (v4+; v1-v3 learn it from the first collective).
struct CommDescr {
  uint64_t comm_hash = 0;
  const char* name = nullptr;
  int nnodes = 0;
  int nranks = 0;
  int rank = -1;
};

struct EventDescr {
  EventType type = EventType::kOther;
  void* parent = nullptr;  // NCCL's parentObj: a handle we returned earlier, or null
  int rank = -1;
  uint64_t comm_hash = 0;  // v1-v3: in collective and p2p descriptors; 0 otherwise
  // Collective and p2p. Names are NCCL's static strings ("AllReduce", "ncclFloat32", "RING").
  uint64_t seq = 0;
  const char* func = nullptr;
  const char* datatype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  uint64_t count = 0;
  int root = -1;
  int peer = -1;  // p2p and proxy op
  uint8_t n_channels = 0;
  uint8_t n_warps = 0;
  // Proxy op.
  pid_t pid = 0;
  uint8_t channel = 0;  // proxy op and kernel channel
  int n_steps = 0;
  int chunk_bytes = 0;
  bool is_send = false;
  // Proxy step.
  int step = -1;
  // Kernel channel: GPU globaltimer at start (v4+).
  uint64_t gpu_timer = 0;
  // Net plugin event: the transport's id (type | version) and its descriptor.
  int64_t net_plugin_id = 0;
  const void* net_data = nullptr;
  // Group.
  int group_depth = 0;
};

// The first 8 bytes of NCCL's state arguments: transSize (proxy step), the net descriptor
// pointer (net plugin update) or the GPU timer (kernel channel stop), by event type.
struct StateArgs {
  uint64_t word = 0;
  bool present = false;
};

ncclResult_t init(void** context, int* activation_mask, const CommDescr* comm) noexcept;
ncclResult_t start_event(void* context, void** handle, const EventDescr& descr) noexcept;
ncclResult_t stop_event(void* handle) noexcept;
ncclResult_t record_state(void* handle, int state, const StateArgs& args) noexcept;
ncclResult_t finalize(void* context) noexcept;

}  // namespace astral::plugin::profiler
