// libFuzzer target: any byte string given to the trace reader (and the tools behind
// `astral trace export`) must be read or rejected with TraceError: no crash, no hang, no
// unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "astral/trace/chrome_export.hpp"
#include "astral/trace/cluster.hpp"
#include "astral/trace/reader.hpp"
#include "astral/trace/stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::trace;
  try {
    std::vector<TraceFile> files;
    files.push_back(read_trace_bytes(data, size, "fuzz"));
    const Matching m = match_transfers(files);
    const Alignment a = align_clocks(files, m);
    std::ostringstream out;
    write_chrome_trace(out, files, m, a);
    compute_stats(files, m, a);
  } catch (const TraceError&) {
  }
  return 0;
}
