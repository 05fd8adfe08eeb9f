#pragma once
// The ib transport's wire formats. Out of band (on the handshake's socket 0, after the shared
// Hello/Ack of oob/wire.hpp): each side's QP metadata, versioned and checked field by field,
// then the sender's Ready. In band (RDMA): the receiver's clear-to-send entries written into the
// sender's FIFO, the sizes the sender writes into the receiver's records, and the immediate of
// the WRITE_WITH_IMM that completes a message. Parsing is pure, for tests and fuzzing.
#include <cstdint>
#include <string>

#include "core/config.hpp"

namespace astral::plugin::ib {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire structs are little-endian");

inline constexpr uint32_t kMetaMagic = 0x51545341;   // "ASTQ"
inline constexpr uint32_t kPlanMagic = 0x50545341;  // "ASTP"
// 2: clear-to-send entries carry a check over their contents (CtsEntry).
// 3: an end may be a virtual NIC (makeVDevice): addressing and keys per member port.
inline constexpr uint16_t kMetaVersion = 3;
inline constexpr int kMaxQps = 16;
// Ports one virtual NIC may fuse: net v12's NCCL_NET_MAX_DEVS_PER_NIC.
inline constexpr int kMaxMembers = 8;
// CTS entries in flight per connection: NCCL's 32 requests per comm, twice, so that a receiver
// never waits for FIFO space while NCCL still has requests to post.
inline constexpr int kFifoDepth = 64;

// One member port of a connection end (a plain device is a virtual NIC of one member). QP q of
// an end lives on its member q % members, so each end knows which of the peer's members every
// one of its QPs reaches.
struct MemberAddress {
  uint8_t gid[16];
  uint16_t lid;
  uint8_t lmc;
  uint8_t port;
  uint8_t mtu;        // enum ibv_mtu
  uint8_t gid_index;
  int16_t rail;
  int16_t plane;
  uint16_t reserved;
  // Connecting side: its FIFO as this member registered it; accepting side: its size records.
  uint32_t rkey;
};
static_assert(sizeof(MemberAddress) == 32);

// One side's description of its end of the connection, sent first by the connecting side, then
// by the accepting side.
struct QpMeta {
  uint32_t magic;
  uint16_t version;
  uint16_t qps;       // 1..kMaxQps
  uint64_t addr;      // connecting side: its FIFO; accepting side: its size records
  uint32_t qpn[kMaxQps];
  uint8_t members;    // 1..kMaxMembers
  uint8_t ethernet;   // 1: RoCE (every member has the same link layer)
  uint8_t split;      // 1: large messages are split over the QPs
  uint8_t reserved[5];
  char host[32];      // host name, NUL-terminated (the fabric model's name for it)
  MemberAddress member[kMaxMembers];
};
static_assert(sizeof(QpMeta) == 376);

// The connecting side's last message: the path plan of the accepting side's direction (it planned
// both once it knew both ends), so that both ends agree; the accepting side's QPs go to RTR with
// it. Its arrival also says the connecting side's QPs are past RTR, so CTS writes may start.
struct PlanMessage {
  uint32_t magic;
  uint16_t qps;
  uint8_t sl;
  uint8_t tc;
  uint8_t policy;  // PathPolicy
  uint8_t reserved[3];
  uint32_t flow_label[kMaxQps];  // RoCE GRH flow label (20 bits), 0 = NCCL's behaviour
  uint8_t path_index[kMaxQps];   // IB: DLID offset within the destination's LMC
};
static_assert(sizeof(PlanMessage) == 92);

// The receiver's clear-to-send for one (possibly grouped) receive, at FIFO slot seq % kFifoDepth.
// The sender polls `seq` (sequence + 1), but an HCA need not land the entry's cache lines in
// address order (PCIe relaxed ordering, adaptive routing; softhca's memcpy neither), so `seq`
// alone does not say the rest has arrived: the sender takes the entry once `check`, computed by
// the receiver over everything else, matches what it read.
struct CtsEntry {
  uint64_t addr[8];
  uint64_t size[8];
  uint32_t rkey[8][kMaxMembers];  // per buffer, as each of the receiver's members registered it
  int32_t tag[8];
  uint32_t count;  // buffers in this receive, 1..8
  uint32_t check;  // cts_check() of the rest of the entry
  uint64_t seq;
};
static_assert(sizeof(CtsEntry) == 432);
// A 32-bit mix of every field but `check`: a torn read (new `seq`, a stale field) fails it.
uint32_t cts_check(const CtsEntry& entry);

// What the sender writes into the receiver's records before the immediate, per buffer of the
// receive at one FIFO slot: the size it sent there and the message's sequence number (so that
// both ends' trace records of the message carry the same one).
struct SlotRecord {
  uint64_t size;
  uint32_t sequence;
  uint32_t reserved;
};
struct SizeRecord {
  SlotRecord slot[8];
};

// WRITE_WITH_IMM immediate: FIFO slot of the receive, slot within it, and how many parts (one
// per QP when split) complete that slot.
inline uint32_t encode_imm(uint32_t fifo_slot, uint32_t slot, uint32_t parts) {
  return (fifo_slot & 0xffff) << 16 | (slot & 0xff) << 8 | (parts & 0xff);
}
struct ImmFields {
  uint32_t fifo_slot, slot, parts;
};
inline ImmFields decode_imm(uint32_t imm) { return {imm >> 16, (imm >> 8) & 0xff, imm & 0xff}; }

// Checks a peer's messages against what this side can talk to; false with `why` naming the field.
bool check_meta(const QpMeta& meta, bool local_ethernet, std::string* why);
bool check_plan(const PlanMessage& plan, int qps, std::string* why);

}  // namespace astral::plugin::ib
