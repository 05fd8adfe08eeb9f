#pragma once
// The plugin's settings, read once per plugin activation (first init) from the environment.
// Every variable is documented in README.md ("The NCCL plugin"). A malformed value is reported
// with one warning naming the variable and the default used instead; it never fails the job.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace astral::plugin {

struct Config {
  std::string socket_ifname;        // ASTRAL_SOCKET_IFNAME, NCCL_SOCKET_IFNAME syntax; "" = auto
  int address_family = 0;           // ASTRAL_SOCKET_FAMILY: AF_INET, AF_INET6 or 0 (either)
  int streams = 0;                  // ASTRAL_TCP_STREAMS: 1..kMaxStreams, 0 = from link speed
  std::size_t stripe_min = 1 << 20; // ASTRAL_TCP_STRIPE_MIN: smallest message striped
  int timeout_ms = 30000;           // ASTRAL_TCP_TIMEOUT_MS: peer-silence bound
  int max_recvs = 8;                // ASTRAL_NET_MAX_RECVS: grouped receives advertised
  std::string transport = "auto";   // ASTRAL_TRANSPORT: tcp | ib | auto (ib where RDMA is usable)
};

inline constexpr int kMaxStreams = 16;
inline constexpr int kMaxGroupedRecvs = 8;

using EnvLookup = std::function<const char*(const char*)>;

// Parses the settings; problems are appended to `warnings` (one line each) and defaults used.
Config parse_config(const EnvLookup& env, std::vector<std::string>* warnings);

// The process environment.
Config load_config();

}  // namespace astral::plugin
