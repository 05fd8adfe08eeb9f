// Event <-> 64-byte record codec, event-kind tables and the metadata checksums.
#include "format.hpp"

#include <array>
#include <string>
#include <type_traits>

namespace astral::trace {

namespace {
// How each payload is laid out in a record's 40 payload bytes (docs/trace-format.md, "Records").
struct ClockSyncWire {
  uint64_t mono_ns, wall_ns;
};
struct CommWire {
  int32_t rank, nranks, nnodes;
  StringId name;
};
struct NoteWire {
  StringId text;
  uint8_t level;
};
struct ConnectionWire {
  uint64_t conn_id;
  int32_t dev, port, streams, peer;
  StringId remote_host, nic, local_addr, remote_addr;
};
struct TransferWire {
  uint64_t request_id, conn_id;
  uint64_t seq_or_duration;  // Posted: message ordinal; Done: duration in ticks
  uint64_t bytes;
  int32_t tag;
};
struct FaultWire {
  uint64_t conn_id, request_id;
  int32_t code;
  StringId message;
};
struct SpanEndWire {
  uint64_t span_id;
};
struct GroupWire {
  uint64_t span_id;
  int32_t depth;
};
struct CollWire {
  uint64_t span_id, seq, count;
  StringId func, datatype, algo, proto;
  int32_t root;
  uint8_t n_channels, n_warps;
};
struct P2pWire {
  uint64_t span_id, seq, count;
  StringId func, datatype;
  int32_t peer;
  uint8_t n_channels;
};
struct ProxyOpWire {
  uint64_t span_id, parent_id, seq;
  int32_t peer, n_steps, chunk_bytes;
};
struct ProxyStepWire {
  uint64_t request_id, parent_id, bytes;
  int32_t step, peer, state;
};
struct NetPluginWire {
  uint64_t request_id, conn_id, net_request_id;
};
struct KernelWire {
  uint64_t parent_id, gpu_timer;
};

template <class W>
void put(format::RawRecord& r, const W& w) noexcept {
  static_assert(sizeof(W) <= sizeof(r.payload) && std::is_trivially_copyable_v<W>);
  std::memcpy(r.payload, &w, sizeof w);
}
template <class W>
W get(const format::RawRecord& r) noexcept {
  static_assert(sizeof(W) <= sizeof(r.payload) && std::is_trivially_copyable_v<W>);
  W w;
  std::memcpy(&w, r.payload, sizeof w);
  return w;
}

template <class T>
constexpr size_t index_of = Payload(T{}).index();

bool is_done(EventKind k) { return k == EventKind::NetSendDone || k == EventKind::NetRecvDone; }
}  // namespace

std::string_view to_string(EventKind kind) noexcept {
  switch (kind) {
    case EventKind::None: return "None";
    case EventKind::ClockSync: return "ClockSync";
    case EventKind::CommInit: return "CommInit";
    case EventKind::Note: return "Note";
    case EventKind::NetConnect: return "NetConnect";
    case EventKind::NetSendPosted: return "NetSendPosted";
    case EventKind::NetSendDone: return "NetSendDone";
    case EventKind::NetRecvPosted: return "NetRecvPosted";
    case EventKind::NetRecvDone: return "NetRecvDone";
    case EventKind::NetError: return "NetError";
    case EventKind::NetPeerLost: return "NetPeerLost";
    case EventKind::NetClose: return "NetClose";
    case EventKind::GroupBegin: return "GroupBegin";
    case EventKind::GroupEnd: return "GroupEnd";
    case EventKind::CollBegin: return "CollBegin";
    case EventKind::CollEnd: return "CollEnd";
    case EventKind::P2pBegin: return "P2pBegin";
    case EventKind::P2pEnd: return "P2pEnd";
    case EventKind::ProxyOpBegin: return "ProxyOpBegin";
    case EventKind::ProxyOpEnd: return "ProxyOpEnd";
    case EventKind::ProxyStepBegin: return "ProxyStepBegin";
    case EventKind::ProxyStepState: return "ProxyStepState";
    case EventKind::ProxyStepEnd: return "ProxyStepEnd";
    case EventKind::NetPluginBegin: return "NetPluginBegin";
    case EventKind::NetPluginEnd: return "NetPluginEnd";
    case EventKind::KernelChBegin: return "KernelChBegin";
    case EventKind::KernelChEnd: return "KernelChEnd";
  }
  return "Unknown";
}

size_t payload_index_of(EventKind kind) noexcept {
  switch (kind) {
    case EventKind::ClockSync: return index_of<ClockSync>;
    case EventKind::CommInit: return index_of<CommInfo>;
    case EventKind::Note: return index_of<Note>;
    case EventKind::NetConnect: return index_of<Connection>;
    case EventKind::NetSendPosted:
    case EventKind::NetSendDone:
    case EventKind::NetRecvPosted:
    case EventKind::NetRecvDone: return index_of<Transfer>;
    case EventKind::NetError:
    case EventKind::NetPeerLost:
    case EventKind::NetClose: return index_of<NetFault>;
    case EventKind::GroupBegin: return index_of<Group>;
    case EventKind::GroupEnd:
    case EventKind::CollEnd:
    case EventKind::P2pEnd:
    case EventKind::ProxyOpEnd: return index_of<SpanEnd>;
    case EventKind::CollBegin: return index_of<Collective>;
    case EventKind::P2pBegin: return index_of<P2p>;
    case EventKind::ProxyOpBegin: return index_of<ProxyOp>;
    case EventKind::ProxyStepBegin:
    case EventKind::ProxyStepState:
    case EventKind::ProxyStepEnd: return index_of<ProxyStep>;
    case EventKind::NetPluginBegin:
    case EventKind::NetPluginEnd: return index_of<NetPluginLink>;
    case EventKind::KernelChBegin:
    case EventKind::KernelChEnd: return index_of<KernelChannel>;
    case EventKind::None: break;
  }
  return std::variant_npos;
}

uint32_t category_of(EventKind kind) noexcept {
  const auto k = static_cast<uint8_t>(kind);
  if (k >= 10 && k <= 17) return kCategoryNet;
  if (k >= 30 && k <= 35) return kCategoryColl;
  if (k == 36 || k == 37) return kCategoryProxy;
  if (k >= 38 && k <= 42) return kCategoryStep;
  if (k == 43 || k == 44) return kCategoryKernel;
  return 0;  // bookkeeping: always recorded
}

std::optional<uint32_t> parse_event_mask(std::string_view text, std::string* bad_word) {
  static constexpr std::array<std::pair<std::string_view, uint32_t>, 6> names{{
      {"net", kCategoryNet},
      {"coll", kCategoryColl},
      {"proxy", kCategoryProxy},
      {"step", kCategoryStep},
      {"kernel", kCategoryKernel},
      {"all", kCategoryAll},
  }};
  uint32_t mask = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view word = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
    while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
    if (word.empty()) continue;
    bool known = false;
    for (const auto& [name, bits] : names)
      if (word == name) mask |= bits, known = true;
    if (!known) {
      if (bad_word) *bad_word = std::string(word);
      return std::nullopt;
    }
  }
  return mask;
}

namespace format {

uint32_t header_checksum(const FileHeader& h) noexcept {
  static_assert(offsetof(FileHeader, static_checksum) % 4 == 0);
  uint64_t words[offsetof(FileHeader, static_checksum) / 8 + 1] = {};
  std::memcpy(words, &h, offsetof(FileHeader, static_checksum));
  return checksum_words(words, sizeof words / 8, 0x48454144ull);
}

uint32_t meta_checksum(const void* entry, uint64_t offset) noexcept {
  MetaEntryHeader head;
  std::memcpy(&head, entry, sizeof head);
  const size_t n = head.bytes / 8;
  uint64_t w[64] = {};  // entries are at most 512 bytes (the writer enforces it)
  if (n == 0 || n > 64) return 0;
  std::memcpy(w, entry, n * 8);
  w[0] &= ~uint64_t{0xffffffff};  // exclude the commit word (the low half of word 0)
  return checksum_words(w, n, offset ^ 0x4d455441ull);
}

void encode_connection(const Connection& c, uint64_t comm_hash, MetaConnection& m) noexcept {
  m = MetaConnection{comm_hash, c.conn_id, c.dev, c.port, c.streams, c.peer, c.remote_host,
                     c.nic, c.local_addr, c.remote_addr, c.is_send ? 1u : 0u, 0};
}

Connection decode_connection(const MetaConnection& m) noexcept {
  return Connection{m.conn_id, m.dev,        m.port,        m.streams,    m.peer,
                    m.remote_host, m.nic, m.local_addr, m.remote_addr, m.is_send != 0};
}

bool encode(const Event& e, RawRecord& r) noexcept {
  if (e.payload.index() != payload_index_of(e.kind)) return false;
  std::memset(&r, 0, sizeof r);
  r.comm_hash = e.comm_hash;
  r.kind = static_cast<uint8_t>(e.kind);
  r.channel = e.channel;
  struct Visitor {
    RawRecord& r;
    EventKind kind;
    void operator()(std::monostate) const {}
    void operator()(const ClockSync& p) const { put(r, ClockSyncWire{p.mono_ns, p.wall_ns}); }
    void operator()(const CommInfo& p) const { put(r, CommWire{p.rank, p.nranks, p.nnodes, p.name}); }
    void operator()(const Note& p) const { put(r, NoteWire{p.text, p.level}); }
    void operator()(const Connection& p) const {
      put(r, ConnectionWire{p.conn_id, p.dev, p.port, p.streams, p.peer, p.remote_host, p.nic,
                            p.local_addr, p.remote_addr});
      if (p.is_send) r.flags |= kRecordSend;
    }
    void operator()(const Transfer& p) const {
      put(r, TransferWire{p.request_id, p.conn_id, is_done(kind) ? p.duration_ns : p.seq, p.bytes, p.tag});
    }
    void operator()(const NetFault& p) const { put(r, FaultWire{p.conn_id, p.request_id, p.code, p.message}); }
    void operator()(const SpanEnd& p) const { put(r, SpanEndWire{p.span_id}); }
    void operator()(const Group& p) const { put(r, GroupWire{p.span_id, p.depth}); }
    void operator()(const Collective& p) const {
      put(r, CollWire{p.span_id, p.seq, p.count, p.func, p.datatype, p.algo, p.proto, p.root,
                      p.n_channels, p.n_warps});
    }
    void operator()(const P2p& p) const {
      put(r, P2pWire{p.span_id, p.seq, p.count, p.func, p.datatype, p.peer, p.n_channels});
    }
    void operator()(const ProxyOp& p) const {
      put(r, ProxyOpWire{p.span_id, p.parent_id, p.seq, p.peer, p.n_steps, p.chunk_bytes});
      if (p.is_send) r.flags |= kRecordSend;
    }
    void operator()(const ProxyStep& p) const {
      put(r, ProxyStepWire{p.request_id, p.parent_id, p.bytes, p.step, p.peer, p.state});
      if (p.is_send) r.flags |= kRecordSend;
    }
    void operator()(const NetPluginLink& p) const {
      put(r, NetPluginWire{p.request_id, p.conn_id, p.net_request_id});
    }
    void operator()(const KernelChannel& p) const { put(r, KernelWire{p.parent_id, p.gpu_timer}); }
  };
  std::visit(Visitor{r, e.kind}, e.payload);
  return true;
}

bool decode(const RawRecord& r, Event& e) noexcept {
  const auto kind = static_cast<EventKind>(r.kind);
  e = Event{};
  e.kind = kind;
  e.channel = r.channel;
  e.time_ns = r.ticks;
  e.comm_hash = r.comm_hash;
  const bool send = r.flags & kRecordSend;
  switch (payload_index_of(kind)) {
    case index_of<ClockSync>: {
      auto w = get<ClockSyncWire>(r);
      e.payload = ClockSync{w.mono_ns, w.wall_ns};
      return true;
    }
    case index_of<CommInfo>: {
      auto w = get<CommWire>(r);
      e.payload = CommInfo{w.rank, w.nranks, w.nnodes, w.name};
      return true;
    }
    case index_of<Note>: {
      auto w = get<NoteWire>(r);
      e.payload = Note{w.text, w.level};
      return true;
    }
    case index_of<Connection>: {
      auto w = get<ConnectionWire>(r);
      e.payload = Connection{w.conn_id,     w.dev, w.port,       w.streams,     w.peer,
                             w.remote_host, w.nic, w.local_addr, w.remote_addr, send};
      return true;
    }
    case index_of<Transfer>: {
      auto w = get<TransferWire>(r);
      Transfer t{w.request_id, w.conn_id, 0, w.bytes, 0, w.tag};
      (is_done(kind) ? t.duration_ns : t.seq) = w.seq_or_duration;
      e.payload = t;
      return true;
    }
    case index_of<NetFault>: {
      auto w = get<FaultWire>(r);
      e.payload = NetFault{w.conn_id, w.request_id, w.code, w.message};
      return true;
    }
    case index_of<SpanEnd>: e.payload = SpanEnd{get<SpanEndWire>(r).span_id}; return true;
    case index_of<Group>: {
      auto w = get<GroupWire>(r);
      e.payload = Group{w.span_id, w.depth};
      return true;
    }
    case index_of<Collective>: {
      auto w = get<CollWire>(r);
      e.payload = Collective{w.span_id, w.seq,  w.count, w.func,       w.datatype,
                             w.algo,    w.proto, w.root, w.n_channels, w.n_warps};
      return true;
    }
    case index_of<P2p>: {
      auto w = get<P2pWire>(r);
      e.payload = P2p{w.span_id, w.seq, w.count, w.func, w.datatype, w.peer, w.n_channels};
      return true;
    }
    case index_of<ProxyOp>: {
      auto w = get<ProxyOpWire>(r);
      e.payload = ProxyOp{w.span_id, w.parent_id, w.seq, w.peer, w.n_steps, w.chunk_bytes, send};
      return true;
    }
    case index_of<ProxyStep>: {
      auto w = get<ProxyStepWire>(r);
      e.payload = ProxyStep{w.request_id, w.parent_id, w.bytes, w.step, w.peer, w.state, send};
      return true;
    }
    case index_of<NetPluginLink>: {
      auto w = get<NetPluginWire>(r);
      e.payload = NetPluginLink{w.request_id, w.conn_id, w.net_request_id};
      return true;
    }
    case index_of<KernelChannel>: {
      auto w = get<KernelWire>(r);
      e.payload = KernelChannel{w.parent_id, w.gpu_timer};
      return true;
    }
    default: return false;
  }
}

}  // namespace format
}  // namespace astral::trace
