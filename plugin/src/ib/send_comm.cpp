// The sending end: waits for the receiver's clear-to-send, then writes sizes and data.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "core/net_trace.hpp"
#include "ib/comms.hpp"

namespace astral::plugin::ib {

ncclResult_t IbSendRequest::test(int* done, int* sizes) { return comm->test(this, done, sizes); }

IbSendComm::IbSendComm(std::unique_ptr<Connection> conn, RegisteredArea<CtsArea> fifo,
                       const QpMeta& peer)
    : conn_(std::move(conn)),
      fifo_(std::move(fifo)),
      records_addr_(peer.addr),
      peer_members_(peer.members),
      implicit_(conn_->queues()) {
  for (int m = 0; m < peer.members; ++m) records_rkey_[m] = peer.member[m].rkey;
}

IbSendComm::~IbSendComm() {
  conn_.reset();  // QPs first: nothing may write into the FIFO once it is deregistered
  fifo_.mrs.release();
}

// The FIFO entry of seq_, once the receiver's write of all of it has landed: its `seq`, and a
// check that matches the rest (wire.hpp: the parts may land in any order). A torn copy is
// dropped and read again on the next call.
bool IbSendComm::next_entry() {
  if (have_entry_) return true;
  CtsEntry& slot = fifo_.area->entry[seq_ % kFifoDepth];
  if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) != seq_ + 1) return false;
  std::memcpy(&entry_, &slot, sizeof entry_);
  if (entry_.seq != seq_ + 1 || cts_check(entry_) != entry_.check) return false;
  have_entry_ = true;
  used_ = 0;
  return true;
}

ncclResult_t IbSendComm::isend(const void* data, size_t size, int tag, void* mhandle,
                               void* phandle, Request** request) {
  std::lock_guard lock(conn_->mutex());
  *request = nullptr;
  if (ncclResult_t res = conn_->failure(); res != ncclSuccess) return res;
  std::string why;
  const MemberMrs* mrs =
      size > 0 ? implicit_.find(mhandle, const_cast<void*>(data), size, &why) : nullptr;
  if (size > 0 && !mrs) return conn_->fail(ncclSystemError, false, why);
  IbSendRequest* r = pool_.acquire();
  if (!r) return ncclSuccess;  // all in use: NCCL retries later
  r->comm = this;
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->mrs = mrs;
  r->transfer = TransferInfo{&conn_->info(), true, tag, 0, size, next_sequence_++, 0, 0, phandle};
  r->transfer.sequence_known = true;
  r->transfer.op_hint = conn_->hints().op;
  waiting_.push_back(r);
  if (auto* obs = conn_->observer()) {
    r->transfer.posted_ns = oob::monotonic_ns();
    obs->on_posted(r->transfer);
  }
  profiler_transfer_started(conn_->profiler(), r->transfer, &r->profiler_event);
  *request = r;
  return progress();
}

ncclResult_t IbSendComm::match_waiting() {
  while (!waiting_.empty() && next_entry()) {
    if (entry_.count < 1 || entry_.count > 8) {
      return conn_->fail(ncclInternalError, false,
                         fmt::format("clear-to-send entry {} names {} buffers", seq_, entry_.count));
    }
    bool matched = false;
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      IbSendRequest* r = *it;
      int slot = -1;
      for (uint32_t i = 0; i < entry_.count && i < 8; ++i) {
        if (entry_.tag[i] == r->tag && !(used_ >> i & 1)) {
          slot = static_cast<int>(i);
          break;
        }
      }
      if (slot < 0) continue;  // its receive is a later one
      if (r->size > entry_.size[slot]) {
        return conn_->fail(ncclInvalidUsage, false,
                           fmt::format("a send of {} bytes with tag {} exceeds the posted receive "
                                       "of {} bytes (collective mismatch)",
                                       r->size, r->tag, entry_.size[slot]));
      }
      if (ncclResult_t res = post(r, slot); res != ncclSuccess) return res;
      waiting_.erase(it);
      used_ |= 1u << slot;
      matched = true;
      break;
    }
    if (used_ == (1u << entry_.count) - 1) {
      have_entry_ = false;
      ++seq_;
    } else if (!matched) {
      return ncclSuccess;  // the rest of this receive's sends are not posted yet
    }
  }
  return ncclSuccess;
}

// One part per QP when split, else one part on the next QP: [size record] + WRITE_WITH_IMM.
ncclResult_t IbSendComm::post(IbSendRequest* r, int slot) {
  const uint64_t size = r->size;
  Queues& queues = conn_->queues();
  const ConnectionPlan& plan = conn_->plan();
  int parts = plan.split && size >= kSplitMin ? queues.qp_count() : 1;
  uint64_t chunk = parts > 1 ? ((size + parts - 1) / parts + 127) / 128 * 128 : size;
  uint32_t fifo_slot = uint32_t(seq_ % kFifoDepth);
  SlotRecord record{size, r->transfer.sequence, 0};
  r->parts_left = parts;
  r->posted = true;
  for (int k = 0; k < parts; ++k) {
    int q = parts > 1 ? k : int(next_qp_++ % uint64_t(queues.qp_count()));
    int member = queues.member_of(q), peer_member = q % peer_members_;
    uint64_t begin = std::min(size, chunk * uint64_t(k));
    uint64_t length = std::min(chunk, size - begin);
    ibv_sge record_sge{reinterpret_cast<uint64_t>(&record), sizeof record, 0};
    ibv_send_wr record_wr{};
    record_wr.sg_list = &record_sge;
    record_wr.num_sge = 1;
    record_wr.opcode = IBV_WR_RDMA_WRITE;
    record_wr.send_flags = IBV_SEND_INLINE;
    record_wr.wr.rdma.remote_addr =
        records_addr_ + fifo_slot * sizeof(SizeRecord) + uint64_t(slot) * sizeof(SlotRecord);
    record_wr.wr.rdma.rkey = records_rkey_[peer_member];
    ibv_sge data_sge{reinterpret_cast<uint64_t>(r->data) + begin, uint32_t(length),
                     r->mrs ? r->mrs->lkey(member) : 0};
    ibv_send_wr data_wr{};
    data_wr.wr_id = reinterpret_cast<uint64_t>(r);
    data_wr.sg_list = length > 0 ? &data_sge : nullptr;
    data_wr.num_sge = length > 0 ? 1 : 0;
    data_wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    data_wr.send_flags = IBV_SEND_SIGNALED;
    data_wr.imm_data = htonl(encode_imm(fifo_slot, uint32_t(slot), uint32_t(parts)));
    data_wr.wr.rdma.remote_addr = entry_.addr[slot] + begin;
    data_wr.wr.rdma.rkey = entry_.rkey[slot][peer_member];
    if (k == 0) record_wr.next = &data_wr;
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(queues.qp(q), k == 0 ? &record_wr : &data_wr, &bad)) {
      return conn_->fail(ncclSystemError, false, fmt::format("ibv_post_send: {}", std::strerror(err)));
    }
  }
  return ncclSuccess;
}

ncclResult_t IbSendComm::progress() {
  if (ncclResult_t res = conn_->check_health(); res != ncclSuccess) return res;
  if (ncclResult_t res = match_waiting(); res != ncclSuccess) return res;
  return conn_->drain_completions([this](const ibv_wc& wc, int) {
    auto* r = reinterpret_cast<IbSendRequest*>(wc.wr_id);
    if (r && --r->parts_left == 0) completed(r);
    return ncclSuccess;
  });
}

void IbSendComm::completed(IbSendRequest* r) {
  if (auto* obs = conn_->observer()) {
    r->transfer.completed_ns = oob::monotonic_ns();
    obs->on_completed(r->transfer);
  }
  profiler_transfer_finished(conn_->profiler(), r->transfer, &r->profiler_event);
}

ncclResult_t IbSendComm::test(IbSendRequest* r, int* done, int* sizes) {
  std::lock_guard lock(conn_->mutex());
  *done = 0;
  if (!r->posted || r->parts_left > 0) {
    if (ncclResult_t res = progress(); res != ncclSuccess) return res;
    if (!r->posted || r->parts_left > 0) {
      std::string why;
      if (!conn_->peer_closed(&why)) return ncclSuccess;
      if (ncclResult_t res = progress(); res != ncclSuccess) return res;
      if (!r->posted || r->parts_left > 0) return conn_->fail(ncclRemoteError, true, why);
    }
  }
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(r->size);
  pool_.release(r);
  return ncclSuccess;
}

}  // namespace astral::plugin::ib
