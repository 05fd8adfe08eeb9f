#pragma once
// The net transport's own record of its work: with ASTRAL_TRACE_DIR set, every connection,
// transfer, failure and close goes to this process's trace file (trace/), and every
// transfer NCCL's profiler asked about is reported to it through the profiler callback, so the
// profiler can tie it to the proxy step, and so to the collective, it serves.
//
// Both cost nothing when off: no observer is created (one branch per transfer), and the
// profiler callback is called only when NCCL passed one and a step handle with the transfer.
#include <cstdint>
#include <memory>

#include "abi/nccl_common.h"
#include "astral/plugin/observer.hpp"
#include "astral/trace/event.hpp"
#include "astral/trace/writer.hpp"

namespace astral::plugin {

// The request id of message `sequence` on a connection: a pure function of keys both ends know
// (commHash, connection id, sequence), so the sender's and the receiver's records join.
inline uint64_t message_request_id(const ConnectionInfo& connection, uint32_t sequence) noexcept {
  return trace::request_id(trace::MessageKeys{connection.comm_id, connection.connection_id, sequence});
}

// The process trace writer (trace/), its one warning routed to NCCL's logger; null when
// tracing is off. Shared by the net transport and the profiler: one file per process.
trace::Writer* process_trace_writer() noexcept;

// An observer writing to the process trace file, or null when tracing is off (ASTRAL_TRACE_DIR
// unset, the file could not be created: one WARN then) or the "net" category is masked out.
std::shared_ptr<NetObserver> make_trace_observer(uint64_t comm_id);

// NCCL's profiler callback for one transfer (net v10+). started: at posting, fills *event with
// NCCL's handle (null when the profiler does not want net events). finished: at completion,
// sends the final description (a receive's request id is known only now) and stops the event.
void profiler_transfer_started(ncclProfilerCallback_t callback, const TransferInfo& transfer,
                               void** event) noexcept;
void profiler_transfer_finished(ncclProfilerCallback_t callback, const TransferInfo& transfer,
                                void** event) noexcept;

}  // namespace astral::plugin
