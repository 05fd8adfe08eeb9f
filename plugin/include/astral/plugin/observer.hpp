#pragma once
// Where transport events leave the plugin: connections established and closed, sends and receives
// posted and completed (bytes, tag, timestamps), failures and lost peers. The trace writer
// (trace/) installs a factory; without one every hook is a no-op and costs one branch.
//
// Hooks run on NCCL's threads (service thread for connections, progress thread for transfers) with
// the connection's lock held: keep them short, never block, never throw, never call back into the
// plugin. Strings and pointers are valid only during the call.
#include <cstdint>
#include <memory>
#include <string_view>

#include "astral/trace/path.hpp"

namespace astral::plugin {

struct ConnectionInfo {
  uint64_t comm_id = 0;        // NCCL's commHash from net init (0 with net v10 and older)
  uint64_t connection_id = 0;  // random, identical at both ends of the connection
  bool sender = false;         // true on the isend side
  int device = -1;             // local device index
  std::string_view device_name;
  int local_rail = -1;         // -1 when no RDMA NIC backs the device
  int remote_rail = -1;
  std::string_view local_address;   // "ip:port" of stream 0
  std::string_view remote_address;
  int streams = 1;             // TCP streams in this connection
  // setNetAttr hints of the communicator when the connection was set up (-1 = NCCL set none):
  // flows per peer in this connection's direction.
  int hint_max_flows = -1;
  // The fabric path this end's QPs were programmed with (the ib transport's plan: plane, SL,
  // TC, GID, per QP flow label / UDP source port / DLID); null for tcp.
  const trace::NetPath* path = nullptr;
};

struct TransferInfo {
  const ConnectionInfo* connection = nullptr;
  bool send = false;
  int tag = 0;                 // NCCL passes the sender's rank
  int slot = 0;                // index within a grouped receive
  uint64_t bytes = 0;          // posted size; on completion of a receive, the size received
  uint32_t sequence = 0;       // per connection; the same number at both ends
  int64_t posted_ns = 0;       // CLOCK_MONOTONIC
  int64_t completed_ns = 0;    // 0 until completion
  void* profiler_handle = nullptr;  // NCCL's phandle (net v10+), for profiler net events
  // Whether `sequence` is already right. Always for sends; for a receive posted alone it is
  // predicted at posting (receives match messages in posting order); the slots of a grouped
  // receive learn theirs only when a message is matched, by tag.
  bool sequence_known = false;
  // The communicator's setNetAttr `op` bits when the request was posted (0xFFFFFFFF = unset).
  uint32_t op_hint = 0xFFFFFFFF;
};

class NetObserver {
 public:
  virtual ~NetObserver() = default;
  virtual void on_connected(const ConnectionInfo&) noexcept {}
  virtual void on_posted(const TransferInfo&) noexcept {}
  virtual void on_completed(const TransferInfo&) noexcept {}
  // `peer_lost`: the peer died, reset the connection or fell silent past the timeout;
  // `result`: the ncclResult_t every later call on the connection returns.
  virtual void on_failed(const ConnectionInfo&, bool /*peer_lost*/, int /*result*/,
                         std::string_view /*what*/) noexcept {}
  virtual void on_closed(const ConnectionInfo&) noexcept {}
};

// Called once per net context (per communicator with net v11) to create its observer; may return
// nullptr. Install before NCCL initialises the plugin; pass nullptr to remove.
using NetObserverFactory = std::shared_ptr<NetObserver> (*)(uint64_t comm_id);
void set_net_observer_factory(NetObserverFactory factory);

}  // namespace astral::plugin
