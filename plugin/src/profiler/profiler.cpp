#include "profiler/profiler.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "abi/profiler_common.h"
#include "core/log.hpp"
#include "core/net_trace.hpp"

namespace astral::plugin::profiler {
namespace {
namespace tr = astral::trace;

constexpr uint32_t kLiveHandle = 0x50524f46;  // "PROF": a slot of one of our rings

struct Context;

// One event NCCL holds a handle to. Every type uses the same struct, so one ring serves several
// types; fields a type does not use keep their defaults.
struct Handle {
  uint32_t magic = 0;
  EventType type = EventType::kOther;
  Context* ctx = nullptr;
  uint64_t span_id = 0;
  uint64_t parent_id = 0;  // kernel channels: the collective's span
  uint64_t comm_hash = 0;
  uint16_t channel = tr::kNoChannel;
  // The collective or p2p operation this event serves, inherited by its proxy ops and steps.
  uint32_t op = 0;  // trace::op_code(func) or trace::kP2pOp
  uint64_t seq = 0;
  int32_t peer = -1;
  bool is_send = false;
  // Proxy steps, kernel channels and net plugin events.
  tr::ProxyStep step;
  tr::NetPluginLink link;
  uint64_t gpu_timer_stop = 0;
};

// Handles are reused round-robin and freed only at finalize: NCCL may name a handle as a parent
// after stopping it (a collective's stop means "enqueued"), so a handle must stay readable.
// A ring far larger than what is ever in flight keeps a live slot from being reused.
class Ring {
 public:
  explicit Ring(size_t size) : slots_(new Handle[size]), size_(size) {}
  Handle* take() noexcept { return &slots_[next_.fetch_add(1, std::memory_order_relaxed) % size_]; }

 private:
  std::unique_ptr<Handle[]> slots_;
  size_t size_;
  std::atomic<uint64_t> next_{0};
};

struct Context {
  tr::Writer* writer = nullptr;
  pid_t pid = 0;
  // The communicator; v1-v3 learn it from the first collective or p2p (announce_from).
  // Atomic: with v1-v3 the user's thread sets them while proxy threads may already read them.
  std::once_flag announced;
  std::atomic<uint64_t> comm_hash{0};
  std::atomic<int> rank{-1};
  int nranks = 0;
  int nnodes = 0;
  std::string name;
  Ring tasks{2048};  // groups, collectives, p2p
  Ring ops{4096};    // proxy ops, kernel channels
  Ring steps{16384};  // proxy steps, net plugin events
  // NCCL numbers collectives, not p2p: our own ordinal per (peer, direction), which the peer
  // computes identically for the matching operation.
  std::mutex p2p_mutex;
  std::unordered_map<uint64_t, uint64_t> p2p_next;

  uint64_t next_p2p_seq(int peer, bool is_send) {
    std::lock_guard lock(p2p_mutex);
    return p2p_next[(uint64_t(uint32_t(peer)) << 1) | (is_send ? 1 : 0)]++;
  }
};

std::atomic<uint64_t> g_next_span{1};

void announce(Context& ctx) {
  std::call_once(ctx.announced, [&] {
    ctx.writer->set_identity(ctx.rank, ctx.nranks, ctx.comm_hash);
    tr::CommInfo info{ctx.rank, ctx.nranks, ctx.nnodes, ctx.writer->intern(ctx.name)};
    ctx.writer->add_comm(ctx.comm_hash, info);
  });
}

// v1-v3 name the communicator only in collective and p2p descriptors.
void announce_from(Context& ctx, const EventDescr& d) {
  if (ctx.comm_hash == 0 && d.comm_hash != 0) {
    std::call_once(ctx.announced, [&] {
      ctx.comm_hash = d.comm_hash;
      ctx.rank = d.rank;
      ctx.writer->set_identity(ctx.rank, 0, ctx.comm_hash);
      ctx.writer->add_comm(ctx.comm_hash, tr::CommInfo{ctx.rank, 0, 0, 0});
    });
  }
}

// The parent handle when it is one of ours of an expected type, else null.
Handle* parent_of(const EventDescr& d, EventType a, EventType b = EventType::kOther) {
  auto* h = static_cast<Handle*>(d.parent);
  if (!h || h->magic != kLiveHandle || (h->type != a && h->type != b)) return nullptr;
  return h;
}

Handle* fresh(Context& ctx, Ring& ring, EventType type, uint64_t comm_hash) {
  Handle* h = ring.take();
  *h = Handle{};
  h->magic = kLiveHandle;
  h->type = type;
  h->ctx = &ctx;
  h->span_id = g_next_span.fetch_add(1, std::memory_order_relaxed);
  h->comm_hash = comm_hash ? comm_hash : ctx.comm_hash.load(std::memory_order_relaxed);
  return h;
}

template <class Payload>
void record(const Handle& h, tr::EventKind kind, const Payload& payload) {
  tr::Event e;
  e.kind = kind;
  e.channel = h.channel;
  e.comm_hash = h.comm_hash;
  e.payload = payload;
  h.ctx->writer->record(e);
}

Handle* start_task(Context& ctx, const EventDescr& d) {
  announce_from(ctx, d);
  tr::Writer& w = *ctx.writer;
  switch (d.type) {
    case EventType::kGroup: {
      Handle* h = fresh(ctx, ctx.tasks, d.type, 0);
      record(*h, tr::EventKind::GroupBegin, tr::Group{h->span_id, d.group_depth});
      return h;
    }
    case EventType::kColl:
    case EventType::kCeColl: {
      // A CE collective has the comm's CE sequence number and no proxy ops or steps under it;
      // algo "CE" (set by the ABI layer) keeps it apart from kernel collectives in the trace.
      Handle* h = fresh(ctx, ctx.tasks, d.type, d.comm_hash);
      h->op = d.func ? tr::op_code(d.func) : 0;
      h->seq = d.seq;
      tr::Collective c;
      c.span_id = h->span_id;
      c.seq = d.seq;
      c.count = d.count;
      c.func = w.intern_static(d.func);
      c.datatype = w.intern_static(d.datatype);
      c.algo = w.intern_static(d.algo);
      c.proto = w.intern_static(d.proto);
      c.root = d.root;
      c.n_channels = d.n_channels;
      c.n_warps = d.n_warps;
      record(*h, tr::EventKind::CollBegin, c);
      return h;
    }
    case EventType::kP2p: {
      Handle* h = fresh(ctx, ctx.tasks, d.type, d.comm_hash);
      h->op = tr::kP2pOp;
      h->is_send = d.func && std::strcmp(d.func, "Send") == 0;
      h->peer = d.peer;
      h->seq = ctx.next_p2p_seq(d.peer, h->is_send);
      tr::P2p p;
      p.span_id = h->span_id;
      p.seq = h->seq;
      p.count = d.count;
      p.func = w.intern_static(d.func);
      p.datatype = w.intern_static(d.datatype);
      p.peer = d.peer;
      p.n_channels = d.n_channels;
      record(*h, tr::EventKind::P2pBegin, p);
      return h;
    }
    default:
      return nullptr;
  }
}

Handle* start_proxy(Context& ctx, const EventDescr& d) {
  switch (d.type) {
    case EventType::kProxyOp: {
      // A PXN op runs in another rank's proxy: its parent lives in that process.
      Handle* parent = d.pid == ctx.pid ? parent_of(d, EventType::kColl, EventType::kP2p) : nullptr;
      Handle* h = fresh(ctx, ctx.ops, d.type, parent ? parent->comm_hash : 0);
      h->channel = d.channel;
      h->peer = d.peer;
      h->is_send = d.is_send;
      h->op = parent ? parent->op : 0;
      h->seq = parent ? parent->seq : 0;
      tr::ProxyOp op;
      op.span_id = h->span_id;
      op.parent_id = parent ? parent->span_id : 0;
      op.seq = h->seq;
      op.peer = d.peer;
      op.n_steps = d.n_steps;
      op.chunk_bytes = d.chunk_bytes;
      op.is_send = d.is_send;
      record(*h, tr::EventKind::ProxyOpBegin, op);
      return h;
    }
    case EventType::kProxyStep: {
      Handle* op = parent_of(d, EventType::kProxyOp);
      Handle* h = fresh(ctx, ctx.steps, d.type, op ? op->comm_hash : 0);
      const int known_rank = ctx.rank.load(std::memory_order_relaxed);
      const int me = known_rank >= 0 ? known_rank : d.rank;
      h->channel = op ? op->channel : tr::kNoChannel;
      h->is_send = op && op->is_send;
      tr::StepKeys keys;
      keys.comm_hash = h->comm_hash;
      keys.op = op ? op->op : 0;
      keys.seq = op ? op->seq : 0;
      keys.channel = op ? op->channel : 0;
      keys.src_rank = h->is_send ? me : (op ? op->peer : -1);
      keys.dst_rank = h->is_send ? (op ? op->peer : -1) : me;
      keys.step = d.step;
      h->step.request_id = tr::request_id(keys);
      h->step.parent_id = op ? op->span_id : 0;
      h->step.step = d.step;
      h->step.peer = op ? op->peer : -1;
      h->step.is_send = h->is_send;
      record(*h, tr::EventKind::ProxyStepBegin, h->step);
      return h;
    }
    case EventType::kKernelChannel: {
      Handle* task = parent_of(d, EventType::kColl, EventType::kP2p);
      Handle* h = fresh(ctx, ctx.ops, d.type, task ? task->comm_hash : 0);
      h->channel = d.channel;
      h->parent_id = task ? task->span_id : 0;
      record(*h, tr::EventKind::KernelChBegin, tr::KernelChannel{h->parent_id, d.gpu_timer});
      return h;
    }
    case EventType::kNetPlugin: {
      Handle* step = parent_of(d, EventType::kProxyStep);
      Handle* h = fresh(ctx, ctx.steps, d.type, step ? step->comm_hash : 0);
      h->channel = step ? step->channel : tr::kNoChannel;
      h->link.request_id = step ? step->step.request_id : 0;
      if (d.net_plugin_id == ASTRAL_PROFILER_NET_ID && d.net_data) {
        astralProfilerNetDescr_v1_t net;
        std::memcpy(&net, d.net_data, sizeof net);
        h->link.conn_id = net.connection_id;
        h->link.net_request_id = net.request_id;
      }
      record(*h, tr::EventKind::NetPluginBegin, h->link);
      return h;
    }
    default:
      return nullptr;
  }
}

}  // namespace

ncclResult_t init(void** context, int* activation_mask, const CommDescr* comm) noexcept {
  *context = nullptr;
  tr::Writer* writer = process_trace_writer();
  int mask = 0;
  if (writer) {
    if (writer->wants(tr::EventKind::CollBegin)) mask |= ncclProfileGroup | ncclProfileColl | ncclProfileP2p;
    if (writer->wants(tr::EventKind::ProxyOpBegin)) mask |= ncclProfileProxyOp;
    if (writer->wants(tr::EventKind::ProxyStepBegin)) mask |= ncclProfileProxyStep | ncclProfileNetPlugin;
    if (writer->wants(tr::EventKind::KernelChBegin)) mask |= ncclProfileKernelCh;
  }
  if (mask != 0) {
    Context* ctx = nullptr;
    try {
      ctx = new Context;  // rings: ~2 MiB per communicator, only when tracing
    } catch (const std::bad_alloc&) {
    }
    if (!ctx) {
      ASTRAL_WARN("profiler: out of memory for a communicator's event handles; not profiling it");
      mask = 0;
    } else {
      ctx->writer = writer;
      ctx->pid = getpid();
      if (comm) {
        ctx->comm_hash = comm->comm_hash;
        ctx->rank = comm->rank;
        ctx->nranks = comm->nranks;
        ctx->nnodes = comm->nnodes;
        if (comm->name) ctx->name = comm->name;
        announce(*ctx);
      }
      *context = ctx;
    }
  }
  // One process-wide mask in NCCL: every communicator asks for the same events.
  if (activation_mask) *activation_mask = mask;
  return ncclSuccess;
}

ncclResult_t start_event(void* context, void** handle, const EventDescr& d) noexcept {
  *handle = nullptr;
  auto* ctx = static_cast<Context*>(context);
  if (!ctx) return ncclSuccess;
  switch (d.type) {
    case EventType::kGroup:
    case EventType::kColl:
    case EventType::kCeColl:
    case EventType::kP2p:
      *handle = start_task(*ctx, d);
      break;
    case EventType::kProxyOp:
    case EventType::kProxyStep:
    case EventType::kKernelChannel:
    case EventType::kNetPlugin:
      *handle = start_proxy(*ctx, d);
      break;
    case EventType::kOther:
      break;
  }
  return ncclSuccess;
}

ncclResult_t stop_event(void* handle) noexcept {
  auto* h = static_cast<Handle*>(handle);
  if (!h || h->magic != kLiveHandle) return ncclSuccess;  // NCCL passes back null handles too
  switch (h->type) {
    case EventType::kGroup: record(*h, tr::EventKind::GroupEnd, tr::SpanEnd{h->span_id}); break;
    case EventType::kColl:
    case EventType::kCeColl: record(*h, tr::EventKind::CollEnd, tr::SpanEnd{h->span_id}); break;
    case EventType::kP2p: record(*h, tr::EventKind::P2pEnd, tr::SpanEnd{h->span_id}); break;
    case EventType::kProxyOp: record(*h, tr::EventKind::ProxyOpEnd, tr::SpanEnd{h->span_id}); break;
    case EventType::kProxyStep: record(*h, tr::EventKind::ProxyStepEnd, h->step); break;
    case EventType::kKernelChannel:
      record(*h, tr::EventKind::KernelChEnd, tr::KernelChannel{h->parent_id, h->gpu_timer_stop});
      break;
    case EventType::kNetPlugin: record(*h, tr::EventKind::NetPluginEnd, h->link); break;
    case EventType::kOther: break;
  }
  return ncclSuccess;
}

ncclResult_t record_state(void* handle, int state, const StateArgs& args) noexcept {
  auto* h = static_cast<Handle*>(handle);
  if (!h || h->magic != kLiveHandle) return ncclSuccess;
  switch (h->type) {
    case EventType::kProxyStep:
      h->step.state = state;
      if (args.present && args.word > h->step.bytes) h->step.bytes = args.word;  // transSize
      record(*h, tr::EventKind::ProxyStepState, h->step);
      break;
    case EventType::kKernelChannel:
      if (state == ncclProfilerKernelChStop && args.present) h->gpu_timer_stop = args.word;
      break;
    case EventType::kNetPlugin:
      // Our transport's final description: a receive's request id is known only now.
      if (state == ncclProfilerNetPluginUpdate && args.present && args.word != 0 && h->link.conn_id != 0) {
        astralProfilerNetDescr_v1_t net;
        std::memcpy(&net, reinterpret_cast<const void*>(uintptr_t(args.word)), sizeof net);
        if (net.connection_id == h->link.conn_id) h->link.net_request_id = net.request_id;
      }
      break;
    default:
      break;  // v1-v3 proxy op states: NCCL's own progress detail, not recorded
  }
  return ncclSuccess;
}

ncclResult_t finalize(void* context) noexcept {
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

}  // namespace astral::plugin::profiler
