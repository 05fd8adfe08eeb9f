#pragma once
// Trace events: what the plugin records (Writer::record) and what the reader returns
// (TraceFile::events). The on-disk layout of each kind is in docs/trace-format.md.
//
// Every event carries the join keys of DESIGN.md: commHash, collective / p2p sequence number,
// channel, peer rank, step, the connection, and a host clock reading. A request id is a pure
// function of those keys (request_id() below), so both ends of a transfer compute the same id
// without talking, and a reader joins them across hosts.
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

namespace astral::trace {

// Index into a file's string table (host names, NIC names, NCCL function names...); 0 = none.
using StringId = uint16_t;
inline constexpr uint16_t kNoChannel = 0xffff;

enum class EventKind : uint8_t {
  None = 0,
  // File bookkeeping.
  ClockSync = 1,  // ClockSync: a wall-clock and monotonic reading (also in every chunk header)
  CommInit = 2,   // CommInfo: this process joined a communicator
  Note = 3,       // Note: a free-text message (e.g. "tracing started")
  // The net transport (connection level; the same on both ends of a connection).
  NetConnect = 10,     // Connection
  NetSendPosted = 11,  // Transfer: isend accepted
  NetSendDone = 12,    // Transfer: isend completed (duration = posted -> done)
  NetRecvPosted = 13,  // Transfer: irecv posted (bytes = buffer size)
  NetRecvDone = 14,    // Transfer: irecv completed (bytes = received size)
  NetError = 15,       // NetFault: a request or connection failed
  NetPeerLost = 16,    // NetFault: the remote end went away
  NetClose = 17,       // NetFault (code 0): the connection was closed
  // The profiler plugin (NCCL's view: what each transfer is for).
  GroupBegin = 30,  // Group
  GroupEnd = 31,    // SpanEnd
  CollBegin = 32,   // Collective
  CollEnd = 33,     // SpanEnd (NCCL semantics: enqueued, not completed)
  P2pBegin = 34,    // P2p
  P2pEnd = 35,      // SpanEnd (enqueued)
  ProxyOpBegin = 36,
  ProxyOpEnd = 37,      // SpanEnd
  ProxyStepBegin = 38,  // ProxyStep
  ProxyStepState = 39,  // ProxyStep (state and transSize updated)
  ProxyStepEnd = 40,    // ProxyStep
  NetPluginBegin = 41,  // NetPluginLink: a net transfer started under a proxy step
  NetPluginEnd = 42,    // NetPluginLink
  KernelChBegin = 43,   // KernelChannel
  KernelChEnd = 44,     // KernelChannel
};

std::string_view to_string(EventKind kind) noexcept;

// Event categories, selected with ASTRAL_TRACE_EVENTS (net,coll,proxy,step,kernel,all).
// File bookkeeping (ClockSync, CommInit, Note) is always recorded.
enum EventCategory : uint32_t {
  kCategoryNet = 1u << 0,     // NetConnect .. NetClose
  kCategoryColl = 1u << 1,    // groups, collectives, p2p
  kCategoryProxy = 1u << 2,   // proxy operations
  kCategoryStep = 1u << 3,    // proxy steps and the net events NCCL ties to them
  kCategoryKernel = 1u << 4,  // kernel channels (GPU timer)
  kCategoryAll = 0x1f,
};
uint32_t category_of(EventKind kind) noexcept;
// "all", "net,coll", ... ; nullopt names the first unknown word in *bad_word.
std::optional<uint32_t> parse_event_mask(std::string_view text, std::string* bad_word = nullptr);

// --- Payloads: one per family of kinds. Unused fields keep their defaults. ---
struct ClockSync {
  uint64_t mono_ns = 0;  // CLOCK_MONOTONIC
  uint64_t wall_ns = 0;  // CLOCK_REALTIME, ns since the Unix epoch
  bool operator==(const ClockSync&) const = default;
};
struct CommInfo {
  int32_t rank = -1;
  int32_t nranks = 0;
  int32_t nnodes = 0;
  StringId name = 0;
  bool operator==(const CommInfo&) const = default;
};
struct Note {
  StringId text = 0;
  uint8_t level = 0;  // 0 info, 1 warning, 2 error
  bool operator==(const Note&) const = default;
};
struct Connection {
  uint64_t conn_id = 0;  // same at both ends (chosen by the listener, carried in the handle)
  int32_t dev = -1;      // net device index
  int32_t port = 0;      // local port
  int32_t streams = 0;   // sockets / QPs striped over
  int32_t peer = -1;     // remote rank when known
  StringId remote_host = 0, nic = 0, local_addr = 0, remote_addr = 0;
  bool is_send = false;  // the sending end of the connection
  bool operator==(const Connection&) const = default;
};
struct Transfer {
  uint64_t request_id = 0;   // request_id(MessageKeys{comm, conn, seq}) or of StepKeys
  uint64_t conn_id = 0;
  uint64_t seq = 0;          // message ordinal on the connection (Posted events only)
  uint64_t bytes = 0;
  uint64_t duration_ns = 0;  // Done events: posted -> completed
  int32_t tag = 0;           // NCCL tag (the sender's rank)
  bool operator==(const Transfer&) const = default;
};
struct NetFault {
  uint64_t conn_id = 0;
  uint64_t request_id = 0;
  int32_t code = 0;  // ncclResult_t or errno, as the transport reports it
  StringId message = 0;
  bool operator==(const NetFault&) const = default;
};
struct SpanEnd {
  uint64_t span_id = 0;
  bool operator==(const SpanEnd&) const = default;
};
struct Group {
  uint64_t span_id = 0;
  int32_t depth = 0;
  bool operator==(const Group&) const = default;
};
struct Collective {
  uint64_t span_id = 0;
  uint64_t seq = 0;    // NCCL seqNumber (a separate counter per collective function)
  uint64_t count = 0;  // elements
  StringId func = 0, datatype = 0, algo = 0, proto = 0;
  int32_t root = -1;
  uint8_t n_channels = 0;
  uint8_t n_warps = 0;
  bool operator==(const Collective&) const = default;
};
struct P2p {
  uint64_t span_id = 0;
  uint64_t seq = 0;  // our ordinal per (comm, peer, direction): NCCL has none for p2p
  uint64_t count = 0;
  StringId func = 0, datatype = 0;
  int32_t peer = -1;
  uint8_t n_channels = 0;
  bool operator==(const P2p&) const = default;
};
struct ProxyOp {
  uint64_t span_id = 0;
  uint64_t parent_id = 0;  // the collective or p2p span it serves
  uint64_t seq = 0;        // the parent's sequence number
  int32_t peer = -1;
  int32_t n_steps = 0;
  int32_t chunk_bytes = 0;
  bool is_send = false;
  bool operator==(const ProxyOp&) const = default;
};
struct ProxyStep {
  uint64_t request_id = 0;  // request_id(StepKeys): equal on the sending and the receiving rank
  uint64_t parent_id = 0;   // the proxy op span
  uint64_t bytes = 0;       // transSize once known
  int32_t step = -1;
  int32_t peer = -1;
  int32_t state = -1;  // NCCL ncclProfilerEventState_t of the last update
  bool is_send = false;
  bool operator==(const ProxyStep&) const = default;
};
struct NetPluginLink {
  uint64_t request_id = 0;      // the proxy step's request id
  uint64_t conn_id = 0;         // the net connection that carried it
  uint64_t net_request_id = 0;  // the Transfer's request id at the connection level
  bool operator==(const NetPluginLink&) const = default;
};
struct KernelChannel {
  uint64_t parent_id = 0;  // the collective span
  uint64_t gpu_timer = 0;  // GPU globaltimer (ns, GPU clock)
  bool operator==(const KernelChannel&) const = default;
};

using Payload = std::variant<std::monostate, ClockSync, CommInfo, Note, Connection, Transfer, NetFault,
                             SpanEnd, Group, Collective, P2p, ProxyOp, ProxyStep, NetPluginLink,
                             KernelChannel>;

// The payload alternative each kind carries (variant index); an event whose payload does not
// match its kind is rejected by the writer.
size_t payload_index_of(EventKind kind) noexcept;

struct Event {
  EventKind kind = EventKind::None;
  uint16_t channel = kNoChannel;
  uint32_t thread = 0;     // reader: index of the writing thread within its file
  uint64_t time_ns = 0;    // reader: CLOCK_MONOTONIC of the writing host (writer: ignored)
  uint64_t comm_hash = 0;  // NCCL commHash (commId); 0 when not tied to a communicator
  Payload payload;

  template <class T>
  const T* as() const noexcept {
    return std::get_if<T>(&payload);
  }
};

// --- Request ids: a pure function of the join keys (both ends compute the same value). ---

// A stable 32-bit code for an operation name ("AllReduce", ...). P2p uses kP2pOp on both ends
// (NCCL calls it "Send" on one side and "Recv" on the other).
constexpr uint32_t op_code(std::string_view name) noexcept {
  uint32_t h = 2166136261u;  // FNV-1a 32
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}
inline constexpr uint32_t kP2pOp = op_code("P2p");

// One step of one collective or p2p operation between two ranks (the profiler's view).
struct StepKeys {
  uint64_t comm_hash = 0;
  uint32_t op = 0;  // op_code(func) or kP2pOp
  uint64_t seq = 0;
  uint16_t channel = 0;
  int32_t src_rank = -1;
  int32_t dst_rank = -1;
  int32_t step = -1;
};
// One message on one net connection (the transport's view: FIFO per connection).
struct MessageKeys {
  uint64_t comm_hash = 0;
  uint64_t conn_id = 0;
  uint64_t seq = 0;
};

namespace detail {
constexpr uint64_t mix(uint64_t h, uint64_t word) noexcept {
  h = (h ^ word) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 32);
}
constexpr uint64_t finish(uint64_t h) noexcept {  // murmur3 fmix64
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}
}  // namespace detail

constexpr uint64_t request_id(const StepKeys& k) noexcept {
  uint64_t h = detail::mix(0x5354455000000001ull, k.comm_hash);  // domain tag "STEP"
  h = detail::mix(h, k.seq);
  h = detail::mix(h, (uint64_t{k.op} << 32) | static_cast<uint32_t>(k.step));
  h = detail::mix(h, (uint64_t{k.channel} << 48) | (uint64_t(uint32_t(k.src_rank) & 0xffffff) << 24) |
                         (uint32_t(k.dst_rank) & 0xffffff));
  return detail::finish(h) | 1;  // never 0: 0 means "no request"
}
constexpr uint64_t request_id(const MessageKeys& k) noexcept {
  uint64_t h = detail::mix(0x4d53470000000002ull, k.comm_hash);  // domain tag "MSG"
  h = detail::mix(h, k.conn_id);
  h = detail::mix(h, k.seq);
  return detail::finish(h) | 1;
}

}  // namespace astral::trace
