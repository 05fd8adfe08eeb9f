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

std::string peer_gids(const QpMeta& peer) {
  std::string gids;
  for (int m = 0; m < peer.members && m < kMaxMembers; ++m) {
    gids += (m ? "," : "") + format_gid(peer.member[m].gid);
  }
  return gids;
}

Queues::Queues(const IbDevice& device) : device_(device) {}

Queues::~Queues() {
  const Verbs& v = hca().verbs();
  for (ibv_qp* qp : qps_) v.destroy_qp(qp);
  for (ibv_qp* qp : flush_qps_) v.destroy_qp(qp);
  for (ibv_cq* cq : cqs_) v.destroy_cq(cq);
}

bool Queues::create(int qps, std::string* why) {
  const Verbs& v = hca().verbs();
  for (int m = 0; m < member_count(); ++m) {
    int member_qps = (qps - m + member_count() - 1) / member_count();
    // Room for the flush QP's completions too, should this end get one.
    int cqe = std::max(member_qps, 1) * (kSendQueueDepth + kRecvQueueDepth) + kFlushQueueDepth;
    ibv_cq* cq = v.create_cq(hca(m).context(), cqe, &fatal_, nullptr, 0);
    if (!cq) {
      return *why = fmt::format("ibv_create_cq({}) on {}: {}", cqe, port(m).name,
                                std::strerror(errno)), false;
    }
    cqs_.push_back(cq);
  }
  for (int q = 0; q < qps; ++q) {
    ibv_qp* qp = create_qp(member_of(q), kSendQueueDepth, kRecvQueueDepth, why);
    if (!qp) return false;
    qps_.push_back(qp);
  }
  return true;
}

ibv_qp* Queues::create_qp(int member, int send_depth, int recv_depth, std::string* why) {
  const Verbs& v = hca(member).verbs();
  ibv_qp_init_attr init{};
  init.qp_context = &fatal_;
  init.send_cq = cqs_[size_t(member)];
  init.recv_cq = cqs_[size_t(member)];
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = uint32_t(send_depth);
  init.cap.max_recv_wr = uint32_t(recv_depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = sizeof(SizeRecord);
  ibv_qp* qp = v.create_qp(hca(member).pd(), &init);
  if (!qp) {
    *why = fmt::format("ibv_create_qp on {}: {}", port(member).name, std::strerror(errno));
    return nullptr;
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = uint8_t(port(member).port);
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int err = v.modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err) {
    *why = fmt::format("QP {:#x} to INIT: {}", qp->qp_num, std::strerror(err));
    v.destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

bool Queues::bring_up(int member, ibv_qp* qp, uint32_t dest_qpn, const ibv_ah_attr& ah,
                      ibv_mtu mtu, const IbConfig& config, std::string* why) {
  const Verbs& v = hca(member).verbs();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = mtu;
  attr.dest_qp_num = dest_qpn;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr = ah;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int err = v.modify_qp(qp, &attr, mask)) {
    return *why = fmt::format("QP {:#x} on {} to RTR (peer QP {:#x}{}): {}", qp->qp_num,
                              port(member).name, dest_qpn,
                              err == ETIMEDOUT ? ", not reachable: cross-rail?" : "",
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
  if (int err = v.modify_qp(qp, &attr, mask)) {
    return *why = fmt::format("QP {:#x} to RTS: {}", qp->qp_num, std::strerror(err)), false;
  }
  return true;
}

bool Queues::connect(const QpMeta& peer, const ConnectionPlan& plan, const IbConfig& config,
                     std::string* why) {
  if (peer.qps != qps_.size()) {
    return *why = fmt::format("the peer has {} QPs, this end {}", peer.qps, qps_.size()), false;
  }
  for (size_t q = 0; q < qps_.size(); ++q) {
    int m = member_of(int(q));
    const IbPort& local = port(m);
    const MemberAddress& remote = peer.member[q % peer.members];
    ibv_ah_attr ah{};
    ah.port_num = uint8_t(local.port);
    ah.sl = plan.sl;
    if (local.ethernet) {
      ah.is_global = 1;
      std::memcpy(ah.grh.dgid.raw, remote.gid, 16);
      ah.grh.sgid_index = uint8_t(local.gid_index);
      ah.grh.hop_limit = 255;
      ah.grh.flow_label = plan.flow_label[q];
      ah.grh.traffic_class = plan.tc;
    } else {
      // IB: the plan's path index selects one of the destination's 2^LMC LIDs.
      uint16_t offset = plan.path_bits[q] & uint16_t((1u << remote.lmc) - 1);
      ah.dlid = uint16_t(remote.lid + offset);
    }
    ibv_mtu mtu = std::min(local.mtu, static_cast<ibv_mtu>(remote.mtu));
    if (!bring_up(m, qps_[q], peer.qpn[q], ah, mtu, config, why)) return false;
  }
  return true;
}

bool Queues::create_flush_qps(const IbConfig& config, std::string* why) {
  for (int m = 0; m < member_count(); ++m) {
    ibv_qp* qp = create_qp(m, kFlushQueueDepth, 1, why);
    if (!qp) return false;
    flush_qps_.push_back(qp);
    // The QP's own address: its READs never leave the HCA (NCCL's gpuFlush QP is the same).
    const IbPort& p = port(m);
    ibv_ah_attr ah{};
    ah.port_num = uint8_t(p.port);
    if (p.ethernet) {
      ah.is_global = 1;
      ah.grh.dgid = p.gid;
      ah.grh.sgid_index = uint8_t(p.gid_index);
      ah.grh.hop_limit = 255;
    } else {
      ah.dlid = p.lid;
    }
    if (!bring_up(m, qp, qp->qp_num, ah, p.mtu, config, why)) {
      *why = "the GPUDirect flush QP: " + *why;
      return false;
    }
  }
  return true;
}

void Queues::describe(QpMeta* meta, const std::string& host) const {
  meta->magic = kMetaMagic;
  meta->version = kMetaVersion;
  meta->qps = uint16_t(qps_.size());
  for (size_t q = 0; q < qps_.size(); ++q) meta->qpn[q] = qps_[q]->qp_num;
  meta->members = uint8_t(member_count());
  meta->ethernet = port().ethernet;
  for (int m = 0; m < member_count(); ++m) {
    const IbPort& p = port(m);
    MemberAddress& a = meta->member[m];
    std::memcpy(a.gid, p.gid.raw, 16);
    a.lid = p.lid;
    a.lmc = p.lmc;
    a.port = uint8_t(p.port);
    a.mtu = uint8_t(p.mtu);
    a.gid_index = uint8_t(p.gid_index);
    a.rail = int16_t(p.rail);
    a.plane = int16_t(p.plane);
  }
  std::snprintf(meta->host, sizeof meta->host, "%s", host.c_str());
}

int Queues::qp_index(int member, uint32_t qpn) const {
  for (size_t q = size_t(member); q < qps_.size(); q += size_t(member_count())) {
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
      device_name_(queues_->identity().name),
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
  info_.local_rail = queues_->identity().rail;
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

ncclResult_t Connection::fail_completion(const ibv_wc& wc, int member) {
  if (failure_ != ncclSuccess) return failure_;
  const Verbs& v = queues_->hca().verbs();
  const IbPort& port = queues_->port(member);
  ASTRAL_WARN("NET/IB : Got completion from peer {} with status={} opcode={} len={} vendor err {} "
              "({}) localGid {} remoteGids {} hca {} port {} qp {:#x}: {}",
              remote_address_, int(wc.status), int(wc.opcode), wc.byte_len, wc.vendor_err,
              info_.sender ? "Send" : "Recv", format_gid(port.gid.raw), remote_gid_,
              port.hca->name(), port.port, wc.qp_num, v.status_name(wc.status));
  bool peer = wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR;
  return fail(ncclRemoteError, peer,
              fmt::format("completion error {} ({})", v.status_name(wc.status), int(wc.status)));
}

ncclResult_t Connection::check_health() {
  if (failure_ != ncclSuccess) return failure_;
  if (int event = queues_->fatal().event.load(std::memory_order_relaxed); event >= 0) {
    const char* name = queues_->hca().verbs().event_name(ibv_event_type(event));
    return fail(ncclSystemError, false, fmt::format("async event {}", name));
  }
  // A fused device fails as a whole when one member does: its QPs carry every message's parts.
  for (int m = 0; m < queues_->member_count(); ++m) {
    const IbPort& port = queues_->port(m);
    if (port.hca->fatal() || port.hca->port_down(port.port)) {
      std::string reason = port.hca->fatal_reason();
      return fail(ncclSystemError, false,
                  reason.empty() ? fmt::format("port {} went down", port.name) : reason);
    }
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
