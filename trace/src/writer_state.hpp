#pragma once
// Writer internals shared by writer.cpp (hot path, chunks) and writer_file.cpp (open, metadata).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "astral/trace/writer.hpp"
#include "clock.hpp"
#include "format.hpp"

namespace astral::trace {

struct Writer::State {
  uint64_t uid = 0;  // unique per writer in this process (never reused)
  std::string path;
  int fd = -1;
  uint8_t* base = nullptr;
  size_t size = 0;
  format::FileHeader* header = nullptr;

  uint32_t clock_source = format::kClockMonotonic;
  double ns_per_tick = 1.0;
  uint32_t chunk_bytes = 0;
  uint32_t chunk_count = 0;
  uint32_t records_per_chunk = 0;  // including the chunk header
  uint64_t chunks_offset = 0;
  bool wrap = true;
  bool wanted[256] = {};  // by EventKind: the event mask expanded

  std::atomic<bool> enabled{true};
  std::atomic<bool> full{false};
  std::atomic<uint64_t> next_ordinal{0};
  std::atomic<uint32_t> next_thread_index{0};
  std::unique_ptr<std::atomic<uint8_t>[]> chunk_busy;  // held by a live thread: never recycled
  std::atomic<uint64_t> next_sync_ticks{0};
  uint64_t sync_interval_ticks = 0;

  // Metadata region (strings, comms, connections), appended under meta_mutex.
  std::mutex meta_mutex;
  uint64_t metadata_offset = 0;
  uint32_t metadata_bytes = 0;
  uint32_t metadata_used = 0;
  bool metadata_full_noted = false;
  std::unordered_map<std::string, StringId> strings;
  StringId next_string = 1;
  static constexpr size_t kStaticCacheSize = 512;
  std::atomic<uint64_t> static_cache[kStaticCacheSize] = {};  // (address << 16) | id

  uint8_t* chunk(uint32_t slot) const noexcept { return base + chunks_offset + uint64_t(slot) * chunk_bytes; }
  uint64_t ticks() const noexcept { return clock::ticks(clock_source); }
  void count_dropped() noexcept {
    std::atomic_ref<uint64_t>(header->dropped_events).fetch_add(1, std::memory_order_relaxed);
  }
  // Appends one metadata entry (header + body); false when the region is full. Caller holds
  // meta_mutex.
  bool append_meta(uint16_t type, const void* body, size_t body_bytes, const void* tail = nullptr,
                   size_t tail_bytes = 0) noexcept;
};

// Emits the writer's warning through the configured function.
void warn(const std::string& message) noexcept;

}  // namespace astral::trace
