#pragma once
// The data path of an established TCP connection. Nothing here blocks: every call moves what the
// sockets accept right now and returns; NCCL's progress thread drives the rest through test().
//
// Protocol (per connection, in posting order): stream 0 carries a MessageHeader {size, tag,
// sequence} and the first part of each message; a message of at least `stripe_min` bytes is cut
// into one part per stream (stripe_layout), each stream carrying its parts in message order.
// Receives match messages in posting order; within a grouped receive the tag picks the slot.
#include <sys/uio.h>

#include <array>
#include <deque>
#include <memory>
#include <vector>

#include "core/request_pool.hpp"
#include "core/transport.hpp"
#include "tcp/connection.hpp"
#include "tcp/wire.hpp"

namespace astral::plugin::tcp {

// Requests one comm keeps in flight: NCCL's 32 per comm, times grouped receives sharing a comm.
inline constexpr int kMaxRequestsPerComm = NCCL_NET_MAX_REQUESTS * 8;

class TcpSendComm;
class TcpRecvComm;

struct SendRequest final : Request {
  ncclResult_t test(int* done, int* sizes) override;

  TcpSendComm* comm = nullptr;
  const uint8_t* data = nullptr;
  StripeLayout layout;
  MessageHeader header{};
  uint64_t header_sent = 0;
  std::array<uint64_t, kMaxWireStreams> sent{};  // bytes of part k written
  int parts_left = 0;
  bool done = false;       // every byte handed to the kernel
  bool retired = false;    // left the send queue
  bool reported = false;   // NCCL saw done
  TransferInfo transfer;
  void* profiler_event = nullptr;  // NCCL's handle for the profiler's net event
};

class TcpSendComm final : public SendComm {
 public:
  TcpSendComm(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams,
              const ConnectionSetup& setup);
  // Host memory needs no registration for sockets: the mhandle is not needed to send.
  ncclResult_t isend(const void* data, size_t size, int tag, void* mhandle, void* phandle,
                     Request** request) override;
  ncclResult_t test(SendRequest* request, int* done, int* sizes);

 private:
  ncclResult_t progress();
  ncclResult_t progress_first_stream();
  ncclResult_t progress_stream(int stream);
  void part_finished(SendRequest* request);
  void recycle(SendRequest* request);
  SendRequest* at(uint64_t index) { return queue_[index - queue_base_]; }
  uint64_t queue_end() const { return queue_base_ + queue_.size(); }

  Connection conn_;
  RequestPool<SendRequest, kMaxRequestsPerComm> pool_;
  std::deque<SendRequest*> queue_;  // posted, not yet fully written
  uint64_t queue_base_ = 0;         // index of queue_.front()
  std::array<uint64_t, kMaxWireStreams> cursor_{};  // next message index per stream
  uint32_t next_sequence_ = 0;
};

struct RecvRequest final : Request {
  ncclResult_t test(int* done, int* sizes) override;

  struct Slot {
    uint8_t* data = nullptr;
    uint64_t capacity = 0;
    int tag = 0;
    bool matched = false;
    uint64_t received = 0;
  };
  TcpRecvComm* comm = nullptr;
  int n = 0;
  std::array<Slot, 8> slots;
  std::array<TransferInfo, 8> transfers;
  std::array<void*, 8> profiler_events{};  // NCCL's handles for the profiler's net events
  int unmatched = 0;
  int incomplete = 0;
  bool done = false;
  bool reported = false;
};

class TcpRecvComm final : public RecvComm {
 public:
  TcpRecvComm(std::shared_ptr<NetContext> ctx, std::vector<Fd> streams,
              const ConnectionSetup& setup);
  ncclResult_t irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                     void* const* mhandles, void* const* phandles, Request** request) override;
  // Sockets write host memory with the CPU: nothing to flush, the request is null (complete).
  ncclResult_t iflush(int, void* const*, const int*, void* const*, Request** request) override {
    *request = nullptr;
    return ncclSuccess;
  }
  ncclResult_t test(RecvRequest* request, int* done, int* sizes);

 private:
  // A matched message being received.
  struct Incoming {
    RecvRequest* request;
    int slot;
    StripeLayout layout;
    std::array<uint64_t, kMaxWireStreams> received{};
    int parts_left;
  };

  ncclResult_t progress();
  ncclResult_t progress_first_stream();
  ncclResult_t progress_stream(int stream);
  ncclResult_t take_header(bool* matched);
  ncclResult_t read_into_staging();
  void part_finished(Incoming& message);
  bool mid_message() const;
  Incoming& at(uint64_t index) { return incoming_[index - incoming_base_]; }
  uint64_t incoming_end() const { return incoming_base_ + incoming_.size(); }

  Connection conn_;
  RequestPool<RecvRequest, kMaxRequestsPerComm> pool_;
  std::deque<RecvRequest*> unmatched_;  // posted receives with slots still waiting for a header
  std::deque<Incoming> incoming_;
  uint64_t incoming_base_ = 0;
  std::array<uint64_t, kMaxWireStreams> cursor_{};
  uint32_t expected_sequence_ = 0;
  uint32_t posted_slots_ = 0;  // receive slots posted so far: the next one gets this sequence
  int first_tag_ = 0;          // ... as long as every slot had this tag
  bool mixed_tags_ = false;
  // Stream 0 read-ahead: small messages arrive with one recv() instead of two.
  std::vector<uint8_t> staging_;
  size_t staged_begin_ = 0, staged_end_ = 0;
  uint64_t bytes_in_ = 0;  // bytes read so far, to notice silence
  int64_t last_progress_ns_ = 0;
};

}  // namespace astral::plugin::tcp
