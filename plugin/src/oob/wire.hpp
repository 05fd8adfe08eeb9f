#pragma once
// The out-of-band handshake every Astral connection opens with, whichever transport carries its
// data: the listen handle NCCL ships to the connecting rank, the Hello each socket opens with and
// the acceptor's Ack. The TCP transport's data streams and the IB transport's QP exchange both
// start here, so both get the same defences: a per-listen secret, magic numbers, a protocol
// version, the transport named, and every length checked. Parsing is pure (no I/O) so it can be
// unit-tested and fuzzed.
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/nccl_common.h"

namespace astral::plugin::oob {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire structs are little-endian");

inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr uint32_t kHandleMagic = 0x4c545341;  // "ASTL"
inline constexpr uint32_t kHelloMagic = 0x48545341;   // "ASTH"
inline constexpr uint32_t kAckMagic = 0x41545341;     // "ASTA"
inline constexpr int kMaxWireStreams = 16;

// Which transport a Hello is for: ranks started with different ASTRAL_TRANSPORT settings get a
// clear error instead of misreading each other's bytes. TCP is 0, what version 1 always sent.
enum class TransportKind : uint32_t { kTcp = 0, kIb = 1 };
const char* transport_kind_name(TransportKind kind);

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

// First bytes on every socket from the connecting side.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t stream_index;
  Secret secret;
  uint64_t connection_id;  // random, the same on every stream of one connection
  uint16_t stream_count;
  int16_t rail;  // connecting side's rail
  uint32_t transport;  // TransportKind
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

// Checks a hello against the listener's secret and transport; on failure returns false and says
// why.
bool check_hello(const Hello& hello, const Secret& secret, std::string* why,
                 TransportKind transport = TransportKind::kTcp);
bool check_ack(const Ack& ack, uint64_t connection_id, std::string* why);
bool check_handle(const ListenHandle& handle, std::string* why);

// Constant-time comparison, so response timing does not leak the secret.
bool secrets_equal(const Secret& a, const Secret& b);

// Cryptographically random bytes (getrandom); false if the kernel cannot supply them.
bool random_bytes(void* out, size_t size);

// "10.0.0.1:4242" or "[fd00::2]:4242".
std::string format_address(const sockaddr_storage& address);

// The listener's address as a socket address (for connect).
sockaddr_storage handle_address(const ListenHandle& handle);

}  // namespace astral::plugin::oob
