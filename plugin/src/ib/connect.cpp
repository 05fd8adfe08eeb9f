#include "ib/connect.hpp"

#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"

namespace astral::plugin::ib {
namespace {

// A remotely writable area registered on `hca`; null with `why`.
template <typename Area>
std::unique_ptr<Area> make_area(Hca& hca, MrEntry** mr, std::string* why) {
  auto area = std::make_unique<Area>();
  *mr = hca.acquire(area.get(), sizeof(Area), why);
  if (!*mr) area.reset();
  return area;
}

}  // namespace

IbConnector::IbConnector(EndpointSetup setup, const oob::ListenHandle& handle,
                         const sockaddr_storage& oob_address)
    : setup_(std::move(setup)),
      handshake_(handle, oob_address, 1, oob::TransportKind::kIb, setup_.port.rail,
                 setup_.timeout_ms),
      deadline_ns_(oob::monotonic_ns() + int64_t(setup_.timeout_ms) * 1000000) {}

ncclResult_t IbConnector::fail(const std::string& why) {
  ASTRAL_WARN("NET/IB : connecting from {} to {} failed: {}", setup_.port.name, handshake_.remote(), why);
  if (fifo_mr_) setup_.port.hca->release(fifo_mr_), fifo_mr_ = nullptr;
  return ncclRemoteError;
}

bool IbConnector::start_queues(std::string* why) {
  queues_ = std::make_unique<Queues>(setup_.port.hca, setup_.port);
  if (!queues_->create(setup_.plan.qps, why)) return false;
  fifo_ = make_area<CtsArea>(*setup_.port.hca, &fifo_mr_, why);
  if (!fifo_) return false;
  queues_->describe(&local_, setup_.plan.host);
  local_.addr = reinterpret_cast<uint64_t>(fifo_.get());
  local_.rkey = fifo_mr_->mr->rkey;
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
    if (!check_meta(peer_, setup_.port.ethernet, &why)) return fail("peer's QP metadata: " + why);
    if (peer_.qps != local_.qps) return fail(fmt::format("peer has {} QPs", peer_.qps));
    PlanInputs inputs = setup_.plan;
    inputs.connection_id = established_.connection_id;
    if (!plan_connection(inputs, setup_.port, peer_, &plan_, &theirs_, &why)) return fail(why);
    if (!queues_->connect(peer_, plan_, setup_.config, &why)) return fail(why);
    stage_ = Stage::kSendPlan;
    moved_ = 0;
  }
  int status = oob::send_some(fd, &theirs_, sizeof theirs_, &moved_, &why);
  if (status < 0) return fail(why);
  if (status == 0) return ncclSuccess;
  auto conn = std::make_unique<Connection>(setup_.ctx, std::move(queues_),
                                           std::move(established_.sockets[0]), true, setup_.device,
                                           established_.connection_id, established_.remote_rail,
                                           format_gid(peer_.gid), plan_, setup_.timeout_ms);
  *send_comm = std::make_unique<IbSendComm>(std::move(conn), std::move(fifo_), fifo_mr_, peer_);
  fifo_mr_ = nullptr;
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
  std::unique_ptr<CtsArea> cts;
  std::unique_ptr<RecordArea> records;
  std::unique_ptr<FlushSink> flush_sink;
  MrEntry* cts_mr = nullptr;
  MrEntry* records_mr = nullptr;
  MrEntry* flush_sink_mr = nullptr;
  std::shared_ptr<Hca> hca;
  ~Pending() {
    for (MrEntry* mr : {cts_mr, records_mr, flush_sink_mr}) {
      if (mr) hca->release(mr);
    }
  }
};

IbListenComm::IbListenComm(EndpointSetup setup, oob::Fd fd, const oob::Secret& secret)
    : setup_(std::move(setup)),
      handshake_(std::move(fd), secret, oob::TransportKind::kIb, setup_.port.name,
                 setup_.port.rail, setup_.timeout_ms) {}

IbListenComm::~IbListenComm() = default;

bool IbListenComm::start_queues(Pending& p, std::string* why) {
  p.hca = setup_.port.hca;
  p.queues = std::make_unique<Queues>(setup_.port.hca, setup_.port);
  if (!p.queues->create(p.peer.qps, why)) return false;
  p.cts = make_area<CtsArea>(*p.hca, &p.cts_mr, why);
  if (!p.cts) return false;
  p.records = make_area<RecordArea>(*p.hca, &p.records_mr, why);
  if (!p.records) return false;
  // GPU memory may arrive here: received data then needs iflush's loopback READ.
  bool gpu_memory = setup_.port.gdr || setup_.port.dmabuf;
  if (gpu_memory && !setup_.config.flush_disable) {
    if (!p.queues->create_flush_qp(setup_.config, why)) return false;
    p.flush_sink = make_area<FlushSink>(*p.hca, &p.flush_sink_mr, why);
    if (!p.flush_sink) return false;
  }
  p.queues->describe(&p.local, setup_.plan.host);
  p.local.addr = reinterpret_cast<uint64_t>(p.records.get());
  p.local.rkey = p.records_mr->mr->rkey;
  p.local.split = p.peer.split;
  return true;
}

bool IbListenComm::step(Pending& p, std::unique_ptr<RecvComm>* recv_comm) {
  std::string why;
  int fd = p.established.sockets[0].get();
  auto drop = [&](const std::string& what) {
    ASTRAL_WARN("NET/IB : dropped connection from {} on {}: {}", p.established.peer,
                setup_.port.name, what);
    return true;
  };
  if (oob::monotonic_ns() > p.deadline_ns) return drop("no QP metadata in time");
  if (p.stage == Pending::Stage::kRecvMeta) {
    int status = oob::recv_some(fd, &p.peer, sizeof p.peer, &p.moved, &why);
    if (status < 0) return drop(why);
    if (status == 0) return false;
    if (!check_meta(p.peer, setup_.port.ethernet, &why)) return drop("QP metadata: " + why);
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
  p.plan = plan_from_message(p.plan_message, p.peer.split != 0, setup_.port, p.peer);
  if (!p.queues->connect(p.peer, p.plan, setup_.config, &why)) return drop(why);
  auto conn = std::make_unique<Connection>(setup_.ctx, std::move(p.queues),
                                           std::move(p.established.sockets[0]), false,
                                           setup_.device, p.established.connection_id,
                                           p.established.remote_rail, format_gid(p.peer.gid),
                                           p.plan, setup_.timeout_ms);
  auto comm = std::make_unique<IbRecvComm>(std::move(conn), std::move(p.cts), p.cts_mr,
                                           std::move(p.records), p.records_mr, p.peer);
  p.cts_mr = p.records_mr = nullptr;
  if (p.flush_sink) comm->enable_flush(std::move(p.flush_sink), p.flush_sink_mr);
  p.flush_sink_mr = nullptr;
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
