#pragma once
// The crash-safe trace writer that runs inside the NCCL plugin.
//
// One file per process, preallocated and mapped; each writing thread owns a chunk of the mapping
// and appends fixed-size records to it with no lock, allocation or system call per event. A
// record is committed by its last store, so a process killed with SIGKILL leaves every completed
// event readable (the page cache holds them). The file has a fixed size: on full it wraps
// (overwriting its oldest chunks; the default) or stops. If the file cannot be created or
// preallocated (unwritable directory, disk full) open() fails with one warning and the caller
// runs untraced. Nothing here throws, blocks on I/O, or aborts.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "astral/trace/event.hpp"
#include "astral/trace/path.hpp"

namespace astral::trace {

enum class OnFull : uint8_t {
  Wrap,  // overwrite the oldest chunks (a flight recorder: keeps the latest events)
  Stop,  // keep the first events, count the rest as dropped
};

struct WriterOptions {
  std::string dir;                    // created if missing
  std::string file_prefix = "astral";  // <prefix>-<host>-<pid>[-<n>].atrace
  uint64_t max_bytes = 64ull << 20;  // whole file, header and metadata included
  OnFull on_full = OnFull::Wrap;
  uint32_t chunk_bytes = 64u << 10;     // per-thread unit of the mapping (power of two, >= 4 KiB)
  uint32_t metadata_bytes = 256u << 10;  // strings, communicators, connections
  uint32_t event_mask = kCategoryAll;   // EventCategory bits
  // Identity in the header; the host name and boot id are read from the system when empty.
  std::string host;
  std::string boot_id;
  int32_t rank = -1;
  uint64_t comm_hash = 0;
  bool use_monotonic_clock = false;  // force clock_gettime ticks (tests)
};

// Where the writer's single warning goes (default: stderr). The plugin routes it to NCCL's logger.
using WarnFunction = void (*)(const char* message);
void set_warn_function(WarnFunction fn) noexcept;

using Ticks = uint64_t;

class Writer {
 public:
  // nullptr when tracing cannot start; *error says why (the warning is also emitted).
  static std::unique_ptr<Writer> open(const WriterOptions& options, std::string* error = nullptr) noexcept;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Whether events of this kind are recorded (the event mask); cheap, for skipping work early.
  bool wants(EventKind kind) const noexcept;
  // The hot path. Stamps the event with the current tick; when `started` is non-zero and the
  // payload is a Transfer, its duration_ns is set to the time since `started` (from now()).
  // An event whose payload does not match its kind is refused and counted.
  void record(const Event& event, Ticks started = 0) noexcept;
  // The writer's clock (for durations): raw ticks, ~15 ns.
  Ticks now() const noexcept;

  // Strings for payload fields. intern() takes a lock (use it at setup, not per event);
  // intern_static() caches by address, lock-free on a hit: only for strings that never change
  // or move (NCCL's function, datatype, algorithm and protocol names).
  StringId intern(std::string_view text) noexcept;
  StringId intern_static(const char* text) noexcept;

  // Persistent descriptions kept in the metadata region (never overwritten by wrapping), each
  // also recorded as an event (CommInit, NetConnect). A connection's path, when the transport
  // has one, is kept in the same entry (at most kMaxPathQps QPs).
  void add_comm(uint64_t comm_hash, const CommInfo& info) noexcept;
  void add_connection(uint64_t comm_hash, const Connection& connection,
                      const NetPath* path = nullptr) noexcept;
  // The process's rank and communicator for the header (the first call wins unless `replace`).
  void set_identity(int32_t rank, int32_t nranks, uint64_t comm_hash, bool replace = false) noexcept;

  // Marks the file closed with a final clock reading; later events are dropped. The mapping
  // stays valid, so a thread still writing is safe.
  void close() noexcept;

  const std::string& path() const noexcept;
  uint64_t dropped_events() const noexcept;
  bool full() const noexcept;  // Stop mode and the file is full

  struct State;

 private:
  explicit Writer(std::unique_ptr<State> state) noexcept;
  size_t encode_path(const NetPath& path, uint8_t* out) noexcept;
  std::unique_ptr<State> state_;
};

// The process-wide writer configured from the environment, created on first use and never
// destroyed (threads of the job may write until the process ends). nullptr when tracing is off:
//   ASTRAL_TRACE_DIR      directory for trace files; tracing is off when unset or empty
//   ASTRAL_TRACE_EVENTS   categories: net,coll,proxy,step,kernel or all (default all)
//   ASTRAL_TRACE_MAX_MB   file size bound in MiB (default 64)
//   ASTRAL_TRACE_ON_FULL  wrap (default) or stop
//   ASTRAL_TRACE_PREFIX   file name prefix (default astral)
// The rank in the file name and header comes from RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID /
// PMI_RANK when set, else from the first communicator the profiler sees.
Writer* process_writer() noexcept;
// WriterOptions as process_writer() reads them; false (with *error) when tracing is off or a
// variable is malformed. Exposed for tools and tests.
bool options_from_environment(WriterOptions& options, std::string* error) noexcept;

}  // namespace astral::trace
