// Fuzzes the TCP transport's handshake and header checks with arbitrary bytes: whatever a stray
// or hostile connection sends must be rejected or accepted without a crash or an out-of-range
// read, and only the right secret may pass.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "tcp/wire.hpp"

using namespace astral::plugin::tcp;

namespace {
// Copies what there is of `size` bytes into `out` (the rest stays zero).
template <typename T>
void load(T& out, const uint8_t* data, size_t size) {
  if (size > 0) std::memcpy(&out, data, std::min(size, sizeof out));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Secret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 1);
  std::string why;

  Hello hello{};
  load(hello, data, size);
  bool accepted = check_hello(hello, secret, &why);
  if (accepted && (!secrets_equal(hello.secret, secret) || hello.stream_index >= hello.stream_count)) {
    __builtin_trap();
  }

  Ack ack{};
  load(ack, data, size);
  check_ack(ack, 42, &why);

  ListenHandle handle{};
  load(handle, data, size);
  check_handle(handle, &why);

  if (size >= 12) {
    uint64_t message_size;
    int32_t streams;
    std::memcpy(&message_size, data, 8);
    std::memcpy(&streams, data + 8, 4);
    StripeLayout layout = stripe_layout(message_size, 1 + (streams & 15), 4096);
    uint64_t covered = 0;
    for (int k = 0; k < 16; ++k) covered += layout.length(k);
    if (covered != message_size) __builtin_trap();
  }
  return 0;
}
