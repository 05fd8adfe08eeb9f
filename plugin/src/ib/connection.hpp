#pragma once
// What both ends of an ib connection own: the completion queues and RC QPs on its device's ports,
// the out-of-band socket kept open as a liveness channel (RC tells a receiver that is only
// waiting nothing when its peer dies), the failure state and what observers and logs are told.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/nccl_common.h"
#include "astral/plugin/observer.hpp"
#include "core/context.hpp"
#include "ib/hca.hpp"
#include "ib/vnic.hpp"
#include "ib/wire.hpp"
#include "oob/socket.hpp"

namespace astral::plugin::ib {

// The path of one direction of a connection, as this end programs its QPs: decided by the
// connecting side (planning.cpp) for both directions, so that both ends agree.
struct ConnectionPlan {
  int qps = 1;
  bool split = false;
  uint8_t sl = 0;
  uint8_t tc = 0;
  std::array<uint32_t, kMaxQps> flow_label{};
  std::array<uint8_t, kMaxQps> path_bits{};  // IB path index: DLID = peer's base LID + this
  std::string text;  // the plan as logged at INFO
  trace::NetPath trace_path;  // the plan as the trace's connection record keeps it
};

// Limits of one connection's queues: every request NCCL may have in flight, each of up to two
// work requests per QP plus CTS writes, and the RECVs prepost for WRITE_WITH_IMM.
inline constexpr int kSendQueueDepth = kFifoDepth * 8 * 2 + kFifoDepth;
inline constexpr int kRecvQueueDepth = kFifoDepth * 8;
// Flushes in flight on one receive end: at most one per posted receive.
inline constexpr int kFlushQueueDepth = kFifoDepth;

// The CQs and QPs of one connection end, created INIT; destroyed in order. Each member port of
// the end's device has its own CQ (members may be different HCAs); QP q is on member q % members.
class Queues {
 public:
  explicit Queues(const IbDevice& device);
  ~Queues();
  Queues(const Queues&) = delete;
  Queues& operator=(const Queues&) = delete;

  // Creates a CQ per member and `qps` QPs in INIT, spread over the members; false with `why`.
  bool create(int qps, std::string* why);
  // INIT -> RTR -> RTS toward the peer described by `peer`, with the agreed plan: QP q goes from
  // this end's member q % members to the peer's member q % peer.members.
  bool connect(const QpMeta& peer, const ConnectionPlan& plan, const IbConfig& config,
               std::string* why);
  // Fills the local part of the metadata (qpns, each member's addressing, host name).
  void describe(QpMeta* meta, const std::string& host) const;
  // A loopback QP per member (connected to itself) whose RDMA READ flushes the GPUDirect writes
  // that member's NIC made (each NIC has its own PCIe path to the GPU); false with `why`. Only
  // receive ends that may get GPU memory have them.
  bool create_flush_qps(const IbConfig& config, std::string* why);
  // Null without flush QPs.
  ibv_qp* flush_qp(int member) const {
    return flush_qps_.empty() ? nullptr : flush_qps_[size_t(member)];
  }

  const IbDevice& device() const { return device_; }
  const NicPort& identity() const { return device_.identity; }
  int member_count() const { return static_cast<int>(device_.members.size()); }
  const IbPort& port(int member = 0) const { return device_.members[size_t(member)]; }
  Hca& hca(int member = 0) const { return *device_.members[size_t(member)].hca; }
  ibv_cq* cq(int member) const { return cqs_[size_t(member)]; }
  int member_of(int q) const { return q % member_count(); }
  int qp_count() const { return static_cast<int>(qps_.size()); }
  ibv_qp* qp(int q) const { return qps_[static_cast<size_t>(q)]; }
  // The QP with number `qpn` on `member` (QP numbers are unique per HCA only), -1 if none.
  int qp_index(int member, uint32_t qpn) const;
  FatalFlag& fatal() { return fatal_; }
  const FatalFlag& fatal() const { return fatal_; }

 private:
  // A new RC QP on `member`'s CQ, in INIT; null with `why`.
  ibv_qp* create_qp(int member, int send_depth, int recv_depth, std::string* why);
  // INIT -> RTR -> RTS toward `dest_qpn` at `ah`.
  bool bring_up(int member, ibv_qp* qp, uint32_t dest_qpn, const ibv_ah_attr& ah, ibv_mtu mtu,
                const IbConfig& config, std::string* why);

  IbDevice device_;
  FatalFlag fatal_;
  std::vector<ibv_cq*> cqs_;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_qp*> flush_qps_;
};

// The endpoint's resources plus its failure state and trace identity.
class Connection {
 public:
  Connection(std::shared_ptr<NetContext> ctx, std::unique_ptr<Queues> queues, oob::Fd socket,
             bool sender, int device, uint64_t connection_id, int remote_rail,
             const std::string& remote_gid, const ConnectionPlan& plan, int timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::mutex& mutex() { return mutex_; }
  Queues& queues() { return *queues_; }
  const ConnectionInfo& info() const { return info_; }
  NetObserver* observer() const { return ctx_->observer.get(); }
  net::NetAttr hints() const { return ctx_->attr(); }
  ncclProfilerCallback_t profiler() const { return ctx_->profiler; }
  const ConnectionPlan& plan() const { return plan_; }

  ncclResult_t failure() const { return failure_; }
  // First call only: one WARN, observer told. Returns `result`.
  ncclResult_t fail(ncclResult_t result, bool peer_lost, const std::string& what);
  // A completion with an error status on `member`'s CQ, as NCCL words it (the monitor parses
  // this shape).
  ncclResult_t fail_completion(const ibv_wc& wc, int member);
  // Drains every member's CQ, calling on(wc, member) -> ncclResult_t for each successful
  // completion; an error status fails the connection (fail_completion), as does a failed poll.
  template <typename OnCompletion>
  ncclResult_t drain_completions(OnCompletion&& on) {
    ibv_wc wcs[16];
    for (int m = 0; m < queues_->member_count(); ++m) {
      for (int n = 16; n == 16;) {
        n = ibv_poll_cq(queues_->cq(m), 16, wcs);
        if (n < 0) return fail(ncclSystemError, false, "ibv_poll_cq failed");
        for (int i = 0; i < n; ++i) {
          if (wcs[i].status != IBV_WC_SUCCESS) return fail_completion(wcs[i], m);
          if (ncclResult_t res = on(wcs[i], m); res != ncclSuccess) return res;
        }
      }
    }
    return ncclSuccess;
  }
  // Async events of this connection's QPs, CQ, port and device; an error fails the connection.
  ncclResult_t check_health();
  // Whether the peer closed the out-of-band socket (it died or closed its comm); checked at most
  // every 10 ms. The caller drains its CQ once more before failing: completions that arrived
  // before the close must still count.
  bool peer_closed(std::string* why);

 private:
  std::mutex mutex_;
  std::shared_ptr<NetContext> ctx_;
  std::unique_ptr<Queues> queues_;
  oob::Fd socket_;
  ConnectionPlan plan_;
  std::string device_name_, local_address_, remote_address_, remote_gid_, path_text_;
  ConnectionInfo info_;
  int64_t next_liveness_check_ns_ = 0;
  ncclResult_t failure_ = ncclSuccess;
};

std::string format_gid(const uint8_t raw[16]);
// The GIDs of a peer's members, comma-separated (NCCL's "remoteGids").
std::string peer_gids(const QpMeta& peer);

}  // namespace astral::plugin::ib
