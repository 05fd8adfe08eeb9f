// The receiving end: posts clear-to-send entries into the sender's FIFO and completes buffers as
// their immediates arrive.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "core/net_trace.hpp"
#include "ib/comms.hpp"

namespace astral::plugin::ib {

namespace {
// Work-request ids on this end's CQ: 0 for CTS writes (nothing to complete), this bit plus the
// ticket for flush READs.
constexpr uint64_t kFlushWrId = uint64_t(1) << 63;
}  // namespace

ncclResult_t IbRecvRequest::test(int* done, int* sizes) { return comm->test(this, done, sizes); }
ncclResult_t IbFlushRequest::test(int* done, int*) { return comm->test(this, done); }

IbRecvComm::IbRecvComm(std::unique_ptr<Connection> conn, RegisteredArea<CtsArea> cts,
                       RegisteredArea<RecordArea> records, const QpMeta& peer)
    : conn_(std::move(conn)),
      cts_(std::move(cts)),
      records_(std::move(records)),
      fifo_addr_(peer.addr),
      fifo_rkey_(peer.member[0].rkey),  // CTS writes go on QP 0, to the sender's member 0
      implicit_(conn_->queues()) {}

IbRecvComm::~IbRecvComm() {
  conn_.reset();  // QPs first: nothing may land in memory that is deregistered
  cts_.mrs.release();
  records_.mrs.release();
  flush_sink_.mrs.release();
}

void IbRecvComm::enable_flush(RegisteredArea<FlushSink> sink) { flush_sink_ = std::move(sink); }

bool IbRecvComm::post_recv(int qp) {
  // Zero-SGE receives: WRITE_WITH_IMM places its data by RDMA and consumes only the immediate.
  ibv_recv_wr wr{};
  wr.wr_id = uint64_t(qp);
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(conn_->queues().qp(qp), &wr, &bad) == 0;
}

bool IbRecvComm::prepost(std::string* why) {
  for (int q = 0; q < conn_->queues().qp_count(); ++q) {
    for (int i = 0; i < kRecvQueueDepth; ++i) {
      if (!post_recv(q)) return *why = fmt::format("ibv_post_recv: {}", std::strerror(errno)), false;
    }
  }
  return true;
}

ncclResult_t IbRecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                               void* const* mhandles, void* const* phandles, Request** request) {
  std::lock_guard lock(conn_->mutex());
  *request = nullptr;
  if (ncclResult_t res = progress(); res != ncclSuccess) return res;
  if (in_flight_ >= kFifoDepth) return ncclSuccess;  // NCCL retries once one completes
  uint32_t fifo_slot = uint32_t(seq_ % kFifoDepth);
  CtsEntry& e = cts_.area->entry[fifo_slot];
  std::memset(&e, 0, sizeof e);
  const int members = conn_->queues().member_count();
  for (int i = 0; i < n; ++i) {
    std::string why;
    const MemberMrs* mrs =
        sizes[i] > 0 ? implicit_.find(mhandles ? mhandles[i] : nullptr, data[i], sizes[i], &why)
                     : nullptr;
    if (sizes[i] > 0 && !mrs) return conn_->fail(ncclSystemError, false, why);
    e.addr[i] = reinterpret_cast<uint64_t>(data[i]);
    e.size[i] = sizes[i];
    for (int m = 0; mrs && m < members; ++m) e.rkey[i][m] = mrs->rkey(m);
    e.tag[i] = tags[i];
  }
  IbRecvRequest* r = pool_.acquire();
  if (!r) return ncclSuccess;
  e.count = uint32_t(n);
  e.seq = seq_ + 1;
  e.check = cts_check(e);
  std::memset(&records_.area->record[fifo_slot], 0, sizeof(SizeRecord));
  ibv_sge sge{reinterpret_cast<uint64_t>(&e), sizeof e, cts_.mrs.lkey(0)};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;  // wr_id 0: reaped, nothing to complete
  wr.wr.rdma.remote_addr = fifo_addr_ + fifo_slot * sizeof(CtsEntry);
  wr.wr.rdma.rkey = fifo_rkey_;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(conn_->queues().qp(0), &wr, &bad)) {
    pool_.release(r);
    return conn_->fail(ncclSystemError, false, fmt::format("ibv_post_send (CTS): {}", std::strerror(err)));
  }
  r->comm = this;
  r->count = n;
  r->slots_left = n;
  for (int i = 0; i < n; ++i) {
    r->transfer[i] = TransferInfo{&conn_->info(), false, tags[i], i, sizes[i], next_sequence_, 0, 0,
                                  phandles ? phandles[i] : nullptr};
    r->transfer[i].sequence_known = n == 1;
    r->transfer[i].op_hint = conn_->hints().op;
  }
  if (n == 1) ++next_sequence_;
  by_slot_[fifo_slot] = r;
  ++seq_;
  ++in_flight_;
  if (auto* obs = conn_->observer()) {
    int64_t now = oob::monotonic_ns();
    for (int i = 0; i < n; ++i) {
      r->transfer[i].posted_ns = now;
      obs->on_posted(r->transfer[i]);
    }
  }
  for (int i = 0; i < n; ++i) {
    profiler_transfer_started(conn_->profiler(), r->transfer[i], &r->profiler_event[i]);
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t IbRecvComm::on_immediate(const ibv_wc& wc, int member) {
  ImmFields imm = decode_imm(ntohl(wc.imm_data));
  IbRecvRequest* r = imm.fifo_slot < uint32_t(kFifoDepth) ? by_slot_[imm.fifo_slot] : nullptr;
  int q = conn_->queues().qp_index(member, wc.qp_num);
  if (q < 0 || !post_recv(q)) return conn_->fail(ncclSystemError, false, "cannot repost a receive");
  if (!r || imm.slot >= uint32_t(r->count) || imm.parts == 0) {
    return conn_->fail(ncclInternalError, false,
                       fmt::format("immediate {:#x} names no posted receive", ntohl(wc.imm_data)));
  }
  if (++r->parts_got[imm.slot] < int(imm.parts)) return ncclSuccess;
  const SlotRecord& record = records_.area->record[imm.fifo_slot].slot[imm.slot];
  r->received[imm.slot] = record.size;
  TransferInfo& t = r->transfer[imm.slot];
  t.bytes = record.size;
  t.sequence = record.sequence;
  t.sequence_known = true;
  if (auto* obs = conn_->observer()) {
    t.completed_ns = oob::monotonic_ns();
    obs->on_completed(t);
  }
  profiler_transfer_finished(conn_->profiler(), t, &r->profiler_event[imm.slot]);
  if (--r->slots_left == 0) {
    by_slot_[imm.fifo_slot] = nullptr;
    --in_flight_;
  }
  return ncclSuccess;
}

ncclResult_t IbRecvComm::progress() {
  if (ncclResult_t res = conn_->check_health(); res != ncclSuccess) return res;
  return conn_->drain_completions([this](const ibv_wc& wc, int member) {
    if (wc.wr_id & kFlushWrId) {
      flushes_done_[member] = std::max(flushes_done_[member], wc.wr_id & ~kFlushWrId);
    } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      return on_immediate(wc, member);
    }
    return ncclSuccess;
  });
}

ncclResult_t IbRecvComm::test(IbRecvRequest* r, int* done, int* sizes) {
  std::lock_guard lock(conn_->mutex());
  *done = 0;
  if (r->slots_left > 0) {
    if (ncclResult_t res = progress(); res != ncclSuccess) return res;
    if (r->slots_left > 0) {
      std::string why;
      if (!conn_->peer_closed(&why)) return ncclSuccess;
      if (ncclResult_t res = progress(); res != ncclSuccess) return res;
      if (r->slots_left > 0) return conn_->fail(ncclRemoteError, true, why);
    }
  }
  *done = 1;
  if (sizes) {
    for (int i = 0; i < r->count; ++i) sizes[i] = static_cast<int>(r->received[i]);
  }
  pool_.release(r);
  return ncclSuccess;
}

// NCCL's flush: one RDMA READ of the last non-empty buffer through each member's loopback QP.
// A READ's completion means that NIC's earlier PCIe writes into the GPU memory are visible to
// the GPU; a fused device's members each wrote some of the parts, so each of them reads.
// Host memory needs none (its data is visible on completion), nor an end without a flush QP
// (no GPU memory possible, or ASTRAL_GDR_FLUSH_DISABLE): the request is then null, "complete".
ncclResult_t IbRecvComm::iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                                Request** request) {
  *request = nullptr;
  std::lock_guard lock(conn_->mutex());
  if (ncclResult_t res = conn_->failure(); res != ncclSuccess) return res;
  Queues& queues = conn_->queues();
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0) last = i;
  }
  auto* mr = last >= 0 && mhandles ? static_cast<IbMr*>(mhandles[last]) : nullptr;
  if (!queues.flush_qp(0) || !mr || mr->magic != IbMr::kMagic || !mr->device_memory) {
    return ncclSuccess;
  }
  std::string why;
  const MemberMrs* mrs = implicit_.find(mr, data[last], 1, &why);  // checks it is this device's
  if (!mrs) return conn_->fail(ncclInvalidUsage, false, "iflush: " + why);
  IbFlushRequest* r = flush_pool_.acquire();
  if (!r) return conn_->fail(ncclInternalError, false,
                             fmt::format("more than {} flushes in flight", kFlushQueueDepth));
  for (int m = 0; m < queues.member_count(); ++m) {
    ibv_sge sge{reinterpret_cast<uint64_t>(flush_sink_.area->byte), 1, flush_sink_.mrs.lkey(m)};
    ibv_send_wr wr{};
    wr.wr_id = kFlushWrId | (flushes_posted_ + 1);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data[last]);
    wr.wr.rdma.rkey = mrs->rkey(m);
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(queues.flush_qp(m), &wr, &bad)) {
      flush_pool_.release(r);
      return conn_->fail(ncclSystemError, false,
                         fmt::format("ibv_post_send (flush on {}): {}", queues.port(m).name,
                                     std::strerror(err)));
    }
  }
  r->comm = this;
  r->ticket = ++flushes_posted_;
  *request = r;
  return ncclSuccess;
}

uint64_t IbRecvComm::flushes_done() const {
  uint64_t done = flushes_done_[0];
  for (int m = 1; m < conn_->queues().member_count(); ++m) done = std::min(done, flushes_done_[m]);
  return done;
}

ncclResult_t IbRecvComm::test(IbFlushRequest* r, int* done) {
  std::lock_guard lock(conn_->mutex());
  *done = 0;
  if (flushes_done() < r->ticket) {
    if (ncclResult_t res = progress(); res != ncclSuccess) return res;
    if (flushes_done() < r->ticket) return ncclSuccess;
  }
  *done = 1;
  flush_pool_.release(r);
  return ncclSuccess;
}

}  // namespace astral::plugin::ib
