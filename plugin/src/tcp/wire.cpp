#include "tcp/wire.hpp"

#include <algorithm>

namespace astral::plugin::tcp {

StripeLayout stripe_layout(uint64_t size, int streams, uint64_t stripe_min) {
  StripeLayout layout;
  layout.size = size;
  if (streams > 1 && size >= stripe_min && size > 0) {
    // Parts are multiples of 4 KiB so that each stream moves whole pages.
    constexpr uint64_t kAlign = 4096;
    uint64_t chunk = size / streams + (size % streams != 0);
    chunk = (chunk / kAlign + (chunk % kAlign != 0)) * kAlign;
    layout.parts = static_cast<int>(std::min<uint64_t>(streams, size / chunk + (size % chunk != 0)));
    layout.chunk = chunk;
  } else {
    layout.parts = 1;
    layout.chunk = size;
  }
  return layout;
}

}  // namespace astral::plugin::tcp
