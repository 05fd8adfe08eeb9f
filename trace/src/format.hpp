#pragma once
// The on-disk layout of an Astral trace file, version 1 (docs/trace-format.md is the prose form).
// Shared by the writer and the reader; everything is little-endian with natural alignment.
//
//   [0, 4096)                         FileHeader (static part checksummed, live part updated)
//   [metadata_offset, +metadata_bytes) append-only entries: strings, communicators, connections
//   [chunks_offset, +count*chunk_bytes) chunk slots; each = ChunkHeader + (chunk_bytes/64 - 1) records
//
// A record is committed by writing its last word (a checksum, never 0) after the rest: a record
// whose commit word is 0 was never finished (the writer died mid-record); a non-zero commit that
// does not match is damage.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "astral/trace/event.hpp"

namespace astral::trace::format {

inline constexpr char kMagic[8] = {'A', 'S', 'T', 'R', 'T', 'R', 'C', '\n'};
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kRecordBytes = 64;
inline constexpr uint32_t kChunkMagic = 0x4b484341;  // "ACHK"
inline constexpr uint32_t kMinChunkBytes = 4096;
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;

enum HeaderFlags : uint16_t { kFlagWrap = 1 };
enum ClockSource : uint32_t { kClockTsc = 1, kClockMonotonic = 2, kClockArmCounter = 3 };
enum FileState : uint32_t { kStateOpen = 1, kStateClosed = 2 };

struct FileHeader {
  // --- static part: written once at open, covered by static_checksum ---
  char magic[8];
  uint16_t version;
  uint16_t header_bytes;
  uint16_t record_bytes;
  uint16_t flags;
  uint32_t chunk_bytes;
  uint32_t chunk_count;
  uint64_t chunks_offset;
  uint64_t metadata_offset;
  uint32_t metadata_bytes;
  uint32_t clock_source;
  double ticks_per_ns;  // measured at open; the reader refines it from clock readings
  uint64_t start_ticks;
  uint64_t start_mono_ns;
  uint64_t start_wall_ns;
  uint32_t event_mask;
  int32_t pid;
  char host[64];
  char boot_id[48];
  char writer[32];
  uint8_t reserved_static[508 - 232];
  uint32_t static_checksum;
  // --- live part at 512: updated in place while the writer runs ---
  uint64_t dropped_events;  // lost because the file was full (stop mode) or no chunk was free
  uint64_t rejected_events;  // malformed events the writer refused
  uint32_t state;            // FileState
  uint32_t identity_set;     // 1 once rank/comm_hash below are valid (written last)
  int32_t rank;
  int32_t nranks;
  uint64_t comm_hash;
  uint64_t close_ticks;
  uint64_t close_mono_ns;
  uint64_t close_wall_ns;
  uint8_t reserved_live[kHeaderBytes - 512 - 64];
};
static_assert(offsetof(FileHeader, host) == 88);
static_assert(offsetof(FileHeader, static_checksum) == 508);
static_assert(offsetof(FileHeader, dropped_events) == 512);
static_assert(sizeof(FileHeader) == kHeaderBytes);

struct ChunkHeader {
  uint32_t magic;         // kChunkMagic
  uint32_t thread_index;  // writer thread, 0.. in order of first event
  uint64_t ordinal;       // claim order across the file: sorts chunks oldest first
  uint64_t ticks;         // a clock reading taken when the chunk was claimed
  uint64_t mono_ns;
  uint64_t wall_ns;
  int32_t os_tid;
  uint8_t reserved[16];
  uint32_t commit;
};
static_assert(sizeof(ChunkHeader) == kRecordBytes);

struct RawRecord {
  uint64_t ticks;
  uint64_t comm_hash;
  uint8_t payload[40];
  uint8_t kind;
  uint8_t flags;  // kRecordSend
  uint16_t channel;
  uint32_t commit;
};
static_assert(sizeof(RawRecord) == kRecordBytes);
enum RecordFlags : uint8_t { kRecordSend = 1 };

// Metadata region: entries appended under the writer's lock, never overwritten, so a ring that
// wraps keeps the names of strings, communicators and connections.
struct MetaEntryHeader {
  uint32_t commit;  // checksum of the entry (header fields after commit + body), never 0
  uint16_t type;    // MetaType
  uint16_t bytes;   // whole entry including this header, a multiple of 8
};
enum MetaType : uint16_t { kMetaString = 1, kMetaComm = 2, kMetaConnection = 3 };
struct MetaString {  // followed by `length` bytes of text
  StringId id;
  uint16_t length;
  uint32_t reserved;
};
struct MetaComm {
  uint64_t comm_hash;
  int32_t rank, nranks, nnodes;
  StringId name;
  uint16_t reserved;
};
struct MetaConnection {
  uint64_t comm_hash;
  uint64_t conn_id;
  int32_t dev, port, streams, peer;
  StringId remote_host, nic, local_addr, remote_addr;
  uint32_t is_send;
  uint32_t reserved;
};
// A connection entry may continue with its path (astral/trace/path.hpp): MetaPathHead, then
// `nqps` MetaPathQp. A reader that predates it reads only the MetaConnection; a tail whose
// magic differs is from a newer writer and is skipped.
inline constexpr uint32_t kPathMagic = 0x48544150;  // "PATH"
// 1: head and QPs. 2: then a StringId per QP naming the member port of a fused device (vNIC),
// padded to 4 bytes; written only when some QP names one, so single-port paths stay version 1.
inline constexpr uint16_t kPathVersion = 1;
inline constexpr uint16_t kPathVersionDevices = 2;
struct MetaPathHead {
  uint32_t magic;    // kPathMagic
  uint16_t version;  // kPathVersion or kPathVersionDevices
  uint16_t nqps;     // <= kMaxPathQps
  StringId transport, link_layer, policy, source, note;
  int16_t port, plane, rail, gid_index;
  uint8_t sl, tc;
  uint16_t qps_dropped;
  uint16_t reserved;
};
struct MetaPathQp {
  uint32_t flow_label;
  uint16_t udp_sport;
  uint16_t dlid;
  int32_t uplink_link;
  StringId uplink;
  uint8_t qp;
  uint8_t path_index;
};
static_assert(sizeof(MetaConnection) == 48);
static_assert(sizeof(MetaPathHead) == 32);
static_assert(sizeof(MetaPathQp) == 16);

// Checksums: cheap (independent multiplies summed, one final mix), seeded with where the bytes
// live so that a stale record from an earlier use of a slot never validates.
inline uint32_t checksum_words(const uint64_t* w, size_t n, uint64_t seed) noexcept {
  uint64_t h = (seed + 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; ++i)
    h += (w[i] ^ (0xa0761d6478bd642full * (i + 1))) * (0xe7037ed1a0b428dbull + 2 * i);
  h ^= h >> 31;
  h *= 0xff51afd7ed558ccdull;
  return static_cast<uint32_t>(h ^ (h >> 32)) | 1u;  // never 0: 0 means "not committed"
}
// A 64-byte block whose last 4 bytes hold the commit word: covers the first 60 bytes.
inline uint32_t block_checksum(const void* block, uint64_t seed) noexcept {
  uint64_t w[8];
  std::memcpy(w, block, sizeof w);
  w[7] &= 0xffffffffull;  // little-endian: the commit word is the upper half of word 7
  return checksum_words(w, 8, seed);
}
inline uint64_t record_seed(uint64_t chunk_ordinal, uint32_t index) noexcept {
  return (chunk_ordinal << 20) ^ index;
}
inline uint64_t chunk_seed(uint64_t slot) noexcept { return slot ^ 0x4348554e4b000000ull; }
uint32_t header_checksum(const FileHeader& h) noexcept;
uint32_t meta_checksum(const void* entry, uint64_t offset) noexcept;

// Record payload <-> Event payload.
bool encode(const Event& e, RawRecord& out) noexcept;  // false: payload does not match kind
// Decodes a committed record; time_ns holds raw ticks until the reader converts them (durations
// are stored in ns by the writer). False: unknown kind (from a newer writer, or damage).
bool decode(const RawRecord& r, Event& out) noexcept;

// Metadata entry bodies share the Connection encoding with NetConnect records.
void encode_connection(const Connection& c, uint64_t comm_hash, MetaConnection& out) noexcept;
Connection decode_connection(const MetaConnection& m) noexcept;

}  // namespace astral::trace::format
