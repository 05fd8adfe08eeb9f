#pragma once
// The TCP transport's wire format: the header in front of every message and how messages are cut
// over the streams. The handshake in front of them (handle, Hello, Ack) is oob/wire.hpp, shared
// with the IB transport. Parsing is pure (no I/O) so it can be unit-tested and fuzzed.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/nccl_common.h"
#include "oob/wire.hpp"

namespace astral::plugin::tcp {

// The handshake names, as the TCP code and its tests have always spelled them.
using namespace ::astral::plugin::oob;

// In front of every message on stream 0.
struct MessageHeader {
  uint64_t size;
  int32_t tag;
  uint32_t sequence;  // per connection, from 0: catches a desynchronised stream at once
};
static_assert(sizeof(MessageHeader) == 16);

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

}  // namespace astral::plugin::tcp
