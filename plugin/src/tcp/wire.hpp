#pragma once
// The TCP transport's wire format: the listen handle NCCL ships to the connecting rank, the hello
// each stream opens with, the acceptor's ack, and the header in front of every message. Parsing is
// pure (no I/O) so it can be unit-tested and fuzzed; every field and length is checked.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/nccl_common.h"

namespace astral::plugin::tcp {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire structs are little-endian");

inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr uint32_t kHandleMagic = 0x4c545341;  // "ASTL"
inline constexpr uint32_t kHelloMagic = 0x48545341;   // "ASTH"
inline constexpr uint32_t kAckMagic = 0x41545341;     // "ASTA"
inline constexpr int kMaxWireStreams = 16;

using Secret = std::array<uint8_t, 32>;

// What `listen` writes into NCCL's 128-byte handle. The tail of the handle is the connecting
// side's scratch space: NCCL polls connect() with the same handle, so the in-progress connection
// lives there (the listener zeroes it).
struct ListenHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t family;  // AF_INET or AF_INET6
  uint8_t address[16];
  uint16_t port;  // host byte order
  int16_t rail;   // listener's rail, -1 unknown
  uint32_t reserved;
  Secret secret;
  uint64_t connect_stage;  // connecting side: pointer to its in-progress connector, 0 at first
  uint64_t connect_check;  // connecting side: connect_stage ^ kStageCheck, guards against garbage
};
static_assert(sizeof(ListenHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL's 128 bytes");
inline constexpr uint64_t kStageCheck = 0x5354414745434b21ULL;

// First bytes on every stream from the connecting side.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t stream_index;
  Secret secret;
  uint64_t connection_id;  // random, the same on every stream of one connection
  uint16_t stream_count;
  int16_t rail;  // connecting side's rail
  uint32_t reserved;
  uint64_t reserved2;
};
static_assert(sizeof(Hello) == 64);

// The acceptor's answer on stream 0 once every stream has arrived and checked out.
struct Ack {
  uint32_t magic;
  uint16_t version;
  int16_t rail;  // acceptor's rail
  uint64_t connection_id;
  uint64_t reserved;
};
static_assert(sizeof(Ack) == 24);

// In front of every message on stream 0.
struct MessageHeader {
  uint64_t size;
  int32_t tag;
  uint32_t sequence;  // per connection, from 0: catches a desynchronised stream at once
};
static_assert(sizeof(MessageHeader) == 16);

// Checks a hello against the listener's secret; on failure returns false and says why.
bool check_hello(const Hello& hello, const Secret& secret, std::string* why);
bool check_ack(const Ack& ack, uint64_t connection_id, std::string* why);
bool check_handle(const ListenHandle& handle, std::string* why);

// Constant-time comparison, so response timing does not leak the secret.
bool secrets_equal(const Secret& a, const Secret& b);

// How a message of `size` bytes is cut over the streams: part k covers [begin(k), begin(k)+len(k)).
struct StripeLayout {
  uint64_t size = 0;
  int parts = 1;
  uint64_t chunk = 0;
  // chunk * (parts - 1) < size by construction, so neither can overflow.
  uint64_t begin(int k) const { return k < parts ? chunk * uint64_t(k) : size; }
  uint64_t length(int k) const { return k < parts ? std::min(chunk, size - begin(k)) : 0; }
};
StripeLayout stripe_layout(uint64_t size, int streams, uint64_t stripe_min);

// "10.0.0.1:4242" or "[fd00::2]:4242".
std::string format_address(const sockaddr_storage& address);

}  // namespace astral::plugin::tcp
