#include "ib/connect.hpp"

#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"

namespace astral::plugin::ib {
IbConnector::IbConnector(EndpointSetup setup, const oob::ListenHandle& handle,
                         const sockaddr_storage& oob_address)
    : setup_(std::move(setup)),
      handshake_(handle, oob_address, 1, oob::TransportKind::kIb, setup_.device.identity.rail,
                 setup_.timeout_ms),
      deadline_ns_(oob::monotonic_ns() + int64_t(setup_.timeout_ms) * 1000000) {}

ncclResult_t IbConnector::fail(const std::string& why) {
  ASTRAL_WARN("NET/IB : connecting from {} to {} failed: {}", setup_.device.identity.name,
              handshake_.remote(), why);
  fifo_.mrs.release();
  return ncclRemoteError;
}

bool IbConnector::start_queues(std::string* why) {
  queues_ = std::make_unique<Queues>(setup_.device);
  if (!queues_->create(setup_.plan.qps, why)) return false;
  if (!fifo_.create(*queues_, why)) return false;
  queues_->describe(&local_, setup_.plan.host);
  local_.addr = reinterpret_cast<uint64_t>(fifo_.area.get());
  for (int m = 0; m < queues_->member_count(); ++m) local_.member[m].rkey = fifo_.mrs.rkey(m);
  local_.split = setup_.plan.split;
  return true;
}

ncclResult_t IbConnector::poll(std::unique_ptr<SendComm>* send_comm) {
  std::string why;
  if (oob::monotonic_ns() > deadline_ns_) {
    return fail(fmt::format("no answer within {} ms (ASTRAL_TCP_TIMEOUT_MS)", setup_.timeout_ms));
  }
  if (stage_ == Stage::kHandshake) {
    int status = handshake_.poll(&established_, &why);
    if (status < 0) return fail(why);
    if (status == 0) return ncclSuccess;
    if (!start_queues(&why)) return fail(why);
    stage_ = Stage::kSendMeta;
  }
  int fd = established_.sockets[0].get();
  if (stage_ == Stage::kSendMeta) {
    int status = oob::send_some(fd, &local_, sizeof local_, &moved_, &why);
    if (status < 0) return fail(why);
    if (status == 0) return ncclSuccess;
    stage_ = Stage::kRecvMeta;
    moved_ = 0;
  }
  if (stage_ == Stage::kRecvMeta) {
    int status = oob::recv_some(fd, &peer_, sizeof peer_, &moved_, &why);
    if (status < 0) return fail(why);
    if (status == 0) return ncclSuccess;
    if (!check_meta(peer_, setup_.device.ethernet(), &why)) {
      return fail("peer's QP metadata: " + why);
    }
    if (peer_.qps != local_.qps) return fail(fmt::format("peer has {} QPs", peer_.qps));
    PlanInputs inputs = setup_.plan;
    inputs.connection_id = established_.connection_id;
    if (!plan_connection(inputs, setup_.device, peer_, &plan_, &theirs_, &why)) return fail(why);
    if (!queues_->connect(peer_, plan_, setup_.config, &why)) return fail(why);
    stage_ = Stage::kSendPlan;
    moved_ = 0;
  }
  int status = oob::send_some(fd, &theirs_, sizeof theirs_, &moved_, &why);
  if (status < 0) return fail(why);
  if (status == 0) return ncclSuccess;
  auto conn = std::make_unique<Connection>(setup_.ctx, std::move(queues_),
                                           std::move(established_.sockets[0]), true,
                                           setup_.device_index, established_.connection_id,
                                           established_.remote_rail, peer_gids(peer_), plan_,
                                           setup_.timeout_ms);
  *send_comm = std::make_unique<IbSendComm>(std::move(conn), std::move(fifo_), peer_);
  return ncclSuccess;
}

struct IbListenComm::Pending {
  oob::Established established;
  enum class Stage { kRecvMeta, kSendMeta, kRecvPlan } stage = Stage::kRecvMeta;
  QpMeta peer{}, local{};
  PlanMessage plan_message{};
  size_t moved = 0;
  int64_t deadline_ns = 0;
  ConnectionPlan plan;
  std::unique_ptr<Queues> queues;
  RegisteredArea<CtsArea> cts;
  RegisteredArea<RecordArea> records;
  RegisteredArea<FlushSink> flush_sink;
};

IbListenComm::IbListenComm(EndpointSetup setup, oob::Fd fd, const oob::Secret& secret)
    : setup_(std::move(setup)),
      handshake_(std::move(fd), secret, oob::TransportKind::kIb, setup_.device.identity.name,
                 setup_.device.identity.rail, setup_.timeout_ms) {}

IbListenComm::~IbListenComm() = default;

bool IbListenComm::start_queues(Pending& p, std::string* why) {
  p.queues = std::make_unique<Queues>(setup_.device);
  if (!p.queues->create(p.peer.qps, why)) return false;
  if (!p.cts.create(*p.queues, why) || !p.records.create(*p.queues, why)) return false;
  // GPU memory may arrive here: received data then needs iflush's loopback READs.
  bool gpu_memory = setup_.device.gdr || setup_.device.dmabuf;
  if (gpu_memory && !setup_.config.flush_disable) {
    if (!p.queues->create_flush_qps(setup_.config, why)) return false;
    if (!p.flush_sink.create(*p.queues, why)) return false;
  }
  p.queues->describe(&p.local, setup_.plan.host);
  p.local.addr = reinterpret_cast<uint64_t>(p.records.area.get());
  for (int m = 0; m < p.queues->member_count(); ++m) p.local.member[m].rkey = p.records.mrs.rkey(m);
  p.local.split = p.peer.split;
  return true;
}

bool IbListenComm::step(Pending& p, std::unique_ptr<RecvComm>* recv_comm) {
  std::string why;
  int fd = p.established.sockets[0].get();
  auto drop = [&](const std::string& what) {
    ASTRAL_WARN("NET/IB : dropped connection from {} on {}: {}", p.established.peer,
                setup_.device.identity.name, what);
    return true;
  };
  if (oob::monotonic_ns() > p.deadline_ns) return drop("no QP metadata in time");
  if (p.stage == Pending::Stage::kRecvMeta) {
    int status = oob::recv_some(fd, &p.peer, sizeof p.peer, &p.moved, &why);
    if (status < 0) return drop(why);
    if (status == 0) return false;
    if (!check_meta(p.peer, setup_.device.ethernet(), &why)) return drop("QP metadata: " + why);
    if (!start_queues(p, &why)) return drop(why);
    p.stage = Pending::Stage::kSendMeta;
    p.moved = 0;
  }
  if (p.stage == Pending::Stage::kSendMeta) {
    int status = oob::send_some(fd, &p.local, sizeof p.local, &p.moved, &why);
    if (status < 0) return drop(why);
    if (status == 0) return false;
    p.stage = Pending::Stage::kRecvPlan;
    p.moved = 0;
  }
  int status = oob::recv_some(fd, &p.plan_message, sizeof p.plan_message, &p.moved, &why);
  if (status < 0) return drop(why);
  if (status == 0) return false;
  if (!check_plan(p.plan_message, p.peer.qps, &why)) return drop("path plan: " + why);
  p.plan = plan_from_message(p.plan_message, p.peer.split != 0, setup_.device, p.peer);
  if (!p.queues->connect(p.peer, p.plan, setup_.config, &why)) return drop(why);
  auto conn = std::make_unique<Connection>(setup_.ctx, std::move(p.queues),
                                           std::move(p.established.sockets[0]), false,
                                           setup_.device_index, p.established.connection_id,
                                           p.established.remote_rail, peer_gids(p.peer), p.plan,
                                           setup_.timeout_ms);
  auto comm = std::make_unique<IbRecvComm>(std::move(conn), std::move(p.cts), std::move(p.records),
                                           p.peer);
  if (p.flush_sink) comm->enable_flush(std::move(p.flush_sink));
  if (!comm->prepost(&why)) return drop(why);
  *recv_comm = std::move(comm);
  return true;
}

ncclResult_t IbListenComm::accept(std::unique_ptr<RecvComm>* recv_comm) {
  oob::Established established;
  while (handshake_.poll(&established)) {
    auto p = std::make_unique<Pending>();
    p->established = std::move(established);
    p->deadline_ns = oob::monotonic_ns() + int64_t(setup_.timeout_ms) * 1000000;
    pending_.push_back(std::move(p));
    established = oob::Established{};
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (!step(*pending_[i], recv_comm)) continue;
    pending_.erase(pending_.begin() + static_cast<long>(i));
    if (*recv_comm) return ncclSuccess;
    --i;
  }
  return ncclSuccess;
}

}  // namespace astral::plugin::ib
