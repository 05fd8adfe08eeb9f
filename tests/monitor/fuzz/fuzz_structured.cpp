// libFuzzer target: the structured readers (events.jsonl, Flight Recorder, NCCL Inspector, RAS
// JSON) on arbitrary bytes, whatever the detector says.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "astral/monitor/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::monitor;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOptions o;
  o.default_host = "fuzz";
  o.file_name = "fuzz/nccl_trace_rank_3.json";
  for (FileKind k : {FileKind::events_jsonl, FileKind::flight_recorder, FileKind::nccl_inspector, FileKind::nccl_ras})
    (void)parse_buffer(text, k, o);
  return 0;
}
