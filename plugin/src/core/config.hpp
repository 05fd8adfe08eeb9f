#pragma once
// The plugin's settings, read once per plugin activation (first init) from the environment.
// Every variable is documented in README.md ("The NCCL plugin"). A malformed value is reported
// with one warning naming the variable and the default used instead; it never fails the job.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace astral::plugin {

// The ib transport's settings (README "InfiniBand and RoCE transport"), each beside NCCL's.
struct IbConfig {
  std::string verbs_lib;        // ASTRAL_IBVERBS_LIB (NCCL_IBVERBS_LIB); "" = libibverbs.so.1
  std::string hca;              // ASTRAL_IB_HCA (NCCL_IB_HCA syntax); "" = every active port
  int gid_index = -1;           // ASTRAL_IB_GID_INDEX (NCCL_IB_GID_INDEX); -1 = chosen
  int addr_family = 0;          // ASTRAL_IB_ADDR_FAMILY: AF_INET (default) or AF_INET6
  int roce_version = 2;         // ASTRAL_IB_ROCE_VERSION_NUM (NCCL_IB_ROCE_VERSION_NUM)
  int traffic_class = -1;       // ASTRAL_IB_TC (NCCL_IB_TC); -1 = the comm's, else 0
  int service_level = 0;        // ASTRAL_IB_SL (NCCL_IB_SL)
  int timeout = 20;             // ASTRAL_IB_TIMEOUT (NCCL_IB_TIMEOUT): 4.096 us * 2^timeout
  int retry_count = 7;          // ASTRAL_IB_RETRY_CNT (NCCL_IB_RETRY_CNT)
  int qps = 1;                  // ASTRAL_IB_QPS (NCCL_IB_QPS_PER_CONNECTION)
  bool split_data = false;      // ASTRAL_IB_SPLIT_DATA_ON_QPS (NCCL_IB_SPLIT_DATA_ON_QPS)
  std::string paths;            // ASTRAL_IB_PATHS: spread | pinned | off; "" = spread
  std::string fabric;           // ASTRAL_FABRIC: fabric JSON for pinned paths; "" = none
  int gdr = -1;                 // ASTRAL_IB_GDR: 1 = CUDA pointers, 0 = host only, -1 = probe
                                //   peer memory as NCCL does (nvidia_peermem / nv_mem)
  bool dmabuf = true;           // ASTRAL_DMABUF_ENABLE (NCCL_DMABUF_ENABLE)
  bool flush_disable = false;   // ASTRAL_GDR_FLUSH_DISABLE (NCCL_GDR_FLUSH_DISABLE)
  bool merge_nics = true;       // ASTRAL_IB_MERGE_NICS (NCCL_IB_MERGE_NICS): makeVDevice fuses
};

struct Config {
  std::string socket_ifname;        // ASTRAL_SOCKET_IFNAME, NCCL_SOCKET_IFNAME syntax; "" = auto
  int address_family = 0;           // ASTRAL_SOCKET_FAMILY: AF_INET, AF_INET6 or 0 (either)
  int streams = 0;                  // ASTRAL_TCP_STREAMS: 1..kMaxStreams, 0 = from link speed
  std::size_t stripe_min = 1 << 20; // ASTRAL_TCP_STRIPE_MIN: smallest message striped
  int timeout_ms = 30000;           // ASTRAL_TCP_TIMEOUT_MS: peer-silence bound
  int max_recvs = 8;                // ASTRAL_NET_MAX_RECVS: grouped receives advertised
  std::string transport = "auto";   // ASTRAL_TRANSPORT: tcp | ib | auto (ib where RDMA is usable)
  IbConfig ib;
};

inline constexpr int kMaxStreams = 16;
inline constexpr int kMaxGroupedRecvs = 8;

using EnvLookup = std::function<const char*(const char*)>;

// Parses the settings; problems are appended to `warnings` (one line each) and defaults used.
Config parse_config(const EnvLookup& env, std::vector<std::string>* warnings);

// The process environment.
Config load_config();

}  // namespace astral::plugin
