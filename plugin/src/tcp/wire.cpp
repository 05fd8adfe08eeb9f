#include "tcp/wire.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <fmt/format.h>

namespace astral::plugin::tcp {

bool secrets_equal(const Secret& a, const Secret& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

bool check_hello(const Hello& hello, const Secret& secret, std::string* why) {
  if (hello.magic != kHelloMagic) {
    *why = fmt::format("not an Astral connection (magic {:#010x})", hello.magic);
  } else if (hello.version != kProtocolVersion) {
    *why = fmt::format("protocol version {} (this library speaks {})", hello.version,
                       kProtocolVersion);
  } else if (!secrets_equal(hello.secret, secret)) {
    *why = "wrong listen secret";
  } else if (hello.stream_count < 1 || hello.stream_count > kMaxWireStreams ||
             hello.stream_index >= hello.stream_count) {
    *why = fmt::format("stream {} of {} is out of range", hello.stream_index, hello.stream_count);
  } else {
    return true;
  }
  return false;
}

bool check_ack(const Ack& ack, uint64_t connection_id, std::string* why) {
  if (ack.magic != kAckMagic) {
    *why = fmt::format("bad ack magic {:#010x}", ack.magic);
  } else if (ack.version != kProtocolVersion) {
    *why = fmt::format("peer speaks protocol version {} (this library speaks {})", ack.version,
                       kProtocolVersion);
  } else if (ack.connection_id != connection_id) {
    *why = "ack for another connection";
  } else {
    return true;
  }
  return false;
}

bool check_handle(const ListenHandle& handle, std::string* why) {
  if (handle.magic != kHandleMagic) {
    *why = fmt::format("not an Astral listen handle (magic {:#010x})", handle.magic);
  } else if (handle.version != kProtocolVersion) {
    *why = fmt::format("handle from protocol version {} (this library speaks {})", handle.version,
                       kProtocolVersion);
  } else if (handle.family != AF_INET && handle.family != AF_INET6) {
    *why = fmt::format("handle address family {} is not IPv4 or IPv6", handle.family);
  } else if (handle.port == 0) {
    *why = "handle has no port";
  } else {
    return true;
  }
  return false;
}

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

std::string format_address(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(in.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(in6.sin6_port));
  }
  return "?";
}

}  // namespace astral::plugin::tcp
