#include "oob/wire.hpp"

#include <arpa/inet.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace astral::plugin::oob {

const char* transport_kind_name(TransportKind kind) {
  return kind == TransportKind::kIb ? "ib" : "tcp";
}

bool secrets_equal(const Secret& a, const Secret& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

bool check_hello(const Hello& hello, const Secret& secret, std::string* why,
                 TransportKind transport) {
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
  } else if (hello.transport != static_cast<uint32_t>(transport)) {
    *why = fmt::format("the peer runs transport {} and this listener {} (ASTRAL_TRANSPORT differs "
                       "between ranks)",
                       hello.transport <= 1 ? transport_kind_name(TransportKind(hello.transport))
                                            : "unknown",
                       transport_kind_name(transport));
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

bool random_bytes(void* out, size_t size) {
  auto* p = static_cast<uint8_t*>(out);
  while (size > 0) {
    ssize_t n = ::getrandom(p, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
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

sockaddr_storage handle_address(const ListenHandle& handle) {
  sockaddr_storage remote{};
  remote.ss_family = handle.family;
  if (handle.family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(remote);
    std::memcpy(&in.sin_addr, handle.address, sizeof in.sin_addr);
    in.sin_port = htons(handle.port);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(remote);
    std::memcpy(&in6.sin6_addr, handle.address, sizeof in6.sin6_addr);
    in6.sin6_port = htons(handle.port);
  }
  return remote;
}

}  // namespace astral::plugin::oob
