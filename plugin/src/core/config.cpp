#include "core/config.hpp"

#include <sys/socket.h>

#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <string_view>

#include "core/log.hpp"

namespace astral::plugin {
namespace {

std::optional<long long> parse_integer(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, text.data() + text.size() - end);
  if (suffix.empty()) return value;
  long long scale = suffix == "K" || suffix == "KiB"   ? 1LL << 10
                    : suffix == "M" || suffix == "MiB" ? 1LL << 20
                    : suffix == "G" || suffix == "GiB" ? 1LL << 30
                                                       : 0;
  if (scale == 0 || value > (1LL << 40)) return std::nullopt;
  return value * scale;
}

// Reads an integer variable within [lo, hi]; keeps `value` and warns when the text is not one.
template <typename T>
void read_integer(const EnvLookup& env, const char* name, long long lo, long long hi, T& value,
                  std::vector<std::string>* warnings) {
  const char* text = env(name);
  if (!text || !*text) return;
  auto parsed = parse_integer(text);
  if (!parsed || *parsed < lo || *parsed > hi) {
    warnings->push_back(fmt::format("{}='{}' is not an integer in [{}, {}]; using {}", name, text,
                                    lo, hi, static_cast<long long>(value)));
    return;
  }
  value = static_cast<T>(*parsed);
}

void parse_ib_config(const EnvLookup& env, IbConfig& ib, std::vector<std::string>* warnings) {
  if (const char* lib = env("ASTRAL_IBVERBS_LIB")) ib.verbs_lib = lib;
  if (const char* hca = env("ASTRAL_IB_HCA")) ib.hca = hca;
  read_integer(env, "ASTRAL_IB_GID_INDEX", -1, 1023, ib.gid_index, warnings);
  if (const char* family = env("ASTRAL_IB_ADDR_FAMILY"); family && *family) {
    std::string_view f(family);
    if (f == "AF_INET" || f == "AF_INET6") {
      ib.addr_family = f == "AF_INET" ? AF_INET : AF_INET6;
    } else {
      warnings->push_back(fmt::format(
          "ASTRAL_IB_ADDR_FAMILY='{}' is not AF_INET or AF_INET6; using AF_INET", family));
    }
  }
  read_integer(env, "ASTRAL_IB_ROCE_VERSION_NUM", 1, 2, ib.roce_version, warnings);
  read_integer(env, "ASTRAL_IB_TC", -1, 255, ib.traffic_class, warnings);
  read_integer(env, "ASTRAL_IB_SL", 0, 15, ib.service_level, warnings);
  read_integer(env, "ASTRAL_IB_TIMEOUT", 1, 31, ib.timeout, warnings);
  read_integer(env, "ASTRAL_IB_RETRY_CNT", 0, 7, ib.retry_count, warnings);
  read_integer(env, "ASTRAL_IB_QPS", 1, 16, ib.qps, warnings);
  int split = ib.split_data;
  read_integer(env, "ASTRAL_IB_SPLIT_DATA_ON_QPS", 0, 1, split, warnings);
  ib.split_data = split != 0;
  int merge = ib.merge_nics;
  read_integer(env, "ASTRAL_IB_MERGE_NICS", 0, 1, merge, warnings);
  ib.merge_nics = merge != 0;
  if (const char* paths = env("ASTRAL_IB_PATHS"); paths && *paths) {
    std::string_view p(paths);
    if (p == "spread" || p == "pinned" || p == "off") {
      ib.paths = paths;
    } else {
      warnings->push_back(
          fmt::format("ASTRAL_IB_PATHS='{}' is not spread, pinned or off; using spread", paths));
    }
  }
  if (const char* fabric = env("ASTRAL_FABRIC")) ib.fabric = fabric;
  read_integer(env, "ASTRAL_IB_GDR", -1, 1, ib.gdr, warnings);
  int dmabuf = ib.dmabuf, flush_disable = ib.flush_disable;
  read_integer(env, "ASTRAL_DMABUF_ENABLE", 0, 1, dmabuf, warnings);
  read_integer(env, "ASTRAL_GDR_FLUSH_DISABLE", 0, 1, flush_disable, warnings);
  ib.dmabuf = dmabuf != 0;
  ib.flush_disable = flush_disable != 0;
}

}  // namespace

Config parse_config(const EnvLookup& env, std::vector<std::string>* warnings) {
  Config config;
  if (const char* ifname = env("ASTRAL_SOCKET_IFNAME")) config.socket_ifname = ifname;
  if (const char* family = env("ASTRAL_SOCKET_FAMILY"); family && *family) {
    std::string_view f(family);
    if (f == "AF_INET" || f == "4") {
      config.address_family = AF_INET;
    } else if (f == "AF_INET6" || f == "6") {
      config.address_family = AF_INET6;
    } else {
      warnings->push_back(fmt::format(
          "ASTRAL_SOCKET_FAMILY='{}' is not AF_INET or AF_INET6; using either", family));
    }
  }
  read_integer(env, "ASTRAL_TCP_STREAMS", 0, kMaxStreams, config.streams, warnings);
  read_integer(env, "ASTRAL_TCP_STRIPE_MIN", 4096, 1LL << 30, config.stripe_min, warnings);
  read_integer(env, "ASTRAL_TCP_TIMEOUT_MS", 100, 24LL * 3600 * 1000, config.timeout_ms, warnings);
  read_integer(env, "ASTRAL_NET_MAX_RECVS", 1, kMaxGroupedRecvs, config.max_recvs, warnings);
  if (const char* transport = env("ASTRAL_TRANSPORT"); transport && *transport) {
    std::string_view t(transport);
    if (t == "tcp" || t == "ib" || t == "auto") {
      config.transport = transport;
    } else {
      warnings->push_back(fmt::format(
          "ASTRAL_TRANSPORT='{}' is not tcp, ib or auto; using auto", transport));
    }
  }
  parse_ib_config(env, config.ib, warnings);
  return config;
}

Config load_config() {
  std::vector<std::string> warnings;
  Config config = parse_config([](const char* name) { return std::getenv(name); }, &warnings);
  for (const auto& w : warnings) ASTRAL_WARN("{}", w);
  return config;
}

}  // namespace astral::plugin
