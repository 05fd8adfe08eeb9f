#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "core/net_trace.hpp"
#include "tcp/comms.hpp"

namespace astral::plugin::tcp {
namespace {
constexpr size_t kStagingBytes = 64 << 10;
// Payload left over this size is read straight into the user buffer, not through staging.
constexpr uint64_t kDirectReadMin = 4096;
}  // namespace

ncclResult_t RecvRequest::test(int* done, int* sizes) { return comm->test(this, done, sizes); }

TcpRecvComm::TcpRecvComm(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams,
                         const ConnectionSetup& setup)
    : conn_(std::move(ctx), std::move(streams), setup), staging_(kStagingBytes) {}

ncclResult_t TcpRecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                                void* const* /*mhandles*/, void* const* phandles,
                                Request** request) {
  std::lock_guard lock(conn_.mutex());
  *request = nullptr;
  if (conn_.failed()) return conn_.failure();
  RecvRequest* r = pool_.acquire();
  if (!r) return ncclSuccess;  // all in use: NCCL retries later
  r->comm = this;
  r->n = n;
  r->unmatched = r->incomplete = n;
  auto* obs = conn_.observer();
  int64_t now = obs ? monotonic_ns() : 0;  // timestamps only when someone listens
  const uint32_t op_hint = conn_.hints().op;
  for (int i = 0; i < n; ++i) {
    r->slots[i] = RecvRequest::Slot{static_cast<uint8_t*>(data[i]), sizes[i], tags[i], false, 0};
    r->transfers[i] = TransferInfo{&conn_.info(), false, tags[i], i, sizes[i], 0, now, 0,
                                   phandles ? phandles[i] : nullptr};
    // Slots match the first message with their tag; while every slot ever posted here has the
    // same tag (NCCL's case: the sender's rank), that is posting order, so a receive posted alone
    // knows its sequence now.
    if (posted_slots_ + i == 0) first_tag_ = tags[i];
    mixed_tags_ = mixed_tags_ || tags[i] != first_tag_;
    r->transfers[i].sequence_known = n == 1 && !mixed_tags_;
    r->transfers[i].sequence = r->transfers[i].sequence_known ? posted_slots_ : 0;
    r->transfers[i].op_hint = op_hint;
    if (obs) obs->on_posted(r->transfers[i]);
    profiler_transfer_started(conn_.profiler(), r->transfers[i], &r->profiler_events[i]);
  }
  posted_slots_ += static_cast<uint32_t>(n);
  unmatched_.push_back(r);
  *request = r;
  return progress();
}

ncclResult_t TcpRecvComm::test(RecvRequest* r, int* done, int* sizes) {
  std::lock_guard lock(conn_.mutex());
  *done = 0;
  if (!r->done) {
    if (ncclResult_t res = progress(); res != ncclSuccess) return res;
    if (!r->done) return ncclSuccess;
  }
  *done = 1;
  if (sizes) {
    for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->slots[i].received);
  }
  // Reusable at once: an Incoming entry that still points here (behind an unfinished striped
  // message) has every part received and never touches its request again.
  r->reported = true;
  pool_.release(r);
  return ncclSuccess;
}

// True while the peer owes us bytes of a message it has started: silence then means trouble.
bool TcpRecvComm::mid_message() const {
  size_t staged = staged_end_ - staged_begin_;
  return !incoming_.empty() || (!unmatched_.empty() && staged > 0 && staged < sizeof(MessageHeader));
}

void TcpRecvComm::part_finished(Incoming& message) {
  if (--message.parts_left > 0) return;
  RecvRequest* r = message.request;
  RecvRequest::Slot& slot = r->slots[message.slot];
  slot.received = message.layout.size;
  if (auto* obs = conn_.observer()) {
    TransferInfo& t = r->transfers[message.slot];
    t.bytes = slot.received;
    t.completed_ns = monotonic_ns();
    obs->on_completed(t);
  }
  profiler_transfer_finished(conn_.profiler(), r->transfers[message.slot], &r->profiler_events[message.slot]);
  if (--r->incomplete == 0) r->done = true;
}

ncclResult_t TcpRecvComm::progress() {
  if (conn_.failed()) return conn_.failure();
  uint64_t bytes_before = bytes_in_;
  if (ncclResult_t res = progress_first_stream(); res != ncclSuccess) return res;
  for (int k = 1; k < conn_.stream_count(); ++k) {
    if (ncclResult_t res = progress_stream(k); res != ncclSuccess) return res;
  }
  while (!incoming_.empty() && incoming_.front().parts_left == 0) {
    incoming_.pop_front();
    ++incoming_base_;
  }
  for (auto& c : cursor_) c = std::max(c, incoming_base_);

  // Silence in the middle of a message for longer than the timeout: the peer is stopped or the
  // path is black-holed. (An idle peer between messages is normal; keepalive covers a dead host.)
  // A message starts with bytes read, so the clock is read only when bytes moved or one is open.
  if (bytes_in_ != bytes_before) {
    last_progress_ns_ = monotonic_ns();
  } else if (mid_message()) {
    int64_t silent_ns = monotonic_ns() - last_progress_ns_;
    if (silent_ns > int64_t(conn_.timeout_ms()) * 1000000) {
      return conn_.fail(ncclRemoteError, true,
                        fmt::format("peer sent nothing for {} ms in the middle of a message "
                                    "(ASTRAL_TCP_TIMEOUT_MS)",
                                    silent_ns / 1000000));
    }
  }
  return ncclSuccess;
}

ncclResult_t TcpRecvComm::read_into_staging() {
  if (staged_begin_ == staged_end_) staged_begin_ = staged_end_ = 0;
  if (staged_end_ == staging_.size()) {
    std::memmove(staging_.data(), staging_.data() + staged_begin_, staged_end_ - staged_begin_);
    staged_end_ -= staged_begin_;
    staged_begin_ = 0;
  }
  if (staged_end_ == staging_.size()) return ncclInProgress;  // full: consume before reading on
  ssize_t n = ::recv(conn_.fd(0), staging_.data() + staged_end_, staging_.size() - staged_end_,
                     MSG_DONTWAIT);
  if (n > 0) {
    staged_end_ += static_cast<size_t>(n);
    bytes_in_ += static_cast<uint64_t>(n);
    return ncclSuccess;
  }
  if (n == 0) return conn_.fail(ncclRemoteError, true, "peer closed the connection");
  if (would_block(errno)) return ncclInProgress;
  return conn_.fail_errno(errno, "recv");
}

// Parses the header at the front of staging and matches it to the first posted receive with a
// free slot for its tag. *matched stays false when no posted receive can take it yet.
ncclResult_t TcpRecvComm::take_header(bool* matched) {
  *matched = false;
  MessageHeader h;
  std::memcpy(&h, staging_.data() + staged_begin_, sizeof h);
  if (h.sequence != expected_sequence_) {
    return conn_.fail(ncclSystemError, false,
                      fmt::format("stream out of step: message {} arrived, expected {}",
                                  h.sequence, expected_sequence_));
  }
  for (auto it = unmatched_.begin(); it != unmatched_.end(); ++it) {
    RecvRequest* r = *it;
    for (int i = 0; i < r->n; ++i) {
      RecvRequest::Slot& slot = r->slots[i];
      if (slot.matched || slot.tag != h.tag) continue;
      if (h.size > slot.capacity) {
        return conn_.fail(ncclInternalError, false,
                          fmt::format("message {} of {} bytes (tag {}) exceeds the posted "
                                      "receive of {} bytes",
                                      h.sequence, h.size, h.tag, slot.capacity));
      }
      slot.matched = true;
      if (--r->unmatched == 0) unmatched_.erase(it);
      r->transfers[i].sequence = h.sequence;
      r->transfers[i].sequence_known = true;
      staged_begin_ += sizeof h;
      ++expected_sequence_;
      Incoming message{r, i, stripe_layout(h.size, conn_.stream_count(), conn_.stripe_min()),
                       {}, 1};
      for (int k = 1; k < message.layout.parts; ++k) message.parts_left += message.layout.length(k) > 0;
      incoming_.push_back(message);
      *matched = true;
      return ncclSuccess;
    }
  }
  return ncclSuccess;
}

ncclResult_t TcpRecvComm::progress_first_stream() {
  for (;;) {
    if (cursor_[0] < incoming_end()) {
      // Payload of part 0 of the current message: from staging first, then from the socket.
      Incoming& m = at(cursor_[0]);
      uint64_t length = m.layout.length(0);
      uint8_t* dest = m.request->slots[m.slot].data;
      if (m.received[0] < length && staged_end_ > staged_begin_) {
        uint64_t take = std::min<uint64_t>(length - m.received[0], staged_end_ - staged_begin_);
        std::memcpy(dest + m.received[0], staging_.data() + staged_begin_, take);
        staged_begin_ += take;
        m.received[0] += take;
      }
      if (m.received[0] < length) {
        uint64_t left = length - m.received[0];
        if (left >= kDirectReadMin) {
          ssize_t n = ::recv(conn_.fd(0), dest + m.received[0], left, MSG_DONTWAIT);
          if (n == 0) return conn_.fail(ncclRemoteError, true, "peer closed the connection");
          if (n < 0) return would_block(errno) ? ncclSuccess : conn_.fail_errno(errno, "recv");
          m.received[0] += static_cast<uint64_t>(n);
          bytes_in_ += static_cast<uint64_t>(n);
        } else {
          ncclResult_t res = read_into_staging();
          if (res == ncclInProgress) return ncclSuccess;
          if (res != ncclSuccess) return res;
        }
        continue;
      }
      ++cursor_[0];
      part_finished(m);
      continue;
    }
    // Between messages: the next header, if a posted receive can take it.
    if (unmatched_.empty()) return ncclSuccess;
    if (staged_end_ - staged_begin_ >= sizeof(MessageHeader)) {
      bool matched = false;
      if (ncclResult_t res = take_header(&matched); res != ncclSuccess) return res;
      if (!matched) return ncclSuccess;
      continue;
    }
    ncclResult_t res = read_into_staging();
    if (res == ncclInProgress) return ncclSuccess;
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t TcpRecvComm::progress_stream(int k) {
  while (cursor_[k] < incoming_end()) {
    Incoming& m = at(cursor_[k]);
    uint64_t length = m.layout.length(k);
    if (m.received[k] < length) {
      uint8_t* dest = m.request->slots[m.slot].data + m.layout.begin(k);
      ssize_t n = ::recv(conn_.fd(k), dest + m.received[k], length - m.received[k], MSG_DONTWAIT);
      if (n == 0) return conn_.fail(ncclRemoteError, true, "peer closed the connection");
      if (n < 0) return would_block(errno) ? ncclSuccess : conn_.fail_errno(errno, "recv");
      m.received[k] += static_cast<uint64_t>(n);
      bytes_in_ += static_cast<uint64_t>(n);
      if (m.received[k] < length) return ncclSuccess;
      part_finished(m);
    }
    ++cursor_[k];
  }
  return ncclSuccess;
}

}  // namespace astral::plugin::tcp
