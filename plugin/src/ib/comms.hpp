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

// A range registered on every member port of a connection end's device, with each member's
// keys: a QP on member m uses lkey(m), and its peer writes with the rkey of the member it reaches.
// Members on one HCA share that HCA's cached registration (each holds a reference).
class MemberMrs {
 public:
  MemberMrs() = default;
  MemberMrs(MemberMrs&& other) noexcept { *this = std::move(other); }
  MemberMrs& operator=(MemberMrs&& other) noexcept;
  ~MemberMrs() { release(); }

  // Registers `region` on each of `queues`' members; false with `why`, and nothing held then.
  bool acquire(const Queues& queues, const net::MemoryRegion& region, std::string* why);
  void release();
  // Whether this was registered for exactly `queues`' members.
  bool on(const Queues& queues) const;
  MrEntry* entry(int member) const { return entry_[member]; }
  uint32_t lkey(int member) const { return entry_[member]->mr->lkey; }
  uint32_t rkey(int member) const { return entry_[member]->mr->rkey; }

 private:
  int count_ = 0;
  std::shared_ptr<Hca> hca_[kMaxMembers];
  MrEntry* entry_[kMaxMembers] = {};
};

// A remotely writable area, registered on every member (deregistered before it is freed).
template <typename Area>
struct RegisteredArea {
  std::unique_ptr<Area> area;
  MemberMrs mrs;
  // False with `why`.
  bool create(const Queues& queues, std::string* why) {
    area = std::make_unique<Area>();
    const net::MemoryRegion region{area.get(), sizeof(Area), NCCL_PTR_HOST, false, 0, -1};
    if (mrs.acquire(queues, region, why)) return true;
    area.reset();
    return false;
  }
  explicit operator bool() const { return bool(area); }
};

// What regMr hands NCCL: a cached registration on each member of the comm's device.
struct IbMr {
  static constexpr uint32_t kMagic = 0x4942524d;  // "IBRM"
  uint32_t magic = kMagic;
  MemberMrs mrs;
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
  const MemberMrs* mrs = nullptr;  // null for 0 bytes
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
  explicit ImplicitMrs(const Queues& queues) : queues_(queues) {}
  ~ImplicitMrs();
  // The keys covering [data, data+size) on every member, from `mhandle` when NCCL registered it.
  const MemberMrs* find(void* mhandle, void* data, size_t size, std::string* why);

 private:
  const Queues& queues_;
  std::vector<std::unique_ptr<MemberMrs>> held_;
};

class IbSendComm final : public SendComm {
 public:
  IbSendComm(std::unique_ptr<Connection> conn, RegisteredArea<CtsArea> fifo, const QpMeta& peer);
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
  // Tells observers and the profiler that every part of `r` has been sent.
  void completed(IbSendRequest* r);

  std::unique_ptr<Connection> conn_;
  RegisteredArea<CtsArea> fifo_;  // the receiver writes here
  uint64_t records_addr_;
  int peer_members_;
  uint32_t records_rkey_[kMaxMembers];  // as each of the receiver's members registered them
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
  IbRecvComm(std::unique_ptr<Connection> conn, RegisteredArea<CtsArea> cts,
             RegisteredArea<RecordArea> records, const QpMeta& peer);
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
  // Makes iflush read through the connection's flush QP into `sink`.
  void enable_flush(RegisteredArea<FlushSink> sink);

 private:
  ncclResult_t progress();
  ncclResult_t on_immediate(const ibv_wc& wc, int member);
  bool post_recv(int qp);

  std::unique_ptr<Connection> conn_;
  RegisteredArea<CtsArea> cts_;  // staging for the CTS writes
  RegisteredArea<RecordArea> records_;  // the sender writes sizes here
  uint64_t fifo_addr_;
  uint32_t fifo_rkey_;
  ImplicitMrs implicit_;
  RequestPool<IbRecvRequest, size_t(kFifoDepth) * 8> pool_;
  IbRecvRequest* by_slot_[kFifoDepth] = {};
  uint64_t seq_ = 0;
  int in_flight_ = 0;
  uint32_t next_sequence_ = 0;  // messages, for trace records of single receives
  // GPUDirect flushes: READs are numbered, one per member; each member's loopback QP completes
  // them in order, and a flush is done once every member's READ of its number is.
  RegisteredArea<FlushSink> flush_sink_;
  RequestPool<IbFlushRequest, size_t(kFlushQueueDepth)> flush_pool_;
  uint64_t flushes_posted_ = 0;
  uint64_t flushes_done_[kMaxMembers] = {};
  uint64_t flushes_done() const;
};

}  // namespace astral::plugin::ib
