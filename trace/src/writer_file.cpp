// Opening a trace file (preallocate, map, header), the metadata region (strings, communicators,
// connections) and the process-wide writer configured from the environment.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "writer_state.hpp"

namespace astral::trace {
namespace {

std::atomic<WarnFunction> g_warn{nullptr};
std::atomic<Writer*> g_process_writer{nullptr};

std::string errno_text(int err) { return std::strerror(err); }

std::string read_first_line(const char* path) {
  char buf[128] = {};
  if (FILE* f = std::fopen(path, "r")) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string local_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// mkdir -p; true when the directory exists afterwards.
bool make_dirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// File-name-safe copy of a host name.
std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return out.empty() ? "unknown" : out;
}

void copy_text(char* dst, size_t cap, const std::string& src) {
  std::memset(dst, 0, cap);
  std::memcpy(dst, src.data(), std::min(cap - 1, src.size()));
}

int rank_from_environment() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == 0 && r >= 0 && r < (1l << 24)) return static_cast<int>(r);
  }
  return -1;
}

}  // namespace

void set_warn_function(WarnFunction fn) noexcept { g_warn.store(fn); }

void warn(const std::string& message) noexcept {
  if (WarnFunction fn = g_warn.load()) {
    fn(message.c_str());
  } else {
    std::fprintf(stderr, "astral trace: WARN %s\n", message.c_str());
  }
}

std::unique_ptr<Writer> Writer::open(const WriterOptions& o, std::string* error) noexcept {
  auto fail = [&](const std::string& why) -> std::unique_ptr<Writer> {
    const std::string msg = why + "; tracing is off, the job continues";
    warn(msg);
    if (error) *error = msg;
    return nullptr;
  };
  try {
    const uint32_t cb = o.chunk_bytes;
    if (cb < format::kMinChunkBytes || cb > format::kMaxChunkBytes || (cb & (cb - 1)) != 0)
      return fail("trace chunk size " + std::to_string(cb) + " is not a power of two in [4 KiB, 16 MiB]");
    const uint32_t meta = std::max<uint32_t>(4096, (o.metadata_bytes + 4095) / 4096 * 4096);
    const uint64_t fixed = format::kHeaderBytes + uint64_t(meta);
    const uint64_t chunk_count64 = o.max_bytes > fixed ? (o.max_bytes - fixed) / cb : 0;
    if (chunk_count64 < 2)
      return fail("trace size limit " + std::to_string(o.max_bytes) + " bytes leaves room for fewer than 2 chunks");
    const auto chunk_count = static_cast<uint32_t>(std::min<uint64_t>(chunk_count64, 1u << 30));
    const uint64_t size = fixed + uint64_t(chunk_count) * cb;
    if (o.dir.empty()) return fail("no trace directory given");
    if (!make_dirs(o.dir)) return fail("cannot create trace directory " + o.dir + ": " + errno_text(errno));

    const std::string host = o.host.empty() ? local_host_name() : o.host;
    const std::string boot_id = o.boot_id.empty() ? read_first_line("/proc/sys/kernel/random/boot_id") : o.boot_id;
    const int pid = static_cast<int>(getpid());
    std::string stem = o.dir + "/" + sanitize(o.file_prefix.empty() ? "astral" : o.file_prefix) + "-";
    if (o.rank >= 0) stem += "r" + std::to_string(o.rank) + "-";
    stem += sanitize(host) + "-" + std::to_string(pid);
    std::string path;
    int fd = -1;
    for (int n = 0; n < 1000 && fd < 0; ++n) {  // a reloaded plugin opens a second file
      path = stem + (n ? "-" + std::to_string(n) : "") + ".atrace";
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) return fail("cannot create trace file " + path + ": " + errno_text(errno));
    }
    if (fd < 0) return fail("cannot create a trace file named " + stem + "*.atrace");
    // Reserve every block now: a later write into the mapping can then never hit a full disk
    // (which would raise SIGBUS in the job).
    if (int err = posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) {
      ::close(fd);
      unlink(path.c_str());
      return fail("cannot reserve " + std::to_string(size >> 20) + " MiB for trace file " + path + ": " +
                  errno_text(err));
    }
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      unlink(path.c_str());
      return fail("cannot map trace file " + path + ": " + errno_text(err));
    }

    auto s = std::make_unique<State>();
    s->path = path;
    s->fd = fd;
    s->base = static_cast<uint8_t*>(base);
    s->size = size;
    s->header = reinterpret_cast<format::FileHeader*>(base);
    s->clock_source = o.use_monotonic_clock ? uint32_t{format::kClockMonotonic} : clock::pick_source();
    const double ticks_per_ns = clock::measure_rate(s->clock_source);
    s->ns_per_tick = 1.0 / ticks_per_ns;
    s->chunk_bytes = cb;
    s->chunk_count = chunk_count;
    s->records_per_chunk = cb / format::kRecordBytes;
    s->metadata_offset = format::kHeaderBytes;
    s->metadata_bytes = meta;
    s->chunks_offset = fixed;
    s->wrap = o.on_full == OnFull::Wrap;
    s->chunk_busy = std::make_unique<std::atomic<uint8_t>[]>(chunk_count);
    for (int k = 0; k < 256; ++k) {
      const uint32_t cat = category_of(static_cast<EventKind>(k));
      s->wanted[k] = payload_index_of(static_cast<EventKind>(k)) != std::variant_npos &&
                     (cat == 0 || (cat & o.event_mask) != 0);
    }
    const clock::Reading start = clock::read(s->clock_source);
    s->sync_interval_ticks = static_cast<uint64_t>(1e9 * ticks_per_ns);  // about once a second
    s->next_sync_ticks.store(start.ticks + s->sync_interval_ticks);

    format::FileHeader& h = *s->header;
    std::memcpy(h.magic, format::kMagic, sizeof h.magic);
    h.version = format::kVersion;
    h.header_bytes = format::kHeaderBytes;
    h.record_bytes = format::kRecordBytes;
    h.flags = s->wrap ? format::kFlagWrap : 0;
    h.chunk_bytes = cb;
    h.chunk_count = chunk_count;
    h.chunks_offset = s->chunks_offset;
    h.metadata_offset = s->metadata_offset;
    h.metadata_bytes = meta;
    h.clock_source = s->clock_source;
    h.ticks_per_ns = ticks_per_ns;
    h.start_ticks = start.ticks;
    h.start_mono_ns = start.mono_ns;
    h.start_wall_ns = start.wall_ns;
    h.event_mask = o.event_mask;
    h.pid = pid;
    copy_text(h.host, sizeof h.host, host);
    copy_text(h.boot_id, sizeof h.boot_id, boot_id);
    copy_text(h.writer, sizeof h.writer, "astral 0.1.0");
    h.static_checksum = format::header_checksum(h);
    h.state = format::kStateOpen;
    auto writer = std::unique_ptr<Writer>(new Writer(std::move(s)));
    if (o.rank >= 0 || o.comm_hash != 0) writer->set_identity(o.rank, 0, o.comm_hash);
    return writer;
  } catch (const std::exception& e) {  // allocation failure: tracing off, job unaffected
    return fail(std::string("trace writer setup failed: ") + e.what());
  }
}

bool Writer::State::append_meta(uint16_t type, const void* body, size_t body_bytes, const void* tail,
                                size_t tail_bytes) noexcept {
  const size_t total = (sizeof(format::MetaEntryHeader) + body_bytes + tail_bytes + 7) / 8 * 8;
  if (total > 512 || metadata_used + total > metadata_bytes) {
    if (!metadata_full_noted) warn("trace metadata region of " + path + " is full; new names are dropped");
    metadata_full_noted = true;
    return false;
  }
  const uint64_t offset = metadata_offset + metadata_used;
  uint8_t* entry = base + offset;
  std::memcpy(entry + sizeof(format::MetaEntryHeader), body, body_bytes);
  if (tail_bytes) std::memcpy(entry + sizeof(format::MetaEntryHeader) + body_bytes, tail, tail_bytes);
  format::MetaEntryHeader head{0, type, static_cast<uint16_t>(total)};
  std::memcpy(entry, &head, sizeof head);
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(entry))
      .store(format::meta_checksum(entry, offset), std::memory_order_release);
  metadata_used += static_cast<uint32_t>(total);
  return true;
}

StringId Writer::intern(std::string_view text) noexcept {
  State& w = *state_;
  if (text.size() > 400) text = text.substr(0, 400);
  try {
    std::lock_guard lock(w.meta_mutex);
    const std::string key(text);
    if (auto it = w.strings.find(key); it != w.strings.end()) return it->second;
    if (w.next_string == 0xffff) return 0;
    const StringId id = w.next_string;
    const format::MetaString body{id, static_cast<uint16_t>(text.size()), 0};
    if (!w.append_meta(format::kMetaString, &body, sizeof body, text.data(), text.size())) return 0;
    ++w.next_string;
    w.strings.emplace(key, id);
    return id;
  } catch (...) {
    return 0;
  }
}

StringId Writer::intern_static(const char* text) noexcept {
  if (!text) return 0;
  State& w = *state_;
  const auto addr = reinterpret_cast<uintptr_t>(text);
  auto& slot = w.static_cache[(addr >> 3) * 0x9e3779b97f4a7c15ull >> 55];  // 512 slots
  const uint64_t cached = slot.load(std::memory_order_acquire);
  if (cached >> 16 == addr) return static_cast<StringId>(cached & 0xffff);
  const StringId id = intern(text);
  if (id != 0 && addr < (uint64_t{1} << 48)) slot.store((uint64_t{addr} << 16) | id, std::memory_order_release);
  return id;
}

void Writer::add_comm(uint64_t comm_hash, const CommInfo& info) noexcept {
  {
    std::lock_guard lock(state_->meta_mutex);
    const format::MetaComm body{comm_hash, info.rank, info.nranks, info.nnodes, info.name, 0};
    state_->append_meta(format::kMetaComm, &body, sizeof body);
  }
  set_identity(info.rank, info.nranks, comm_hash);
  Event e;
  e.kind = EventKind::CommInit;
  e.comm_hash = comm_hash;
  e.payload = info;
  record(e);
}

namespace {
int16_t clamp16(int32_t v) { return static_cast<int16_t>(std::clamp<int32_t>(v, INT16_MIN, INT16_MAX)); }
}  // namespace

// The path tail of a connection entry (format.hpp, MetaPathHead); strings interned first, since
// intern() takes the metadata lock itself. Returns the tail's size.
size_t Writer::encode_path(const NetPath& p, uint8_t* out) noexcept {
  const size_t nqps = std::min(p.qps.size(), kMaxPathQps);
  format::MetaPathHead head{};
  head.magic = format::kPathMagic;
  head.version = format::kPathVersion;
  head.nqps = static_cast<uint16_t>(nqps);
  head.transport = intern(p.transport);
  head.link_layer = intern(p.link_layer);
  head.policy = intern(p.policy);
  head.source = intern(p.source);
  head.note = p.note.empty() ? 0 : intern(p.note);
  head.port = clamp16(p.port);
  head.plane = clamp16(p.plane);
  head.rail = clamp16(p.rail);
  head.gid_index = clamp16(p.gid_index);
  head.sl = static_cast<uint8_t>(p.sl);
  head.tc = static_cast<uint8_t>(p.tc);
  const uint64_t dropped = p.qps_dropped + (p.qps.size() - nqps);
  head.qps_dropped = static_cast<uint16_t>(std::min<uint64_t>(dropped, UINT16_MAX));
  std::memcpy(out, &head, sizeof head);
  for (size_t i = 0; i < nqps; ++i) {
    const NetPathQp& q = p.qps[i];
    const format::MetaPathQp w{q.flow_label, q.udp_sport, q.dlid, q.uplink_link,
                               q.uplink.empty() ? StringId{0} : intern(q.uplink),
                               static_cast<uint8_t>(q.qp), static_cast<uint8_t>(q.path_index)};
    std::memcpy(out + sizeof head + i * sizeof w, &w, sizeof w);
  }
  size_t bytes = sizeof head + nqps * sizeof(format::MetaPathQp);
  bool devices = std::any_of(p.qps.begin(), p.qps.begin() + long(nqps),
                             [](const NetPathQp& q) { return !q.device.empty(); });
  if (!devices) return bytes;
  head.version = format::kPathVersionDevices;
  std::memcpy(out, &head, sizeof head);
  for (size_t i = 0; i < nqps; ++i) {
    const StringId id = p.qps[i].device.empty() ? StringId{0} : intern(p.qps[i].device);
    std::memcpy(out + bytes + i * sizeof id, &id, sizeof id);
  }
  return bytes + (nqps * sizeof(StringId) + 3) / 4 * 4;
}

void Writer::add_connection(uint64_t comm_hash, const Connection& connection, const NetPath* path) noexcept {
  constexpr size_t kQpBytes = sizeof(format::MetaPathQp) + sizeof(StringId);  // version 2
  uint8_t tail[sizeof(format::MetaPathHead) + kMaxPathQps * kQpBytes] = {};
  const size_t tail_bytes = path ? encode_path(*path, tail) : 0;
  {
    std::lock_guard lock(state_->meta_mutex);
    format::MetaConnection body;
    format::encode_connection(connection, comm_hash, body);
    state_->append_meta(format::kMetaConnection, &body, sizeof body, tail, tail_bytes);
  }
  Event e;
  e.kind = EventKind::NetConnect;
  e.comm_hash = comm_hash;
  e.payload = connection;
  record(e);
}

void Writer::set_identity(int32_t rank, int32_t nranks, uint64_t comm_hash, bool replace) noexcept {
  State& w = *state_;
  std::lock_guard lock(w.meta_mutex);
  auto& set = w.header->identity_set;
  if (std::atomic_ref<uint32_t>(set).load(std::memory_order_acquire) && !replace) return;
  std::atomic_ref<uint32_t>(set).store(0, std::memory_order_release);
  w.header->rank = rank;
  w.header->nranks = nranks;
  w.header->comm_hash = comm_hash;
  std::atomic_ref<uint32_t>(set).store(1, std::memory_order_release);
}

bool options_from_environment(WriterOptions& o, std::string* error) noexcept {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  o = WriterOptions{};
  o.dir = env("ASTRAL_TRACE_DIR");
  if (o.dir.empty()) {
    if (error) *error = "ASTRAL_TRACE_DIR is not set";
    return false;
  }
  if (const std::string v = env("ASTRAL_TRACE_EVENTS"); !v.empty()) {
    std::string bad;
    auto mask = parse_event_mask(v, &bad);
    if (!mask) {
      if (error) *error = "ASTRAL_TRACE_EVENTS=" + v + ": unknown category '" + bad + "' (use net,coll,proxy,step,kernel or all)";
      return false;
    }
    o.event_mask = *mask;
  }
  if (const std::string v = env("ASTRAL_TRACE_MAX_MB"); !v.empty()) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(v.c_str(), &end, 10);
    if (*end != 0 || mb < 1 || mb > (1ull << 20)) {
      if (error) *error = "ASTRAL_TRACE_MAX_MB=" + v + " is not a size in MiB between 1 and 1048576";
      return false;
    }
    o.max_bytes = mb << 20;
    if (o.max_bytes < (8u << 20)) o.chunk_bytes = 16u << 10, o.metadata_bytes = 64u << 10;
  }
  if (const std::string v = env("ASTRAL_TRACE_ON_FULL"); !v.empty()) {
    if (v != "wrap" && v != "stop") {
      if (error) *error = "ASTRAL_TRACE_ON_FULL=" + v + " must be wrap or stop";
      return false;
    }
    o.on_full = v == "wrap" ? OnFull::Wrap : OnFull::Stop;
  }
  if (const std::string v = env("ASTRAL_TRACE_PREFIX"); !v.empty()) o.file_prefix = v;
  o.rank = rank_from_environment();
  return true;
}

Writer* process_writer() noexcept {
  static Writer* const writer = []() -> Writer* {
    WriterOptions options;
    std::string error;
    if (!options_from_environment(options, &error)) {
      if (std::getenv("ASTRAL_TRACE_DIR") && *std::getenv("ASTRAL_TRACE_DIR"))
        warn(error + "; tracing is off, the job continues");
      return nullptr;
    }
    Writer* w = Writer::open(options).release();  // never destroyed: threads may write until exit
    g_process_writer.store(w);
    return w;
  }();
  return writer;
}

namespace {
// Marks the process writer's file closed when the process exits or the plugin is unloaded.
// Only the header changes; the mapping stays valid for threads that are still writing.
struct CloseAtExit {
  ~CloseAtExit() {
    if (Writer* w = g_process_writer.load()) w->close();
  }
} g_close_at_exit;
}  // namespace

}  // namespace astral::trace
