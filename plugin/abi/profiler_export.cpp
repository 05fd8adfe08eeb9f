// The only file that knows NCCL's profiler plugin versions. It exports ncclProfiler_v6 (NCCL
// 2.29+, copy-engine events), v5 (2.28) and the v4 (2.25-2.27), v3 (2.24), v2 (2.23) and v1
// (2.22) tables NCCL falls back to,
// converts each version's descriptors into the version-neutral profiler::EventDescr and calls
// the core (plugin/src/profiler). Nothing is thrown across NCCL; every call but init returns
// ncclSuccess whatever happens, as NCCL expects.
#include <cstring>
#include <mutex>
#include <type_traits>

#include "abi/profiler_v1.h"
#include "abi/profiler_v2.h"
#include "abi/profiler_v3.h"
#include "abi/profiler_v4.h"
#include "abi/profiler_v5.h"
#include "abi/profiler_v6.h"
#include "core/log.hpp"
#include "profiler/profiler.hpp"

#define ASTRAL_PROFILER_EXPORT __attribute__((visibility("default")))

namespace astral::plugin::profiler_abi {
namespace {
namespace core = astral::plugin::profiler;
using core::EventType;

constexpr const char* kProfilerName = "Astral";

// NCCL 2.22's enum values (v1 passes numbers where later versions pass names).
const char* v1_name(const char* const* names, size_t n, uint8_t value) {
  return value < n ? names[value] : nullptr;
}
constexpr const char* kV1Funcs[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
                                    "SendRecv",  "Send",   "Recv"};
constexpr const char* kV1Types[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                    "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                    "ncclFloat64", "ncclBfloat16"};
constexpr const char* kV1Algos[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE"};
constexpr const char* kV1Protos[] = {"LL", "LL128", "SIMPLE"};

template <class T>
const char* name_of(T value, const char* const* names, size_t n) {
  if constexpr (std::is_integral_v<T>) {
    return v1_name(names, n, static_cast<uint8_t>(value));
  } else {
    return value;
  }
}

EventType type_of(uint64_t type) {
  switch (type) {
    case ncclProfileGroup: return EventType::kGroup;
    case ncclProfileColl: return EventType::kColl;
    case ncclProfileP2p: return EventType::kP2p;
    case ncclProfileProxyOp: return EventType::kProxyOp;
    case ncclProfileProxyStep: return EventType::kProxyStep;
    case ncclProfileKernelCh: return EventType::kKernelChannel;
    case ncclProfileNetPlugin: return EventType::kNetPlugin;
    case ncclProfileCeColl: return EventType::kCeColl;  // only v6 descriptors carry it
    default: return EventType::kOther;
  }
}

// One converter for every version: members a version lacks are skipped at compile time.
template <class Descr>
core::EventDescr convert(const Descr& d) {
  core::EventDescr e;
  e.type = type_of(d.type);
  e.parent = d.parentObj;
  e.rank = d.rank;
  switch (e.type) {
    case EventType::kColl: {
      const auto& c = d.coll;
      if constexpr (requires { c.commHash; }) e.comm_hash = c.commHash;
      e.seq = c.seqNumber;
      e.func = name_of(c.func, kV1Funcs, std::size(kV1Funcs));
      e.datatype = name_of(c.datatype, kV1Types, std::size(kV1Types));
      e.algo = name_of(c.algo, kV1Algos, std::size(kV1Algos));
      e.proto = name_of(c.proto, kV1Protos, std::size(kV1Protos));
      e.count = c.count;
      e.root = c.root;
      if constexpr (requires { c.nChannels; }) e.n_channels = c.nChannels;
      if constexpr (requires { c.nMaxChannels; }) e.n_channels = c.nMaxChannels;
      e.n_warps = c.nWarps;
      break;
    }
    case EventType::kP2p: {
      const auto& p = d.p2p;
      if constexpr (requires { p.commHash; }) e.comm_hash = p.commHash;
      e.func = name_of(p.func, kV1Funcs, std::size(kV1Funcs));
      e.datatype = name_of(p.datatype, kV1Types, std::size(kV1Types));
      e.count = p.count;
      e.peer = p.peer;
      if constexpr (requires { p.nChannels; }) e.n_channels = p.nChannels;
      break;
    }
    case EventType::kProxyOp:
      e.pid = d.proxyOp.pid;
      e.channel = d.proxyOp.channelId;
      e.peer = d.proxyOp.peer;
      e.n_steps = d.proxyOp.nSteps;
      e.chunk_bytes = d.proxyOp.chunkSize;
      e.is_send = d.proxyOp.isSend != 0;
      break;
    case EventType::kProxyStep:
      e.step = d.proxyStep.step;
      break;
    case EventType::kKernelChannel:
      if constexpr (requires { d.kernelCh.channelId; }) e.channel = d.kernelCh.channelId;
      if constexpr (requires { d.kernelCh.pTimer; }) e.gpu_timer = d.kernelCh.pTimer;
      break;
    case EventType::kNetPlugin:
      if constexpr (requires { d.netPlugin.id; }) {
        e.net_plugin_id = d.netPlugin.id;
        e.net_data = d.netPlugin.data;
      }
      break;
    case EventType::kCeColl:
      // Read only through the CE member; a pre-v6 descriptor never carries this type.
      if constexpr (requires { d.ceColl.syncStrategy; }) {
        const auto& c = d.ceColl;
        e.seq = c.seqNumber;
        e.func = c.func;
        e.datatype = c.datatype;
        e.algo = "CE";
        e.proto = c.syncStrategy;  // "MC" or "UC": how the CE steps synchronise
        e.count = c.count;
        e.root = c.root;
      } else {
        e.type = EventType::kOther;
      }
      break;
    case EventType::kGroup:
    case EventType::kOther:
      break;
  }
  return e;
}

// Every version's state arguments start with one 8-byte member in each union alternative.
template <class Args>
core::StateArgs state_args(const Args* args) {
  static_assert(sizeof(Args) >= sizeof(uint64_t));
  core::StateArgs a;
  if (args) {
    std::memcpy(&a.word, args, sizeof a.word);
    a.present = true;
  }
  return a;
}

// Mask bits NCCL versions before 2.24 do not know.
constexpr int kV1V2Events = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                            ncclProfileProxyStep | ncclProfileProxyCtrl;

template <class Descr>
ncclResult_t start_event(void* context, void** handle, Descr* descr) {
  if (!handle) return ncclSuccess;
  *handle = nullptr;
  if (!descr) return ncclSuccess;
  return core::start_event(context, handle, convert(*descr));
}
template <class State, class Args>
ncclResult_t record_state(void* handle, State state, Args* args) {
  return core::record_state(handle, static_cast<int>(state), state_args(args));
}
ncclResult_t stop_event(void* handle) { return core::stop_event(handle); }
ncclResult_t finalize(void* context) { return core::finalize(context); }

// Which table NCCL bound, said once per process (tools/gpu-check reads it from NCCL_DEBUG=INFO).
void announce_version(int version) {
  static std::once_flag once;
  std::call_once(once, [&] { ASTRAL_INFO("profiler: NCCL bound ncclProfiler_v{}", version); });
}

ncclResult_t init_with_logger(int version, void** context, uint64_t comm_id, int* mask, const char* name,
                              int nnodes, int nranks, int rank, ncclDebugLogger_t logger) {
  if (logger && !astral::plugin::logger()) astral::plugin::set_logger(logger);
  announce_version(version);
  core::CommDescr comm{comm_id, name, nnodes, nranks, rank};
  return core::init(context, mask, &comm);
}
ncclResult_t init_v5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
                     int rank, ncclDebugLogger_t logger) {
  return init_with_logger(5, context, comm_id, mask, name, nnodes, nranks, rank, logger);
}
// v6: CE collectives are asked for with the kernel collectives (a v5 table never sees the bits:
// NCCL's v5 adapter clears them).
ncclResult_t init_v6(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
                     int rank, ncclDebugLogger_t logger) {
  ncclResult_t result = init_with_logger(6, context, comm_id, mask, name, nnodes, nranks, rank, logger);
  if (mask && (*mask & ncclProfileColl)) *mask |= ncclProfileCeColl;
  return result;
}
ncclResult_t init_v4(void** context, int* mask, const char* name, uint64_t comm_hash, int nnodes, int nranks,
                     int rank, ncclDebugLogger_t logger) {
  return init_with_logger(4, context, comm_hash, mask, name, nnodes, nranks, rank, logger);
}
ncclResult_t init_v3(void** context, int* mask) { return core::init(context, mask, nullptr); }
ncclResult_t init_v1_v2(void** context, int* mask) {
  ncclResult_t result = core::init(context, mask, nullptr);
  if (mask) *mask &= kV1V2Events;
  return result;
}

}  // namespace
}  // namespace astral::plugin::profiler_abi

namespace pabi = astral::plugin::profiler_abi;

// Every version's table has the same members; only the types of init and the descriptors differ.
template <class Table, class Descr, class State, class Args>
constexpr Table profiler_table(decltype(Table::init) init) {
  return Table{pabi::kProfilerName, init, pabi::start_event<Descr>, pabi::stop_event,
               pabi::record_state<State, Args>, pabi::finalize};
}

extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v6_t ncclProfiler_v6 =
    profiler_table<ncclProfiler_v6_t, ncclProfilerEventDescr_v6_t, ncclProfilerEventState_v6_t,
                   ncclProfilerEventStateArgs_v6_t>(pabi::init_v6);
extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 =
    profiler_table<ncclProfiler_v5_t, ncclProfilerEventDescr_v5_t, ncclProfilerEventState_v5_t,
                   ncclProfilerEventStateArgs_v5_t>(pabi::init_v5);
extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v4_t ncclProfiler_v4 =
    profiler_table<ncclProfiler_v4_t, ncclProfilerEventDescr_v4_t, ncclProfilerEventState_v4_t,
                   ncclProfilerEventStateArgs_v4_t>(pabi::init_v4);
extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v3_t ncclProfiler_v3 =
    profiler_table<ncclProfiler_v3_t, ncclProfilerEventDescr_v3_t, ncclProfilerEventState_v3_t,
                   ncclProfilerEventStateArgs_v3_t>(pabi::init_v3);
extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v2_t ncclProfiler_v2 =
    profiler_table<ncclProfiler_v2_t, ncclProfilerEventDescr_v2_t, ncclProfilerEventState_v2_t,
                   ncclProfilerEventStateArgs_v2_t>(pabi::init_v1_v2);
extern "C" ASTRAL_PROFILER_EXPORT const ncclProfiler_v1_t ncclProfiler_v1 =
    profiler_table<ncclProfiler_v1_t, ncclProfilerEventDescr_v1_t, ncclProfilerEventState_v1_t,
                   ncclProfilerEventStateArgs_v1_t>(pabi::init_v1_v2);
