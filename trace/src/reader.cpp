// Reads a trace file: header, metadata entries, chunks and records; converts ticks to
// CLOCK_MONOTONIC ns; counts damage instead of failing.
#include "astral/trace/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <astral/common/checked.hpp>

#include "format.hpp"

namespace astral::trace {
namespace {

using format::FileHeader;

struct SyncPoint {
  uint64_t ticks, mono_ns, wall_ns;
};

std::string text_field(const char* p, size_t cap) { return std::string(p, strnlen(p, cap)); }

std::string_view clock_name(uint32_t source) {
  switch (source) {
    case format::kClockTsc: return "tsc";
    case format::kClockMonotonic: return "monotonic";
    case format::kClockArmCounter: return "arm-counter";
  }
  return "unknown";
}

void note(Damage& d, std::string line) {
  if (d.notes.size() < 32) d.notes.push_back(std::move(line));
}

FileHeader read_header(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 8 || std::memcmp(data, format::kMagic, 8) != 0)
    throw TraceError(name + ": not an Astral trace file (bad magic)");
  if (size < sizeof(FileHeader)) throw TraceError(name + ": truncated inside the file header");
  FileHeader h;
  std::memcpy(&h, data, sizeof h);
  if (h.version != format::kVersion)
    throw TraceError(name + ": trace format version " + std::to_string(h.version) +
                     " is not supported (this reader reads version 1)");
  if (h.static_checksum != format::header_checksum(h)) throw TraceError(name + ": file header is damaged");
  const uint32_t cb = h.chunk_bytes;
  const bool geometry_ok = h.header_bytes == format::kHeaderBytes && h.record_bytes == format::kRecordBytes &&
                           cb >= format::kMinChunkBytes && cb <= format::kMaxChunkBytes && (cb & (cb - 1)) == 0 &&
                           h.metadata_offset == format::kHeaderBytes && h.metadata_bytes % 8 == 0 &&
                           h.chunks_offset == h.metadata_offset + h.metadata_bytes &&
                           h.chunk_count <= (1u << 30);
  if (!geometry_ok) throw TraceError(name + ": file header describes an impossible layout");
  return h;
}

// A connection entry's path tail, kept with raw string ids until every string is read.
struct PendingPath {
  size_t connection = 0;
  format::MetaPathHead head{};
  std::vector<format::MetaPathQp> qps;
  std::vector<StringId> devices;  // version 2: per QP
};

void read_path_tail(const uint8_t* tail, size_t bytes, uint64_t off, TraceFile& out,
                    std::vector<PendingPath>& paths) {
  PendingPath p;
  p.connection = out.connections.size() - 1;
  std::memcpy(&p.head, tail, sizeof p.head);
  const bool devices = p.head.version == format::kPathVersionDevices;
  if (p.head.magic != format::kPathMagic || (p.head.version != format::kPathVersion && !devices)) {
    return;  // a newer writer's
  }
  const size_t qp_bytes = p.head.nqps * sizeof(format::MetaPathQp);
  const size_t device_bytes = devices ? p.head.nqps * sizeof(StringId) : 0;
  if (p.head.nqps > kMaxPathQps || sizeof p.head + qp_bytes + device_bytes > bytes) {
    ++out.damage.corrupt_metadata;
    note(out.damage, "connection entry at offset " + std::to_string(off) + " has a path longer than the entry");
    return;
  }
  p.qps.resize(p.head.nqps);
  std::memcpy(p.qps.data(), tail + sizeof p.head, qp_bytes);
  p.devices.resize(devices ? p.head.nqps : 0);
  if (devices) std::memcpy(p.devices.data(), tail + sizeof p.head + qp_bytes, device_bytes);
  paths.push_back(std::move(p));
}

NetPath resolve_path(const PendingPath& p, const TraceFile& f) {
  const format::MetaPathHead& h = p.head;
  NetPath path;
  path.transport = f.str(h.transport);
  path.link_layer = f.str(h.link_layer);
  path.policy = f.str(h.policy);
  path.source = f.str(h.source);
  path.note = f.str(h.note);
  path.port = h.port;
  path.plane = h.plane;
  path.rail = h.rail;
  path.gid_index = h.gid_index;
  path.sl = h.sl;
  path.tc = h.tc;
  path.qps_dropped = h.qps_dropped;
  for (size_t i = 0; i < p.qps.size(); ++i) {
    const format::MetaPathQp& w = p.qps[i];
    std::string device = i < p.devices.size() ? std::string(f.str(p.devices[i])) : std::string();
    path.qps.push_back(NetPathQp{w.qp, w.flow_label, w.udp_sport, w.dlid, w.path_index,
                                 w.uplink_link, std::string(f.str(w.uplink)), std::move(device)});
  }
  return path;
}

void read_metadata(const uint8_t* data, size_t size, const FileHeader& h, TraceFile& out) {
  std::vector<PendingPath> paths;
  const uint64_t region_end = std::min<uint64_t>(h.metadata_offset + h.metadata_bytes, size);
  uint64_t off = h.metadata_offset;
  while (off + sizeof(format::MetaEntryHeader) <= region_end) {
    format::MetaEntryHeader head;
    std::memcpy(&head, data + off, sizeof head);
    if (head.commit == 0) break;  // end of the written entries
    if (head.bytes < 16 || head.bytes % 8 != 0 || head.bytes > 512 || off + head.bytes > region_end) {
      ++out.damage.corrupt_metadata;
      note(out.damage, "metadata entry at offset " + std::to_string(off) + " has an impossible size; the rest of the metadata is skipped");
      break;
    }
    const uint8_t* body = data + off + sizeof head;
    const size_t body_bytes = head.bytes - sizeof head;
    if (head.commit != format::meta_checksum(data + off, off)) {
      ++out.damage.corrupt_metadata;
      note(out.damage, "metadata entry at offset " + std::to_string(off) + " fails its checksum");
    } else if (head.type == format::kMetaString && body_bytes >= sizeof(format::MetaString)) {
      format::MetaString s;
      std::memcpy(&s, body, sizeof s);
      if (s.id != 0 && s.length <= body_bytes - sizeof s) {
        if (out.strings.size() <= s.id) out.strings.resize(s.id + 1u);
        out.strings[s.id].assign(reinterpret_cast<const char*>(body + sizeof s), s.length);
      }
    } else if (head.type == format::kMetaComm && body_bytes >= sizeof(format::MetaComm)) {
      format::MetaComm m;
      std::memcpy(&m, body, sizeof m);
      out.comms.push_back({m.comm_hash, CommInfo{m.rank, m.nranks, m.nnodes, m.name}});
    } else if (head.type == format::kMetaConnection && body_bytes >= sizeof(format::MetaConnection)) {
      format::MetaConnection m;
      std::memcpy(&m, body, sizeof m);
      out.connections.push_back({m.comm_hash, format::decode_connection(m), std::nullopt});
      const size_t tail = body_bytes - sizeof m;
      if (tail >= sizeof(format::MetaPathHead))
        read_path_tail(body + sizeof m, tail, off, out, paths);
    }  // other types: from a newer writer, skipped
    off += head.bytes;
  }
  for (const PendingPath& p : paths) out.connections[p.connection].path = resolve_path(p, out);
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// Reads every chunk slot; events keep raw ticks in time_ns until convert_ticks().
void read_chunks(const uint8_t* data, size_t size, const FileHeader& h, TraceFile& out,
                 std::vector<SyncPoint>& syncs) {
  const uint32_t per_chunk = h.chunk_bytes / format::kRecordBytes;
  uint64_t valid_chunks = 0, max_ordinal = 0;
  uint32_t max_thread = 0;
  enum Class : uint8_t { kUnused, kValid, kStale, kBad };
  std::vector<uint8_t> cls;
  std::vector<format::RawRecord> recs(per_chunk);  // reused for every chunk
  for (uint32_t slot = 0; slot < h.chunk_count; ++slot) {
    const uint64_t base = h.chunks_offset + uint64_t(slot) * h.chunk_bytes;
    if (base + format::kRecordBytes > size) break;  // truncated (counted by the caller)
    format::ChunkHeader c;
    std::memcpy(&c, data + base, sizeof c);
    if (c.commit == 0) continue;  // never used, or being recycled when the writer stopped
    if (c.commit != format::block_checksum(&c, format::chunk_seed(slot)) || c.magic != format::kChunkMagic) {
      ++out.damage.corrupt_chunks;
      note(out.damage, "chunk " + std::to_string(slot) + " has a damaged header; its records are skipped");
      continue;
    }
    ++valid_chunks;
    max_ordinal = std::max(max_ordinal, c.ordinal);
    max_thread = std::max(max_thread, c.thread_index + 1);
    syncs.push_back({c.ticks, c.mono_ns, c.wall_ns});
    // Classify every record first: a record that fails its checksum is damage, unless it is the
    // writer's frontier (nothing but unused or stale records after it: killed mid-record).
    cls.assign(per_chunk, kUnused);
    uint32_t available = per_chunk;
    for (uint32_t i = 1; i < per_chunk; ++i) {
      const uint64_t off = base + uint64_t(i) * format::kRecordBytes;
      if (off + format::kRecordBytes > size) {
        available = i;
        break;
      }
      format::RawRecord& r = recs[i];
      std::memcpy(&r, data + off, sizeof r);
      if (r.commit == 0) {
        cls[i] = all_zero(data + off, format::kRecordBytes) ? kUnused : kBad;
      } else if (r.commit == format::block_checksum(&r, format::record_seed(c.ordinal, i))) {
        cls[i] = kValid;
      } else {
        cls[i] = kBad;
        // Wrap mode does not clear a recycled chunk: records of an earlier use of the slot
        // (ordinal - k * chunk_count) are left-overs, not damage.
        for (uint64_t k = 1; k <= 16 && c.ordinal >= k * h.chunk_count; ++k)
          if (r.commit == format::block_checksum(&r, format::record_seed(c.ordinal - k * h.chunk_count, i))) {
            cls[i] = kStale;
            break;
          }
      }
    }
    bool frontier = true;  // scanning backwards: no valid record seen yet
    for (uint32_t i = available; i-- > 1;) {
      if (cls[i] == kValid) frontier = false;
      if (cls[i] != kBad) continue;
      if (frontier) ++out.damage.incomplete_records;
      else ++out.damage.corrupt_records;
      frontier = false;  // only one record can be mid-write
    }
    for (uint32_t i = 1; i < available; ++i) {
      if (cls[i] != kValid) continue;
      Event e;
      if (!format::decode(recs[i], e)) {
        ++out.damage.unknown_records;
        continue;
      }
      e.thread = c.thread_index;
      if (auto* s = e.as<ClockSync>()) syncs.push_back({recs[i].ticks, s->mono_ns, s->wall_ns});
      out.events.push_back(std::move(e));
    }
  }
  out.threads = max_thread;
  if (h.flags & format::kFlagWrap && valid_chunks && max_ordinal + 1 > valid_chunks)
    out.recycled_chunks = max_ordinal + 1 - valid_chunks;
}

// Removes clock readings no real clock gives (see kMaxClockNs): they come from damaged or hostile
// files, and every later time computation relies on readings below that bound.
void drop_bad_clock_readings(std::vector<SyncPoint>& syncs, TraceFile& out) {
  const size_t before = syncs.size();
  std::erase_if(syncs, [](const SyncPoint& s) { return s.mono_ns >= kMaxClockNs || s.wall_ns >= kMaxClockNs; });
  if (syncs.size() == before) return;
  out.damage.bad_clock_readings += before - syncs.size();
  note(out.damage, std::to_string(before - syncs.size()) + " clock readings are out of range and were ignored");
}

// Maps raw ticks to CLOCK_MONOTONIC ns: piecewise linear between clock readings, the overall
// rate outside them. A segment whose rate disagrees with the overall one (a damaged or
// preempted reading) falls back to the overall rate.
class TickConverter {
 public:
  TickConverter(std::vector<SyncPoint> points, double header_rate, bool identity)
      : points_(std::move(points)), identity_(identity) {
    std::sort(points_.begin(), points_.end(), [](auto& a, auto& b) { return a.ticks < b.ticks; });
    rate_ = (std::isfinite(header_rate) && header_rate > 1e-6 && header_rate < 1e6) ? header_rate : 1.0;
    if (points_.size() >= 2) {
      const auto& a = points_.front();
      const auto& b = points_.back();
      if (b.ticks > a.ticks && b.mono_ns > a.mono_ns && b.mono_ns - a.mono_ns > 100'000'000) {
        const double fitted = double(b.ticks - a.ticks) / double(b.mono_ns - a.mono_ns);
        if (std::fabs(fitted / rate_ - 1) < 0.01) rate_ = fitted;
      }
    }
  }
  uint64_t operator()(uint64_t ticks) const {
    if (identity_ || points_.empty()) return identity_ ? std::min(ticks, kMaxClockNs - 1) : 0;
    auto it = std::upper_bound(points_.begin(), points_.end(), ticks,
                               [](uint64_t t, const SyncPoint& p) { return t < p.ticks; });
    const SyncPoint& p = it == points_.begin() ? *it : *(it - 1);
    double rate = rate_;
    if (it != points_.begin() && it != points_.end() && it->ticks > p.ticks && it->mono_ns > p.mono_ns) {
      const double segment = double(it->ticks - p.ticks) / double(it->mono_ns - p.mono_ns);
      if (std::fabs(segment / rate_ - 1) < 0.001) rate = segment;
    }
    const double ns = double(p.mono_ns) + (double(ticks) - double(p.ticks)) / rate;
    if (!(ns > 0)) return 0;  // NaN too
    return std::min(checked_cast<uint64_t>(ns).value_or(kMaxClockNs - 1), kMaxClockNs - 1);
  }

 private:
  std::vector<SyncPoint> points_;
  bool identity_;
  double rate_ = 1.0;
};

}  // namespace

std::string_view TraceFile::str(StringId id) const noexcept {
  if (id == 0) return "";
  if (id < strings.size()) return strings[id];
  return "?";
}

const NetPath* TraceFile::connection_path(uint64_t conn_id, std::optional<bool> is_send) const noexcept {
  for (const auto& c : connections)
    if (c.connection.conn_id == conn_id && c.path && (!is_send || c.connection.is_send == *is_send))
      return &*c.path;
  return nullptr;
}

const Connection* TraceFile::connection(uint64_t conn_id) const noexcept {
  for (const auto& c : connections)
    if (c.connection.conn_id == conn_id) return &c.connection;
  return nullptr;
}

const CommInfo* TraceFile::comm(uint64_t comm_hash) const noexcept {
  for (const auto& c : comms)
    if (c.comm_hash == comm_hash) return &c.info;
  return nullptr;
}

namespace {
// wall - mono. The reader keeps both below kMaxClockNs, so this fits; a pair that does not (a
// TraceFile filled in by hand) counts as offset 0.
int64_t wall_minus_mono(uint64_t wall_ns, uint64_t mono_ns) noexcept {
  const auto wall = checked_cast<int64_t>(wall_ns), mono = checked_cast<int64_t>(mono_ns);
  return (wall && mono ? checked_sub(*wall, *mono) : std::nullopt).value_or(0);
}
}  // namespace

int64_t TraceFile::wall_offset_ns() const noexcept {
  if (clock.empty()) return wall_minus_mono(info.start_wall_ns, info.start_mono_ns);
  std::vector<int64_t> d;
  d.reserve(clock.size());
  for (const auto& p : clock) d.push_back(wall_minus_mono(p.wall_ns, p.mono_ns));
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  return d[d.size() / 2];
}

TraceFile read_trace_bytes(const uint8_t* data, size_t size, const std::string& name) {
  const FileHeader h = read_header(data, size, name);
  TraceFile out;
  FileInfo& info = out.info;
  info.path = name;
  info.version = h.version;
  info.host = text_field(h.host, sizeof h.host);
  info.boot_id = text_field(h.boot_id, sizeof h.boot_id);
  info.writer = text_field(h.writer, sizeof h.writer);
  info.pid = h.pid;
  if (h.identity_set == 1) {
    info.rank = h.rank;
    info.nranks = h.nranks;
    info.comm_hash = h.comm_hash;
  }
  if (h.start_mono_ns < kMaxClockNs && h.start_wall_ns < kMaxClockNs) {
    info.start_mono_ns = h.start_mono_ns;
    info.start_wall_ns = h.start_wall_ns;
  }  // else left 0; the reading is counted with the other sync points below
  info.closed = h.state == format::kStateClosed;
  info.wraps = h.flags & format::kFlagWrap;
  info.event_mask = h.event_mask;
  info.clock_source = std::string(clock_name(h.clock_source));
  info.file_bytes = size;
  info.chunk_bytes = h.chunk_bytes;
  info.chunk_count = h.chunk_count;
  out.dropped_events = h.dropped_events;
  out.rejected_events = h.rejected_events;

  const uint64_t expected = h.chunks_offset + uint64_t(h.chunk_count) * h.chunk_bytes;
  if (size < expected) {
    out.damage.truncated_bytes = expected - size;
    note(out.damage, "file is " + std::to_string(expected - size) + " bytes shorter than its header says");
  }
  read_metadata(data, size, h, out);
  std::vector<SyncPoint> syncs{{h.start_ticks, h.start_mono_ns, h.start_wall_ns}};
  if (info.closed) syncs.push_back({h.close_ticks, h.close_mono_ns, h.close_wall_ns});
  read_chunks(data, size, h, out, syncs);
  drop_bad_clock_readings(syncs, out);
  if (out.damage.corrupt_records)
    note(out.damage, std::to_string(out.damage.corrupt_records) + " records fail their checksum");
  if (out.damage.incomplete_records)
    note(out.damage, std::to_string(out.damage.incomplete_records) + " records were never completed (writer stopped mid-record)");
  if (out.damage.unknown_records)
    note(out.damage, std::to_string(out.damage.unknown_records) + " records are of unknown kinds");

  const TickConverter to_mono(syncs, h.ticks_per_ns, h.clock_source == format::kClockMonotonic);
  for (Event& e : out.events) e.time_ns = to_mono(e.time_ns);
  std::stable_sort(out.events.begin(), out.events.end(), [](const Event& a, const Event& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.thread < b.thread;
  });
  for (const SyncPoint& s : syncs) out.clock.push_back({s.mono_ns, s.wall_ns});
  std::sort(out.clock.begin(), out.clock.end(), [](auto& a, auto& b) { return a.mono_ns < b.mono_ns; });
  return out;
}

TraceFile read_trace_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TraceError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw TraceError(path + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    throw TraceError(path + ": empty file, not an Astral trace");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw TraceError(path + ": cannot map: " + std::strerror(errno));
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{map, size};
  return read_trace_bytes(static_cast<const uint8_t*>(map), size, path);
}

std::vector<std::string> find_trace_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec) && it->path().extension() == ".atrace") files.push_back(it->path().string());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw TraceError(p + ": no such file or directory");
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace astral::trace
