// QP setup (the RC state machine, as NCCL programs it) and one connection end's failure state.
#include "ib/connection.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"

namespace astral::plugin::ib {
namespace {

// "10.0.0.2<4242>", NCCL's way of naming a peer in IB WARNs.
std::string nccl_address(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    port = ntohs(in6.sin6_port);
  }
  return fmt::format("{}<{}>", text, port);
}

}  // namespace

std::string format_gid(const uint8_t raw[16]) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, raw, text, sizeof text);
  return text;
}

Queues::Queues(std::shared_ptr<Hca> hca, const IbPort& port) : hca_(std::move(hca)), port_(port) {}

Queues::~Queues() {
  const Verbs& v = hca_->verbs();
  for (ibv_qp* qp : qps_) v.destroy_qp(qp);
  if (cq_) v.destroy_cq(cq_);
}

bool Queues::create(int qps, std::string* why) {
  const Verbs& v = hca_->verbs();
  int cqe = qps * (kSendQueueDepth + kRecvQueueDepth);
  cq_ = v.create_cq(hca_->context(), cqe, &fatal_, nullptr, 0);
  if (!cq_) return *why = fmt::format("ibv_create_cq({}): {}", cqe, std::strerror(errno)), false;
  for (int q = 0; q < qps; ++q) {
    ibv_qp_init_attr init{};
    init.qp_context = &fatal_;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kSendQueueDepth;
    init.cap.max_recv_wr = kRecvQueueDepth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = sizeof(SizeRecord);
    ibv_qp* qp = v.create_qp(hca_->pd(), &init);
    if (!qp) return *why = fmt::format("ibv_create_qp: {}", std::strerror(errno)), false;
    qps_.push_back(qp);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = uint8_t(port_.port);
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    int err = v.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err) return *why = fmt::format("QP {:#x} to INIT: {}", qp->qp_num, std::strerror(err)), false;
  }
  return true;
}

bool Queues::connect(const QpMeta& peer, const ConnectionPlan& plan, const IbConfig& config,
                     std::string* why) {
  const Verbs& v = hca_->verbs();
  if (peer.qps != qps_.size()) {
    return *why = fmt::format("the peer has {} QPs, this end {}", peer.qps, qps_.size()), false;
  }
  for (size_t q = 0; q < qps_.size(); ++q) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = std::min(port_.mtu, static_cast<ibv_mtu>(peer.mtu));
    attr.dest_qp_num = peer.qpn[q];
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = uint8_t(port_.port);
    attr.ah_attr.sl = plan.sl;
    if (port_.ethernet) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, 16);
      attr.ah_attr.grh.sgid_index = uint8_t(port_.gid_index);
      attr.ah_attr.grh.hop_limit = 255;
      attr.ah_attr.grh.flow_label = plan.flow_label[q];
      attr.ah_attr.grh.traffic_class = plan.tc;
    } else {
      // IB: the plan's path index selects one of the destination's 2^LMC LIDs.
      uint16_t offset = plan.path_bits[q] & uint16_t((1u << peer.lmc) - 1);
      attr.ah_attr.dlid = uint16_t(peer.lid + offset);
    }
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (int err = v.modify_qp(qps_[q], &attr, mask)) {
      return *why = fmt::format("QP {:#x} to RTR (peer QP {:#x}{}): {}", qps_[q]->qp_num,
                                peer.qpn[q], err == ETIMEDOUT ? ", not reachable: cross-rail?" : "",
                                std::strerror(err)), false;
    }
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = uint8_t(config.timeout);
    attr.retry_cnt = uint8_t(config.retry_count);
    attr.rnr_retry = 7;
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
    if (int err = v.modify_qp(qps_[q], &attr, mask)) {
      return *why = fmt::format("QP {:#x} to RTS: {}", qps_[q]->qp_num, std::strerror(err)), false;
    }
  }
  return true;
}

void Queues::describe(QpMeta* meta, const std::string& host) const {
  meta->magic = kMetaMagic;
  meta->version = kMetaVersion;
  meta->qps = uint16_t(qps_.size());
  for (size_t q = 0; q < qps_.size(); ++q) meta->qpn[q] = qps_[q]->qp_num;
  std::memcpy(meta->gid, port_.gid.raw, 16);
  meta->lid = port_.lid;
  meta->lmc = port_.lmc;
  meta->port = uint8_t(port_.port);
  meta->mtu = uint8_t(port_.mtu);
  meta->ethernet = port_.ethernet;
  meta->gid_index = uint8_t(port_.gid_index);
  meta->rail = int16_t(port_.rail);
  meta->plane = int16_t(port_.plane);
  std::snprintf(meta->host, sizeof meta->host, "%s", host.c_str());
}

int Queues::qp_index(uint32_t qpn) const {
  for (size_t q = 0; q < qps_.size(); ++q) {
    if (qps_[q]->qp_num == qpn) return static_cast<int>(q);
  }
  return -1;
}

Connection::Connection(std::shared_ptr<NetContext> ctx, std::unique_ptr<Queues> queues,
                       oob::Fd socket, bool sender, int device, uint64_t connection_id,
                       int remote_rail, const std::string& remote_gid, const ConnectionPlan& plan,
                       int timeout_ms)
    : ctx_(std::move(ctx)),
      queues_(std::move(queues)),
      socket_(std::move(socket)),
      plan_(plan),
      device_name_(queues_->port().name),
      local_address_(nccl_address(oob::local_address(socket_.get()))),
      remote_address_(nccl_address(oob::peer_address(socket_.get()))),
      remote_gid_(remote_gid),
      path_text_(plan.text) {
  oob::configure_stream(socket_.get(), timeout_ms, -1);
  info_.comm_id = ctx_->comm_id;
  info_.connection_id = connection_id;
  info_.sender = sender;
  info_.device = device;
  info_.device_name = device_name_;
  info_.local_rail = queues_->port().rail;
  info_.remote_rail = remote_rail;
  info_.local_address = local_address_;
  info_.remote_address = remote_address_;
  info_.streams = queues_->qp_count();
  info_.path = &plan_.trace_path;
  const net::NetAttr hints = ctx_->attr();
  info_.hint_max_flows = sender ? hints.send_max_flows : hints.recv_max_flows;
  ASTRAL_INFO("NET/IB : {} connection {} {} {} on {}: {}", sender ? "send" : "receive",
              local_address_, sender ? "->" : "<-", remote_address_, device_name_, path_text_);
  if (auto* obs = observer()) obs->on_connected(info_);
}

Connection::~Connection() {
  if (auto* obs = observer()) obs->on_closed(info_);
}

ncclResult_t Connection::fail(ncclResult_t result, bool peer_lost, const std::string& what) {
  if (failure_ != ncclSuccess) return failure_;
  failure_ = result;
  ASTRAL_WARN("NET/IB : {} connection {} -> {} on {} ({} QP{}) failed: {}",
              info_.sender ? "send" : "receive", local_address_, remote_address_, device_name_,
              queues_->qp_count(), queues_->qp_count() == 1 ? "" : "s", what);
  if (auto* obs = observer()) obs->on_failed(info_, peer_lost, result, what);
  return failure_;
}

ncclResult_t Connection::fail_completion(const ibv_wc& wc) {
  if (failure_ != ncclSuccess) return failure_;
  const Verbs& v = queues_->hca().verbs();
  ASTRAL_WARN("NET/IB : Got completion from peer {} with status={} opcode={} len={} vendor err {} "
              "({}) localGid {} remoteGids {} hca {} port {} qp {:#x}: {}",
              remote_address_, int(wc.status), int(wc.opcode), wc.byte_len, wc.vendor_err,
              info_.sender ? "Send" : "Recv", format_gid(queues_->port().gid.raw), remote_gid_,
              queues_->hca().name(), queues_->port().port, wc.qp_num,
              v.status_name(wc.status));
  bool peer = wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR;
  return fail(ncclRemoteError, peer,
              fmt::format("completion error {} ({})", v.status_name(wc.status), int(wc.status)));
}

ncclResult_t Connection::check_health() {
  if (failure_ != ncclSuccess) return failure_;
  Hca& hca = queues_->hca();
  if (int event = queues_->fatal().event.load(std::memory_order_relaxed); event >= 0) {
    return fail(ncclSystemError, false,
                fmt::format("async event {}", hca.verbs().event_name(ibv_event_type(event))));
  }
  if (hca.fatal() || hca.port_down(queues_->port().port)) {
    std::string reason = hca.fatal_reason();
    return fail(ncclSystemError, false, reason.empty() ? "the port went down" : reason);
  }
  return ncclSuccess;
}

bool Connection::peer_closed(std::string* why) {
  // RC reports nothing to a receiver whose peer died: the out-of-band socket closes then.
  int64_t now = oob::monotonic_ns();
  if (now < next_liveness_check_ns_) return false;
  next_liveness_check_ns_ = now + 10'000'000;
  char byte;
  ssize_t n = ::recv(socket_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    *why = "the peer closed the connection (the out-of-band socket; process gone?)";
    return true;
  }
  if (n < 0 && !oob::would_block(errno)) {
    *why = fmt::format("out-of-band connection: {}", std::strerror(errno));
    return true;
  }
  return false;
}

}  // namespace astral::plugin::ib
