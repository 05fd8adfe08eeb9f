#pragma once
// The ib data path: NCCL's receiver-driven protocol over RC QPs.
//
// The receiver posts each receive (one to eight buffers) by RDMA-writing a clear-to-send entry
// (addresses, sizes, rkeys, tags) into the sender's FIFO at slot seq % kFifoDepth. The sender
// waits for the entry of its next sequence number, matches each isend to a buffer by tag,
// RDMA-writes the size it sends into the receiver's records (inline), then the data as a
// WRITE_WITH_IMM whose immediate names the FIFO slot, the buffer and the number of parts. A
// message is one part on one QP (QPs taken round-robin) or, with ASTRAL_IB_SPLIT_DATA_ON_QPS and
// at least kSplitMin bytes, one part per QP; RC ordering per QP makes the size record visible
// before that QP's immediate. The receiver completes a buffer once all its parts' immediates
// have arrived, and a receive once all its buffers have. Nothing blocks; NCCL's test() drives it.
#include <deque>
#include <memory>
#include <vector>

#include "core/request_pool.hpp"
#include "core/transport.hpp"
#include "ib/connection.hpp"

namespace astral::plugin::ib {

inline constexpr uint64_t kSplitMin = 64 * 1024;

// The remotely writable areas, page-aligned and page-sized, so that their registrations expose
// nothing else of the process to the peer.
struct alignas(4096) CtsArea {
  CtsEntry entry[kFifoDepth];
};
struct alignas(4096) RecordArea {
  SizeRecord record[kFifoDepth];
};
// Where a GPUDirect flush's 1-byte RDMA READ lands; never told to the peer.
struct alignas(4096) FlushSink {
  uint8_t byte[64];
};

// What regMr hands NCCL: a cached registration on the comm's HCA.
struct IbMr {
  static constexpr uint32_t kMagic = 0x4942524d;  // "IBRM"
  uint32_t magic = kMagic;
  std::shared_ptr<Hca> hca;
  MrEntry* entry = nullptr;
  bool device_memory = false;  // CUDA or DMA-BUF: data the NIC wrote needs a flush to be seen
};

class IbSendComm;
class IbRecvComm;

struct IbSendRequest final : Request {
  ncclResult_t test(int* done, int* sizes) override;
  IbSendComm* comm = nullptr;
  const void* data = nullptr;
  uint64_t size = 0;
  int tag = 0;
  uint32_t lkey = 0;
  bool posted = false;  // matched to a receive and handed to the QPs
  int parts_left = 0;
  TransferInfo transfer;
  void* profiler_event = nullptr;
};

struct IbRecvRequest final : Request {
  ncclResult_t test(int* done, int* sizes) override;
  IbRecvComm* comm = nullptr;
  int count = 0;
  int slots_left = 0;
  int parts_got[8] = {};
  uint64_t received[8] = {};
  TransferInfo transfer[8];
  void* profiler_event[8] = {};
};

// A GPUDirect flush: done once the loopback READ numbered `ticket` has completed.
struct IbFlushRequest final : Request {
  ncclResult_t test(int* done, int* sizes) override;
  IbRecvComm* comm = nullptr;
  uint64_t ticket = 0;
};

// Registrations made because NCCL passed no mhandle, released with the comm.
class ImplicitMrs {
 public:
  explicit ImplicitMrs(std::shared_ptr<Hca> hca) : hca_(std::move(hca)) {}
  ~ImplicitMrs();
  // The key covering [data, data+size), from `mhandle` when NCCL registered it.
  MrEntry* find(void* mhandle, void* data, size_t size, std::string* why);

 private:
  std::shared_ptr<Hca> hca_;
  std::vector<MrEntry*> held_;
};

class IbSendComm final : public SendComm {
 public:
  IbSendComm(std::unique_ptr<Connection> conn, std::unique_ptr<CtsArea> fifo, MrEntry* fifo_mr,
             const QpMeta& peer);
  ~IbSendComm() override;
  ncclResult_t isend(const void* data, size_t size, int tag, void* mhandle, void* phandle,
                     Request** request) override;
  ncclResult_t test(IbSendRequest* r, int* done, int* sizes);
  Connection& connection() { return *conn_; }

 private:
  ncclResult_t progress();
  bool next_entry();
  // Posts waiting sends whose receive has arrived, in posting order.
  ncclResult_t match_waiting();
  ncclResult_t post(IbSendRequest* r, int slot);

  std::unique_ptr<Connection> conn_;
  std::unique_ptr<CtsArea> fifo_;  // the receiver writes here
  MrEntry* fifo_mr_;
  uint64_t records_addr_;
  uint32_t records_rkey_;
  ImplicitMrs implicit_;
  RequestPool<IbSendRequest, size_t(kFifoDepth) * 8> pool_;
  // Sends NCCL posted before their receive's clear-to-send arrived: isend always returns a
  // request, and the match happens here as entries arrive.
  std::deque<IbSendRequest*> waiting_;
  uint64_t seq_ = 0;     // FIFO entry being consumed
  CtsEntry entry_{};     // its copy, once arrived
  bool have_entry_ = false;
  uint32_t used_ = 0;    // its buffers already matched
  uint32_t next_sequence_ = 0;
  uint64_t next_qp_ = 0;
};

class IbRecvComm final : public RecvComm {
 public:
  IbRecvComm(std::unique_ptr<Connection> conn, std::unique_ptr<CtsArea> cts, MrEntry* cts_mr,
             std::unique_ptr<RecordArea> records, MrEntry* records_mr, const QpMeta& peer);
  ~IbRecvComm() override;
  ncclResult_t irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                     void* const* mhandles, void* const* phandles, Request** request) override;
  ncclResult_t iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                      Request** request) override;
  ncclResult_t test(IbRecvRequest* r, int* done, int* sizes);
  ncclResult_t test(IbFlushRequest* r, int* done);
  Connection& connection() { return *conn_; }

  // RECVs for the immediates, on every QP; false with `why`.
  bool prepost(std::string* why);
  // Makes iflush read through the connection's flush QP into `sink` (registered as `sink_mr`).
  void enable_flush(std::unique_ptr<FlushSink> sink, MrEntry* sink_mr);

 private:
  ncclResult_t progress();
  ncclResult_t on_immediate(const ibv_wc& wc);
  bool post_recv(int qp);

  std::unique_ptr<Connection> conn_;
  std::unique_ptr<CtsArea> cts_;  // staging for the CTS writes
  MrEntry* cts_mr_;
  std::unique_ptr<RecordArea> records_;  // the sender writes sizes here
  MrEntry* records_mr_;
  uint64_t fifo_addr_;
  uint32_t fifo_rkey_;
  ImplicitMrs implicit_;
  RequestPool<IbRecvRequest, size_t(kFifoDepth) * 8> pool_;
  IbRecvRequest* by_slot_[kFifoDepth] = {};
  uint64_t seq_ = 0;
  int in_flight_ = 0;
  uint32_t next_sequence_ = 0;  // messages, for trace records of single receives
  // GPUDirect flushes: READs are numbered; the loopback QP completes them in order.
  std::unique_ptr<FlushSink> flush_sink_;
  MrEntry* flush_sink_mr_ = nullptr;
  RequestPool<IbFlushRequest, size_t(kFlushQueueDepth)> flush_pool_;
  uint64_t flushes_posted_ = 0, flushes_done_ = 0;
};

}  // namespace astral::plugin::ib
