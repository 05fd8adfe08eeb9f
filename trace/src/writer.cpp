// The writer's hot path: per-thread chunks in the file mapping, records committed by their last
// store. Opening the file and the metadata region live in writer_file.cpp.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "writer_state.hpp"

namespace astral::trace {
namespace {

constexpr uint32_t kNoSlot = 0xffffffff;

// What one thread holds in one writer: its current chunk and where the next record goes.
struct Cursor {
  uint64_t writer_uid = 0;
  format::RawRecord* next = nullptr;
  format::RawRecord* end = nullptr;
  uint64_t ordinal = 0;
  uint32_t slot = kNoSlot;
  uint32_t index = 0;  // record index within the chunk (the header is 0)
  uint32_t thread_index = 0;
};

// A thread writes to few writers (one in the plugin); the most recent is cursors[0].
struct ThreadState {
  static constexpr int kCursors = 4;
  Cursor cursors[kCursors];
  int32_t os_tid = 0;
};

// Live writers by uid: consulted only when a thread exits or evicts a cursor, to give its chunk
// back. Leaked on purpose so it outlives every thread_local destructor.
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<uint64_t, Writer::State*>& registry() {
  static auto* r = new std::unordered_map<uint64_t, Writer::State*>;
  return *r;
}
std::atomic<uint64_t> g_next_uid{1};

void release_cursor(Cursor& c) noexcept {
  if (c.writer_uid == 0 || c.slot == kNoSlot) return;
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(c.writer_uid);
  if (it != registry().end()) it->second->chunk_busy[c.slot].store(0, std::memory_order_release);
  c = Cursor{};
}

// The hot path reads a plain pointer (initial-exec TLS: no __tls_get_addr call in the .so); the
// owner object's destructor gives the chunks back when the thread exits.
struct ThreadStateOwner {
  ThreadState* state = nullptr;
  ~ThreadStateOwner();
};
thread_local ThreadState* tls_state __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local ThreadStateOwner tls_owner;

ThreadStateOwner::~ThreadStateOwner() {
  if (!state) return;
  for (auto& c : state->cursors) release_cursor(c);
  tls_state = nullptr;
  delete state;
}

ThreadState* thread_state() noexcept {
  if (ThreadState* s = tls_state) return s;
  auto* s = new (std::nothrow) ThreadState;
  if (!s) return nullptr;
  s->os_tid = static_cast<int32_t>(syscall(SYS_gettid));
  tls_owner.state = s;
  tls_state = s;
  return s;
}

Cursor* cursor_for(ThreadState& ts, Writer::State& w) noexcept {
  if (ts.cursors[0].writer_uid == w.uid) return &ts.cursors[0];
  int found = -1;
  for (int i = 1; i < ThreadState::kCursors; ++i)
    if (ts.cursors[i].writer_uid == w.uid) found = i;
  if (found < 0) {  // new writer for this thread: evict the least recent
    found = ThreadState::kCursors - 1;
    release_cursor(ts.cursors[found]);
    ts.cursors[found].writer_uid = w.uid;
    ts.cursors[found].thread_index = w.next_thread_index.fetch_add(1, std::memory_order_relaxed);
  }
  const Cursor c = ts.cursors[found];
  for (int i = found; i > 0; --i) ts.cursors[i] = ts.cursors[i - 1];
  ts.cursors[0] = c;
  return &ts.cursors[0];
}

template <class T>
void store_release(T& field, T value) noexcept {
  std::atomic_ref<T>(field).store(value, std::memory_order_release);
}

// Takes the next free chunk slot for this thread: zeroes it if it held older data (wrap), stamps
// a clock reading and commits the chunk header. False when the file is full (Stop) or every
// slot is held by a live thread.
bool claim_chunk(Writer::State& w, Cursor& c, int32_t os_tid) noexcept {
  if (c.slot != kNoSlot) {
    w.chunk_busy[c.slot].store(0, std::memory_order_release);
    c.slot = kNoSlot;
    c.next = c.end = nullptr;
  }
  if (!w.enabled.load(std::memory_order_relaxed) || w.full.load(std::memory_order_relaxed)) return false;
  for (uint32_t attempt = 0; attempt < w.chunk_count; ++attempt) {
    const uint64_t ordinal = w.next_ordinal.fetch_add(1, std::memory_order_relaxed);
    if (!w.wrap && ordinal >= w.chunk_count) {
      w.full.store(true, std::memory_order_relaxed);
      return false;
    }
    const auto slot = static_cast<uint32_t>(ordinal % w.chunk_count);
    if (w.chunk_busy[slot].exchange(1, std::memory_order_acquire)) continue;
    uint8_t* chunk = w.chunk(slot);
    auto* head = reinterpret_cast<format::ChunkHeader*>(chunk);
    // Recycling (wrap): invalidate the header first. The old records stay: their checksums are
    // seeded with the old ordinal, so the reader tells them apart from the new ones without the
    // cost of clearing the chunk.
    if (ordinal >= w.chunk_count) store_release(head->commit, 0u);
#ifdef MADV_POPULATE_WRITE
    // First use of the slot: fault its pages in now, in one call, instead of one page fault per
    // 64 records on the hot path. (Errors only mean the faults happen later.)
    if (ordinal < w.chunk_count) madvise(chunk, w.chunk_bytes, MADV_POPULATE_WRITE);
#endif
    const clock::Reading now = clock::read(w.clock_source);
    format::ChunkHeader h{};
    h.magic = format::kChunkMagic;
    h.thread_index = c.thread_index;
    h.ordinal = ordinal;
    h.ticks = now.ticks;
    h.mono_ns = now.mono_ns;
    h.wall_ns = now.wall_ns;
    h.os_tid = os_tid;
    std::memcpy(head, &h, sizeof h - sizeof h.commit);
    store_release(head->commit, format::block_checksum(&h, format::chunk_seed(slot)));
    c.slot = slot;
    c.ordinal = ordinal;
    c.index = 1;
    c.next = reinterpret_cast<format::RawRecord*>(chunk) + 1;
    c.end = reinterpret_cast<format::RawRecord*>(chunk) + w.records_per_chunk;
    return true;
  }
  return false;
}

// A record as eight little-endian words, built in registers: reading back a record assembled
// with narrow stores costs store-forwarding stalls that would double the cost of an event.
struct Words {
  uint64_t w[8];
};

// The two kinds written per transfer and per step get a direct encoding (same layout as
// format::encode, which the round-trip tests check); everything else goes through encode().
bool encode_words(const Event& e, Words& out) noexcept {
  const uint64_t tail = uint64_t(static_cast<uint8_t>(e.kind)) | (uint64_t(e.channel) << 16);
  if (const auto* t = std::get_if<Transfer>(&e.payload)) {
    if (payload_index_of(e.kind) != e.payload.index()) return false;
    const bool done = e.kind == EventKind::NetSendDone || e.kind == EventKind::NetRecvDone;
    out = Words{{0, e.comm_hash, t->request_id, t->conn_id, done ? t->duration_ns : t->seq, t->bytes,
                 uint32_t(t->tag), tail}};
    return true;
  }
  if (const auto* p = std::get_if<ProxyStep>(&e.payload)) {
    if (payload_index_of(e.kind) != e.payload.index()) return false;
    out = Words{{0, e.comm_hash, p->request_id, p->parent_id, p->bytes,
                 uint32_t(p->step) | (uint64_t(uint32_t(p->peer)) << 32), uint32_t(p->state),
                 tail | (p->is_send ? uint64_t{format::kRecordSend} << 8 : 0)}};
    return true;
  }
  format::RawRecord r;
  if (!format::encode(e, r)) return false;
  std::memcpy(out.w, &r, sizeof r);
  out.w[7] &= 0xffffffffull;
  return true;
}

bool append(Writer::State& w, const Words& r) noexcept {
  ThreadState* ts = thread_state();
  if (!ts) return false;
  Cursor* c = cursor_for(*ts, w);
  if (c->next == c->end && !claim_chunk(w, *c, ts->os_tid)) return false;
  const uint64_t commit = format::checksum_words(r.w, 8, format::record_seed(c->ordinal, c->index));
  auto* slot = reinterpret_cast<uint64_t*>(c->next);
  std::memcpy(slot, r.w, 7 * sizeof(uint64_t));
  // The last word carries kind, channel and the commit: one store publishes the record.
  std::atomic_ref<uint64_t>(slot[7]).store(r.w[7] | (commit << 32), std::memory_order_release);
  __builtin_prefetch(slot + 8 * 4, 1);  // claim the cache line of a coming record early
  ++c->next;
  ++c->index;
  return true;
}

void append_clock_sync(Writer::State& w, uint64_t due) noexcept {
  // One thread wins the right to write the reading; the others go on.
  if (!w.next_sync_ticks.compare_exchange_strong(due, due + w.sync_interval_ticks,
                                                 std::memory_order_relaxed))
    return;
  const clock::Reading now = clock::read(w.clock_source);
  w.next_sync_ticks.store(now.ticks + w.sync_interval_ticks, std::memory_order_relaxed);
  Event e;
  e.kind = EventKind::ClockSync;
  e.payload = ClockSync{now.mono_ns, now.wall_ns};
  Words r;
  encode_words(e, r);
  r.w[0] = now.ticks;
  if (!append(w, r)) w.count_dropped();
}

}  // namespace

Writer::Writer(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {
  state_->uid = g_next_uid.fetch_add(1);
  std::lock_guard lock(registry_mutex());
  registry()[state_->uid] = state_.get();
}

Writer::~Writer() {
  close();
  {
    std::lock_guard lock(registry_mutex());
    registry().erase(state_->uid);
  }
  if (state_->base) munmap(state_->base, state_->size);
  if (state_->fd >= 0) ::close(state_->fd);
}

bool Writer::wants(EventKind kind) const noexcept {
  return state_->wanted[static_cast<uint8_t>(kind)] && state_->enabled.load(std::memory_order_relaxed);
}

Ticks Writer::now() const noexcept { return state_->ticks(); }

void Writer::record(const Event& event, Ticks started) noexcept {
  State& w = *state_;
  if (!w.wanted[static_cast<uint8_t>(event.kind)] || !w.enabled.load(std::memory_order_relaxed)) return;
  Words r;
  if (!encode_words(event, r)) {
    std::atomic_ref<uint64_t>(w.header->rejected_events).fetch_add(1, std::memory_order_relaxed);
    return;
  }
  r.w[0] = w.ticks();
  if (started != 0 && started <= r.w[0] && std::holds_alternative<Transfer>(event.payload)) {
    // A Done record keeps its duration where a Posted record keeps the sequence number.
    r.w[4] = static_cast<uint64_t>(double(r.w[0] - started) * w.ns_per_tick);
  }
  if (!append(w, r)) {
    w.count_dropped();
    return;
  }
  const uint64_t due = w.next_sync_ticks.load(std::memory_order_relaxed);
  if (r.w[0] >= due) append_clock_sync(w, due);
}

void Writer::close() noexcept {
  State& w = *state_;
  if (!w.enabled.exchange(false)) return;
  const clock::Reading now = clock::read(w.clock_source);
  w.header->close_ticks = now.ticks;
  w.header->close_mono_ns = now.mono_ns;
  w.header->close_wall_ns = now.wall_ns;
  store_release(w.header->state, uint32_t{format::kStateClosed});
  // Give back this thread's chunk now; other threads give theirs back when they exit.
  if (ThreadState* ts = tls_state)
    for (auto& c : ts->cursors)
      if (c.writer_uid == w.uid) {
        if (c.slot != kNoSlot) w.chunk_busy[c.slot].store(0, std::memory_order_release);
        c = Cursor{};
      }
}

const std::string& Writer::path() const noexcept { return state_->path; }

uint64_t Writer::dropped_events() const noexcept {
  return std::atomic_ref<uint64_t>(state_->header->dropped_events).load(std::memory_order_relaxed);
}

bool Writer::full() const noexcept { return state_->full.load(std::memory_order_relaxed); }

}  // namespace astral::trace
