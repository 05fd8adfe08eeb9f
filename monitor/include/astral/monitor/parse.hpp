#pragma once
// Parsers: one call turns a log file (any mix of NCCL, PyTorch, kernel, switch and BMC lines) or
// a structured dump (Flight Recorder JSON, NCCL RAS, NCCL Inspector, *.events.jsonl) into
// normalised events. Streaming (a file is read in blocks), never fatal: lines that no parser
// knows are counted as unknown, lines that start like a known format but do not finish like it
// are counted as damaged.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astral/monitor/event.hpp"

namespace astral::monitor {

enum class FileKind : uint8_t {
  text_log,         // line logs; each line is recognised on its own
  events_jsonl,     // the normalised event model, one JSON object per line
  flight_recorder,  // PyTorch Flight Recorder dump in JSON (or its Python repr)
  nccl_ras,         // NCCL RAS status (text or JSON)
  nccl_inspector,   // NCCL Inspector profiler JSON objects
  fabric_json,      // fabric description (topo fabric model)
  ibnetdiscover,    // InfiniBand `ibnetdiscover` output
  cabling_csv,      // host,nic,port,switch,switch_port
  astral_trace,     // Astral trace file (monitor/trace)
  nvidia_smi,       // `nvidia-smi -q` dump (clock-event reasons and temperatures per GPU)
  site_layout,      // site layout JSON (facility/site.hpp): read by the bundle loader
  binary,           // not text; skipped
  empty,
};
std::string_view to_string(FileKind);

// Decides from the first bytes of a file (and its name only for ties).
FileKind detect_file_kind(std::string_view head, std::string_view file_name);

struct TimeContext {
  // Year for year-less timestamps (glog MMDD, RFC 3164 syslog). 0: take it from reference_us.
  int year = 0;
  // Offset of the writer's local time from UTC in seconds (local = UTC + offset).
  int64_t tz_offset_s = 0;
  bool tz_known = false;  // false: inferred from reference_us when possible, else UTC assumed
  // When the file was last written (mtime), UTC us; anchors year-less and zone-less times.
  int64_t reference_us = kUnknownTime;
};

struct FileStats {
  std::string path;  // as given (relative to the bundle for bundles)
  FileKind kind = FileKind::text_log;
  std::string host;  // host the file belongs to (bundle folder), may be empty
  uint64_t bytes = 0;
  uint64_t lines = 0;
  uint64_t events = 0;
  uint64_t recognised = 0;  // lines understood that carry no event of their own
  uint64_t unknown = 0;
  uint64_t damaged = 0;
  uint64_t duplicates = 0;  // identical to an earlier line of the same file
  std::vector<std::string> notes;  // e.g. "zone +08:00 inferred from the file time"
};

// A per-rank timing record of one collective (Inspector, Flight Recorder with timing, traces):
// the input of straggler detection.
struct CollectiveSample {
  uint64_t comm_hash = 0;     // or a hash of the process-group name when only that is known
  int64_t seq = -1;
  int rank = -1;
  std::string host;
  std::string op;
  int64_t start_us = kUnknownTime;
  int64_t duration_us = -1;
  uint32_t file = 0;
};

// Anchors between a host's boot-relative kernel clock and wall time (syslog lines that carry
// both), so dmesg dumps of the same host can be dated.
struct UptimeAnchor {
  std::string host;
  int64_t boot_us = 0;  // wall time of boot, UTC us
  bool local = false;   // still in the writer's zone (ParseOptions::defer_zone)
};

struct ParseOptions {
  TimeContext time;
  std::string default_host;  // host of lines that do not name one (bundle folder)
  bool switch_context = false;  // file comes from a switch (bundle switches/ folder)
  uint32_t file_index = 0;
  std::string file_name;     // for messages
  // Leave the zone of local times to the caller (load_bundle decides it across all files, so
  // that one file with a misleading time cannot shift its lines alone).
  bool defer_zone = false;
};

struct ParseResult {
  std::vector<Event> events;
  std::vector<CollectiveSample> samples;
  std::vector<UptimeAnchor> uptime_anchors;
  FileStats stats;
  // Indices into `events` of times read in the writer's zone / without a year, and the zone this
  // file's time suggests (defer_zone): for the bundle-wide decision.
  std::vector<uint32_t> local_events;
  std::vector<uint32_t> yearless_events;
  std::optional<int64_t> zone_guess_s;
};

// Parses content already in memory (tests, fuzzing); `kind` as detected by detect_file_kind.
ParseResult parse_buffer(std::string_view content, FileKind kind, const ParseOptions&);
// Reads and parses a file in blocks. Errors opening the file throw std::runtime_error.
ParseResult parse_file(const std::string& path, const ParseOptions&);

}  // namespace astral::monitor
