#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>

#include "core/log.hpp"
#include "core/net_trace.hpp"
#include "tcp/comms.hpp"

namespace astral::plugin::tcp {
namespace {
// One sendmsg gathers at most this many pieces (headers and payloads of queued messages).
constexpr int kMaxGather = 64;
constexpr uint64_t kGatherBytes = 1 << 20;
}  // namespace

ncclResult_t SendRequest::test(int* done, int* sizes) { return comm->test(this, done, sizes); }

TcpSendComm::TcpSendComm(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams,
                         const ConnectionSetup& setup)
    : conn_(std::move(ctx), std::move(streams), setup) {}

ncclResult_t TcpSendComm::isend(const void* data, size_t size, int tag, void* /*mhandle*/,
                                void* phandle, Request** request) {
  std::lock_guard lock(conn_.mutex());
  *request = nullptr;
  if (conn_.failed()) return conn_.failure();
  SendRequest* r = pool_.acquire();
  if (!r) return ncclSuccess;  // all in use: NCCL retries later
  r->comm = this;
  r->data = static_cast<const uint8_t*>(data);
  r->layout = stripe_layout(size, conn_.stream_count(), conn_.stripe_min());
  r->header = MessageHeader{size, tag, next_sequence_++};
  r->parts_left = 1;  // stream 0 always carries the header
  for (int k = 1; k < r->layout.parts; ++k) r->parts_left += r->layout.length(k) > 0;
  r->transfer = TransferInfo{&conn_.info(), true, tag, 0, size, r->header.sequence, 0, 0, phandle};
  r->transfer.sequence_known = true;
  r->transfer.op_hint = conn_.hints().op;
  queue_.push_back(r);
  if (auto* obs = conn_.observer()) {
    r->transfer.posted_ns = monotonic_ns();  // timestamps only when someone listens
    obs->on_posted(r->transfer);
  }
  profiler_transfer_started(conn_.profiler(), r->transfer, &r->profiler_event);
  *request = r;
  // Start moving bytes now: a small message usually leaves in this call.
  return progress();
}

ncclResult_t TcpSendComm::test(SendRequest* r, int* done, int* sizes) {
  std::lock_guard lock(conn_.mutex());
  *done = 0;
  if (!r->done) {
    if (ncclResult_t res = progress(); res != ncclSuccess) return res;
    if (!r->done) return ncclSuccess;
  }
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(r->header.size);
  r->reported = true;
  recycle(r);
  return ncclSuccess;
}

void TcpSendComm::recycle(SendRequest* r) {
  if (r->reported && r->retired) pool_.release(r);
}

void TcpSendComm::part_finished(SendRequest* r) {
  if (--r->parts_left > 0) return;
  r->done = true;
  if (auto* obs = conn_.observer()) {
    r->transfer.completed_ns = monotonic_ns();
    obs->on_completed(r->transfer);
  }
  profiler_transfer_finished(conn_.profiler(), r->transfer, &r->profiler_event);
}

ncclResult_t TcpSendComm::progress() {
  if (conn_.failed()) return conn_.failure();
  if (ncclResult_t res = progress_first_stream(); res != ncclSuccess) return res;
  for (int k = 1; k < conn_.stream_count(); ++k) {
    if (ncclResult_t res = progress_stream(k); res != ncclSuccess) return res;
  }
  // Retire fully written messages from the front of the queue.
  while (!queue_.empty() && queue_.front()->done) {
    SendRequest* r = queue_.front();
    queue_.pop_front();
    ++queue_base_;
    r->retired = true;
    recycle(r);
  }
  for (auto& c : cursor_) c = std::max(c, queue_base_);
  return ncclSuccess;
}

// Stream 0: the header and first part of each message, many small messages per sendmsg.
ncclResult_t TcpSendComm::progress_first_stream() {
  while (cursor_[0] < queue_end()) {
    iovec iov[kMaxGather];
    int pieces = 0;
    uint64_t bytes = 0;
    for (uint64_t i = cursor_[0]; i < queue_end() && pieces + 2 <= kMaxGather &&
                                  bytes < kGatherBytes;
         ++i) {
      SendRequest* r = at(i);
      if (r->header_sent < sizeof(MessageHeader)) {
        iov[pieces++] = {reinterpret_cast<uint8_t*>(&r->header) + r->header_sent,
                         sizeof(MessageHeader) - r->header_sent};
        bytes += iov[pieces - 1].iov_len;
      }
      uint64_t left = r->layout.length(0) - r->sent[0];
      if (left > 0) {
        iov[pieces++] = {const_cast<uint8_t*>(r->data) + r->sent[0], left};
        bytes += left;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(pieces);
    ssize_t n = ::sendmsg(conn_.fd(0), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (would_block(errno)) return ncclSuccess;
      return conn_.fail_errno(errno, "send");
    }
    // Credit the written bytes to messages in order; finish the ones fully written.
    uint64_t credit = static_cast<uint64_t>(n);
    while (cursor_[0] < queue_end()) {
      SendRequest* r = at(cursor_[0]);
      uint64_t h = std::min<uint64_t>(credit, sizeof(MessageHeader) - r->header_sent);
      r->header_sent += h;
      credit -= h;
      uint64_t p = std::min<uint64_t>(credit, r->layout.length(0) - r->sent[0]);
      r->sent[0] += p;
      credit -= p;
      if (r->header_sent < sizeof(MessageHeader) || r->sent[0] < r->layout.length(0)) break;
      ++cursor_[0];
      part_finished(r);
    }
    if (static_cast<uint64_t>(n) < bytes) return ncclSuccess;  // socket buffer full
  }
  return ncclSuccess;
}

// Streams 1..: the other parts of striped messages, written straight from the user buffer.
ncclResult_t TcpSendComm::progress_stream(int k) {
  while (cursor_[k] < queue_end()) {
    SendRequest* r = at(cursor_[k]);
    uint64_t length = r->layout.length(k);
    if (r->sent[k] < length) {
      ssize_t n = ::send(conn_.fd(k), r->data + r->layout.begin(k) + r->sent[k],
                         length - r->sent[k], MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (would_block(errno)) return ncclSuccess;
        return conn_.fail_errno(errno, "send");
      }
      r->sent[k] += static_cast<uint64_t>(n);
      if (r->sent[k] < length) return ncclSuccess;
      part_finished(r);
    }
    ++cursor_[k];
  }
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
