#pragma once
// Reading Astral trace files (the monitor's entry point to the plugin's traces).
//
//   auto file = astral::trace::read_trace_file("astral-r0-node1-4242.atrace");
//   for (const Event& e : file.events)
//     if (auto* t = e.as<Transfer>()) ...   // e.time_ns: CLOCK_MONOTONIC of file.info.host
//
// A file from a killed, crashed or still-running writer reads fine: every committed record is
// returned, and what could not be read is counted in `damage` instead of failing. Only a file
// that is not a trace at all (or whose header is unusable) throws TraceError.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "astral/trace/event.hpp"
#include "astral/trace/path.hpp"

namespace astral::trace {

struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// No real clock reads 2^62 ns (146 years of uptime, or the year 2116). The reader ignores clock
// readings at or above it as damage and keeps every event time below it, so sums and differences
// of times and clock offsets of files it returns never overflow int64_t.
inline constexpr uint64_t kMaxClockNs = uint64_t(1) << 62;

struct FileInfo {
  std::string path;
  uint16_t version = 0;
  std::string host;
  std::string boot_id;  // same boot id = same CLOCK_MONOTONIC
  std::string writer;   // "astral 0.1.0"
  int32_t pid = 0;
  int32_t rank = -1;  // -1 when the writer never learned it
  int32_t nranks = 0;
  uint64_t comm_hash = 0;
  uint64_t start_mono_ns = 0;
  uint64_t start_wall_ns = 0;
  bool closed = false;  // the writer closed the file (false: killed, crashed or still running)
  bool wraps = false;   // OnFull::Wrap: oldest chunks are overwritten when full
  uint32_t event_mask = 0;
  std::string clock_source;  // "tsc", "monotonic", "arm-counter"
  uint64_t file_bytes = 0;
  uint32_t chunk_bytes = 0;
  uint32_t chunk_count = 0;
};

// What could not be read. Damage never stops the reader: the rest of the file is returned.
struct Damage {
  uint64_t corrupt_records = 0;     // checksum mismatch
  uint64_t incomplete_records = 0;  // started but never committed: the writer died mid-record
  uint64_t unknown_records = 0;     // valid, but of a kind this reader does not know
  uint64_t corrupt_chunks = 0;      // chunk header damaged: the chunk's records are skipped
  uint64_t corrupt_metadata = 0;    // damaged string / communicator / connection entries
  uint64_t truncated_bytes = 0;     // the file is shorter than its header says
  uint64_t bad_clock_readings = 0;  // header or sync readings >= kMaxClockNs: ignored
  std::vector<std::string> notes;   // one line per kind of damage, for people
  // Damage that means bytes were lost or altered (incomplete records alone are a normal
  // consequence of a killed writer).
  bool corrupt() const noexcept {
    return corrupt_records || unknown_records || corrupt_chunks || corrupt_metadata || truncated_bytes ||
           bad_clock_readings;
  }
};

struct CommRecord {
  uint64_t comm_hash = 0;
  CommInfo info;
};
struct ConnectionRecord {
  ConnectionRecord() = default;
  // {comm_hash, connection} keeps working as it did before paths existed.
  ConnectionRecord(uint64_t hash, const Connection& c, std::optional<NetPath> p = std::nullopt)
      : comm_hash(hash), connection(c), path(std::move(p)) {}
  uint64_t comm_hash = 0;
  Connection connection;
  std::optional<NetPath> path;  // the transport's fabric path (ib); absent for tcp and old files
};
struct ClockPoint {
  uint64_t mono_ns = 0;
  uint64_t wall_ns = 0;
};

struct TraceFile {
  FileInfo info;
  std::vector<Event> events;  // sorted by time_ns (ties: thread, then write order)
  std::vector<std::string> strings;
  std::vector<CommRecord> comms;
  std::vector<ConnectionRecord> connections;
  std::vector<ClockPoint> clock;  // wall-clock readings against monotonic, sorted
  Damage damage;
  uint64_t dropped_events = 0;   // the writer had no room (Stop mode full, or no free chunk)
  uint64_t rejected_events = 0;  // malformed events the writer refused
  uint64_t recycled_chunks = 0;  // Wrap mode: chunks of history overwritten
  uint32_t threads = 0;          // writing threads seen

  std::string_view str(StringId id) const noexcept;  // "" for 0, "?" for an unknown id
  const Connection* connection(uint64_t conn_id) const noexcept;
  // The path of this file's end of connection `conn_id` (its sending or receiving end when
  // `is_send` says which: a process may hold both), or null (tcp, a writer before paths).
  const NetPath* connection_path(uint64_t conn_id, std::optional<bool> is_send = std::nullopt) const noexcept;
  const CommInfo* comm(uint64_t comm_hash) const noexcept;
  // CLOCK_REALTIME minus CLOCK_MONOTONIC (median of the readings): the wall-clock fallback
  // for placing this file on a cluster timeline.
  int64_t wall_offset_ns() const noexcept;
};

TraceFile read_trace_file(const std::string& path);
TraceFile read_trace_bytes(const uint8_t* data, size_t size, const std::string& name = "<memory>");

// Trace files named by `paths`: files as given, folders searched recursively for *.atrace.
// Throws TraceError naming a path that does not exist.
std::vector<std::string> find_trace_files(const std::vector<std::string>& paths);

}  // namespace astral::trace
