#pragma once
// Many trace files on one timeline: transfers matched across files by request id, and the
// clocks of the hosts aligned from those matches.
//
//   std::vector<TraceFile> files = ...;             // read_trace_file() for each
//   Matching m = match_transfers(files);
//   Alignment a = align_clocks(files, m);
//   int64_t t = a.to_global(file_index, event.time_ns);   // ns on the cluster timeline
//
// Clock model: files with the same boot id share CLOCK_MONOTONIC (one clock domain, no error).
// Between domains, each matched transfer bounds the offset: its receive cannot complete before
// its send was posted. Bounds from both directions pin the offset of a host pair; the bounds of
// all pairs are solved together for the cluster (difference constraints, so cycles through third
// hosts tighten them too). A domain with no matched transfers falls back to its wall clock.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "astral/trace/reader.hpp"

namespace astral::trace {

inline constexpr size_t kNoFile = static_cast<size_t>(-1);

// One end of a transfer, in the local clock of its file.
struct TransferSide {
  size_t file = kNoFile;
  uint32_t thread = 0;
  bool posted = false, done = false;  // which events were seen
  uint64_t posted_ns = 0;             // CLOCK_MONOTONIC of the file's host
  uint64_t done_ns = 0;
  uint64_t bytes = 0;
  uint64_t conn_id = 0;
  uint64_t seq = 0;
  int32_t peer = -1;  // step level: the remote rank
  bool present() const noexcept { return file != kNoFile; }
};

enum class TransferLevel : uint8_t {
  Message,  // net connection level (NetSend* / NetRecv*)
  Step,     // profiler proxy steps (ProxyStepBegin .. ProxyStepEnd)
};

struct MatchedTransfer {
  uint64_t request_id = 0;
  uint64_t comm_hash = 0;
  TransferLevel level = TransferLevel::Message;
  uint16_t channel = kNoChannel;
  TransferSide send, recv;
};

struct Matching {
  std::vector<MatchedTransfer> transfers;  // matched or one-sided
  size_t matched = 0;          // both sides present
  size_t unmatched_sends = 0;  // the receive is missing (peer untraced, wrapped, or never arrived)
  size_t unmatched_recvs = 0;
  size_t duplicates = 0;  // a side seen in two files (request id collision or duplicated file)
};

Matching match_transfers(const std::vector<TraceFile>& files);

struct ClockDomain {
  std::string host;
  std::string boot_id;
  std::vector<size_t> files;
  int64_t wall_offset_ns = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC (median over its files)
  int64_t offset_ns = 0;       // applied: cluster time = monotonic + offset_ns
  // Half-width of the interval the true offset lies in, relative to `reference`; infinity when
  // only wall clocks (or a one-sided bound) place this domain.
  double uncertainty_ns = std::numeric_limits<double>::infinity();
  size_t reference = 0;  // the domain this one is aligned against (itself for a reference)
  size_t pairs = 0;      // matched transfers between this domain and others
  std::string method;    // "reference", "matched transfers", "one-sided bound", "wall clock"
};

enum class AlignMode : uint8_t {
  Transfers,  // matched transfers, wall clock where there are none (the default)
  WallClock,  // trust every host's CLOCK_REALTIME
};

struct Alignment {
  std::vector<ClockDomain> domains;
  std::vector<size_t> domain_of_file;
  // The slack that had to be added to the bounds to make them consistent (clock drift during
  // the trace, or transfers matched wrongly); 0 when they were consistent.
  double inconsistency_ns = 0;
  size_t constraints = 0;           // cross-domain matched transfers used
  size_t causality_violations = 0;  // receives that still end before their send was posted

  int64_t to_global(size_t file, uint64_t mono_ns) const noexcept {
    return int64_t(mono_ns) + domains[domain_of_file[file]].offset_ns;
  }
};

Alignment align_clocks(const std::vector<TraceFile>& files, const Matching& matching,
                       AlignMode mode = AlignMode::Transfers);

// A display name for the rank that wrote a file: "rank 3", or "pid 4242" when unknown.
std::string rank_label(const TraceFile& file);

}  // namespace astral::trace
