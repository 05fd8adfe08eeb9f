#include "core/net_trace.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "abi/profiler_common.h"
#include "core/log.hpp"

namespace astral::plugin {
namespace {
namespace tr = astral::trace;

// "10.0.0.1:4242" or "[fe80::1]:4242" -> host and port.
std::string_view address_host(std::string_view address) {
  size_t colon = address.rfind(':');
  std::string_view host = colon == std::string_view::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}
int address_port(std::string_view address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon != std::string_view::npos) {
    std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
  }
  return port;
}

void warn_through_nccl(const char* message) { ASTRAL_WARN("trace: {}", message); }

class TraceNetObserver final : public NetObserver {
 public:
  explicit TraceNetObserver(tr::Writer& writer) : writer_(writer) {}

  void on_connected(const ConnectionInfo& c) noexcept override {
    tr::Connection connection;
    connection.conn_id = c.connection_id;
    connection.dev = c.device;
    connection.port = address_port(c.local_address);
    connection.streams = c.streams;
    connection.remote_host = writer_.intern(address_host(c.remote_address));
    connection.nic = writer_.intern(c.device_name);
    connection.local_addr = writer_.intern(c.local_address);
    connection.remote_addr = writer_.intern(c.remote_address);
    connection.is_send = c.sender;
    writer_.add_connection(c.comm_id, connection, c.path);
  }

  void on_posted(const TransferInfo& t) noexcept override {
    // A grouped receive's slots learn their message only when it arrives: their Done event
    // carries the duration from posting instead.
    if (!t.sequence_known) return;
    record(t.send ? tr::EventKind::NetSendPosted : tr::EventKind::NetRecvPosted, t, 0);
  }

  void on_completed(const TransferInfo& t) noexcept override {
    const int64_t duration = t.completed_ns - t.posted_ns;
    record(t.send ? tr::EventKind::NetSendDone : tr::EventKind::NetRecvDone, t,
           duration > 0 ? uint64_t(duration) : 0);
  }

  void on_failed(const ConnectionInfo& c, bool peer_lost, int result, std::string_view what) noexcept override {
    fault(peer_lost ? tr::EventKind::NetPeerLost : tr::EventKind::NetError, c, result, writer_.intern(what));
  }

  void on_closed(const ConnectionInfo& c) noexcept override { fault(tr::EventKind::NetClose, c, 0, 0); }

 private:
  void record(tr::EventKind kind, const TransferInfo& t, uint64_t duration_ns) noexcept {
    tr::Transfer transfer;
    transfer.request_id = message_request_id(*t.connection, t.sequence);
    transfer.conn_id = t.connection->connection_id;
    transfer.seq = t.sequence;
    transfer.bytes = t.bytes;
    transfer.duration_ns = duration_ns;
    transfer.tag = t.tag;
    tr::Event event;
    event.kind = kind;
    event.comm_hash = t.connection->comm_id;
    event.payload = transfer;
    writer_.record(event);
  }

  void fault(tr::EventKind kind, const ConnectionInfo& c, int code, tr::StringId message) noexcept {
    tr::Event event;
    event.kind = kind;
    event.comm_hash = c.comm_id;
    event.payload = tr::NetFault{c.connection_id, 0, code, message};
    writer_.record(event);
  }

  tr::Writer& writer_;
};

astralProfilerNetDescr_v1_t describe(const TransferInfo& t) {
  astralProfilerNetDescr_v1_t d{};
  d.connection_id = t.connection->connection_id;
  d.request_id = t.sequence_known ? message_request_id(*t.connection, t.sequence) : 0;
  d.bytes = t.bytes;
  d.sequence = t.sequence;
  d.is_send = t.send ? 1 : 0;
  return d;
}

}  // namespace

trace::Writer* process_trace_writer() noexcept {
  tr::set_warn_function(&warn_through_nccl);
  return tr::process_writer();
}

std::shared_ptr<NetObserver> make_trace_observer(uint64_t) {
  tr::Writer* writer = process_trace_writer();
  if (!writer || !writer->wants(tr::EventKind::NetSendDone)) return nullptr;
  return std::make_shared<TraceNetObserver>(*writer);
}

void profiler_transfer_started(ncclProfilerCallback_t callback, const TransferInfo& t,
                               void** event) noexcept {
  *event = nullptr;  // NCCL leaves it untouched when its profiler does not want net events
  // Never without a phandle: NCCL dereferences it (and it is valid only from its proxy).
  if (!callback || !t.profiler_handle) return;
  astralProfilerNetDescr_v1_t d = describe(t);
  if (callback(event, ncclProfilerNetEventStart, t.profiler_handle, ASTRAL_PROFILER_NET_ID, &d) != ncclSuccess) {
    *event = nullptr;
  }
}

void profiler_transfer_finished(ncclProfilerCallback_t callback, const TransferInfo& t,
                                void** event) noexcept {
  if (!callback || !*event) return;
  astralProfilerNetDescr_v1_t d = describe(t);
  callback(event, ncclProfilerNetEventUpdateAndStop, t.profiler_handle, ASTRAL_PROFILER_NET_ID, &d);
  *event = nullptr;
}

}  // namespace astral::plugin
