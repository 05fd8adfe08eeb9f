#pragma once
// Chrome trace JSON (opens in Perfetto UI and chrome://tracing) for a set of trace files.
//
// Layout: a process per host; tracks per rank ("rank 3": groups, collectives, p2p), per rank and
// channel ("rank 3 ch 1": proxy ops; "... steps": proxy steps) and per rank and connection
// ("rank 3 net -> node2 mlx5_0": transfers). Overlapping slices on a track are spread over
// numbered lanes so every track nests properly. Each matched send/receive pair is joined by a
// flow arrow (bind_id = the request id). Work that never finished (a hang, a killed rank) ends at
// the last event of its file and is marked "incomplete".
#include <cstdint>
#include <ostream>
#include <vector>

#include "astral/trace/cluster.hpp"

namespace astral::trace {

struct ChromeExportSummary {
  size_t slices = 0;
  size_t instants = 0;
  size_t flows = 0;       // send -> receive arrows
  size_t incomplete = 0;  // slices with a begin and no end
  int64_t t0_ns = 0;      // cluster time of ts = 0 (roughly ns since the Unix epoch)
};

ChromeExportSummary write_chrome_trace(std::ostream& out, const std::vector<TraceFile>& files,
                                       const Matching& matching, const Alignment& alignment);

}  // namespace astral::trace
