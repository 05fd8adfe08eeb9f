// netbench orchestration: local ranks (forked processes) or one rank per host, a coordinator for
// the out-of-band exchange, the plugin and the sockets baseline measured in turns, and the
// merge of every rank's timings into one measurement per engine and size.
#include "astral/netbench/netbench.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "netbench/net_loader.hpp"
#include "netbench/bootstrap.hpp"
#include "netbench/fabric.hpp"
#include "netbench/patterns.hpp"

namespace astral::netbench {
namespace {

int g_rank = 0;
bool g_verbose = false;

// The NCCL logger netbench hands the plugin: WARNs (and INFOs with --verbose) to stderr.
void log_to_stderr(ncclDebugLogLevel level, unsigned long, const char*, int, const char* format,
                   ...) {
  if (level != NCCL_LOG_WARN && !(g_verbose && level == NCCL_LOG_INFO)) return;
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::fprintf(stderr, "netbench rank %d: %s %s\n", g_rank, level == NCCL_LOG_WARN ? "WARN" : "INFO",
               text);
}

int default_iterations(Pattern pattern, size_t bytes) {
  size_t budget = size_t(512) << 20;
  int lo = pattern == Pattern::kPingPong ? 200 : 20;
  return static_cast<int>(std::clamp<size_t>(budget / std::max<size_t>(bytes, 1), lo, 20000));
}

// One rank's view of one run, as exchanged at the end.
struct RankResult {
  std::string engine;
  size_t bytes = 0;
  int repeat = 0;
  int iterations = 0;
  double total_s = 0;
  bool verified = false;
  std::vector<double> iteration_s;  // rank 0 only (latency percentiles)
};

std::string serialize(const std::vector<RankResult>& results) {
  std::ostringstream out;
  out.precision(17);
  for (const auto& r : results) {
    out << r.engine << ' ' << r.bytes << ' ' << r.repeat << ' ' << r.iterations << ' ' << r.total_s
        << ' ' << r.verified << ' ' << r.iteration_s.size();
    for (double s : r.iteration_s) out << ' ' << s;
    out << '\n';
  }
  return out.str();
}

std::vector<RankResult> deserialize(const std::string& text) {
  std::vector<RankResult> results;
  std::istringstream in(text);
  RankResult r;
  size_t n = 0;
  while (in >> r.engine >> r.bytes >> r.repeat >> r.iterations >> r.total_s >> r.verified >> n) {
    r.iteration_s.resize(n);
    for (double& s : r.iteration_s) in >> s;
    results.push_back(r);
  }
  return results;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(q * double(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

Measurement summarize(const Options& o, const std::vector<std::vector<RankResult>>& ranks,
                      size_t index) {
  const RankResult& r0 = ranks[0][index];
  Measurement m;
  m.engine = r0.engine;
  m.pattern = o.pattern;
  m.bytes = r0.bytes;
  m.ranks = static_cast<int>(ranks.size());
  m.iterations = r0.iterations;
  m.verified = true;
  for (const auto& rank : ranks) {
    m.seconds = std::max(m.seconds, rank.at(index).total_s);
    m.verified = m.verified && rank.at(index).verified;
  }
  double scale = o.pattern == Pattern::kPingPong ? 0.5e6 : 1e6;  // half round trip
  m.p50_us = percentile(r0.iteration_s, 0.50) * scale;
  m.p90_us = percentile(r0.iteration_s, 0.90) * scale;
  m.p99_us = percentile(r0.iteration_s, 0.99) * scale;
  m.max_us = percentile(r0.iteration_s, 1.0) * scale;
  double n = m.ranks;
  double moved = double(m.bytes) * m.iterations;
  if (m.seconds > 0) {
    switch (o.pattern) {
      case Pattern::kPingPong: m.gb_per_s = m.p50_us > 0 ? double(m.bytes) / (m.p50_us * 1e3) : 0; break;
      case Pattern::kStream: m.gb_per_s = moved / m.seconds / 1e9; break;
      case Pattern::kBidirectional: m.gb_per_s = moved * o.window / m.seconds / 1e9; break;
      case Pattern::kAllToAll: m.gb_per_s = moved * (n - 1) / m.seconds / 1e9; break;
      case Pattern::kAllReduce:
        m.gb_per_s = moved / m.seconds / 1e9;
        m.bus_gb_per_s = m.gb_per_s * 2 * (n - 1) / n;
        break;
    }
  }
  return m;
}

// The median run of each (engine, size) over the repeats, by the pattern's main figure.
std::vector<Measurement> merge(const Options& o, const std::vector<std::string>& blobs) {
  std::vector<std::vector<RankResult>> ranks;
  for (const auto& blob : blobs) ranks.push_back(deserialize(blob));
  for (const auto& r : ranks) {
    if (r.size() != ranks[0].size()) throw std::runtime_error("netbench: ranks disagree on runs");
  }
  std::vector<Measurement> all;
  for (size_t i = 0; i < ranks[0].size(); ++i) all.push_back(summarize(o, ranks, i));
  std::vector<Measurement> medians;
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<Measurement> same;
    for (const auto& m : all) {
      if (m.engine == all[i].engine && m.bytes == all[i].bytes) same.push_back(m);
    }
    bool seen = std::any_of(medians.begin(), medians.end(), [&](const Measurement& m) {
      return m.engine == all[i].engine && m.bytes == all[i].bytes;
    });
    if (seen) continue;
    bool latency = o.pattern == Pattern::kPingPong;
    std::sort(same.begin(), same.end(), [&](const Measurement& a, const Measurement& b) {
      return latency ? a.p50_us < b.p50_us : a.gb_per_s < b.gb_per_s;
    });
    medians.push_back(same[same.size() / 2]);
  }
  return medians;
}

// IP address of the interface the plugin uses for device `dev`, for the sockets baseline.
std::string interface_address(const char* ifname) {
  std::string found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* ifa = list; ifa && found.empty(); ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || std::string(ifa->ifa_name) != ifname) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (ifa->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr, text, sizeof text);
      found = text;
    }
  }
  freeifaddrs(list);
  return found;
}

// The virtual NIC the plugin makes of `devices` (--fuse), as NCCL asks for one.
int fused_device(const ncclNet_v11_t& net, const std::vector<int>& devices, int rank) {
  ncclNetVDeviceProps_v11_t props{};
  if (devices.size() > sizeof props.devs / sizeof props.devs[0] || !net.makeVDevice) {
    throw std::runtime_error(fmt::format("netbench: rank {}: --fuse takes 2 to 4 devices of a "
                                         "plugin with makeVDevice", rank));
  }
  props.ndevs = int(devices.size());
  std::copy(devices.begin(), devices.end(), props.devs);
  int device = -1;
  if (net.makeVDevice(&device, &props) != ncclSuccess) {
    throw std::runtime_error(fmt::format("netbench: rank {}: the plugin refused to fuse devices {} "
                                         "(its INFO line says why; --verbose)",
                                         rank, fmt::join(devices, ",")));
  }
  return device;
}

// Everything one rank does; the last allgather carries its results to rank 0 / the coordinator.
std::vector<std::string> run_rank(const Options& o, int rank, int ranks, BootstrapClient& boot,
                                  const std::function<void(const std::string&)>& progress) {
  g_rank = rank;
  g_verbose = o.verbose;
  std::string path = o.plugin_path.empty() ? default_net_plugin_path() : o.plugin_path;
  std::string why;
  if (!o.trace_dir.empty()) {
    // Read by the plugin when it opens its trace file; RANK names the file and its header.
    setenv("ASTRAL_TRACE_DIR", o.trace_dir.c_str(), 1);
    setenv("RANK", std::to_string(rank).c_str(), 1);
  }
  auto lib = NetPluginLibrary::open(path, &why);
  if (!lib) throw std::runtime_error("netbench: " + why);
  const ncclNet_v11_t& net = lib->net();
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (net.init(&ctx, 0x6e657462656e6368ULL, &config, &log_to_stderr, nullptr) != ncclSuccess) {
    throw std::runtime_error(fmt::format("netbench: rank {}: plugin init failed", rank));
  }
  struct Finalize {
    const ncclNet_v11_t& net;
    void* ctx;
    ~Finalize() { net.finalize(ctx); }
  } finalize{net, ctx};
  const int device = o.fuse.empty() ? o.device : fused_device(net, o.fuse, rank);
  int ndev = 0;
  net.devices(&ndev);  // a fused device counts from now on
  if (device < 0 || device >= ndev) {
    throw std::runtime_error(fmt::format(
        "netbench: rank {}: the plugin has {} device(s), --device {} does not exist (set "
        "ASTRAL_SOCKET_IFNAME)",
        rank, ndev, device));
  }
  ncclNetProperties_v11_t props{};
  net.getProperties(device, &props);
  std::vector<RankResult> results;
  {
    auto plugin = make_plugin_fabric(net, ctx, device, rank, ranks, boot, o.timeout_s);
    std::unique_ptr<Fabric> sockets;
    if (o.baseline_sockets) {
      std::string address = interface_address(props.name);
      if (address.empty()) address = "127.0.0.1";
      sockets = make_socket_fabric(address, rank, ranks, boot, o.timeout_s);
    }
    if (rank == 0) progress(fmt::format("netbench: {} ranks over {} ({})", ranks, props.name, path));
    for (size_t bytes : o.sizes) {
      int iterations = o.iterations > 0 ? o.iterations : default_iterations(o.pattern, bytes);
      int warmup = o.warmup >= 0 ? o.warmup : std::max(2, iterations / 10);
      PatternSpec spec{o.pattern, bytes, iterations, warmup, o.window};
      for (int rep = 0; rep < o.repeat; ++rep) {
        std::vector<Fabric*> order = {plugin.get()};
        if (sockets) order.insert(rep % 2 ? order.begin() : order.end(), sockets.get());
        for (Fabric* fabric : order) {
          boot.barrier();
          PatternRun run = run_pattern(*fabric, spec, rank, ranks);
          RankResult r{fabric->name(), bytes, rep, iterations, run.total_s, run.verified, {}};
          if (rank == 0) r.iteration_s = std::move(run.iteration_s);
          if (rank == 0) {
            progress(fmt::format("netbench: {} {} {} run {}/{}: {:.3f} s", pattern_name(o.pattern),
                                 format_size(bytes), fabric->name(), rep + 1, o.repeat,
                                 run.total_s));
          }
          results.push_back(std::move(r));
        }
      }
    }
    boot.barrier();  // nobody closes a connection a peer is still using
  }
  return boot.allgather(serialize(results));
}

}  // namespace

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::kPingPong: return "pingpong";
    case Pattern::kStream: return "stream";
    case Pattern::kBidirectional: return "bidirectional";
    case Pattern::kAllToAll: return "alltoall";
    case Pattern::kAllReduce: return "allreduce";
  }
  return "?";
}

bool parse_pattern(const std::string& text, Pattern* pattern) {
  for (Pattern p : {Pattern::kPingPong, Pattern::kStream, Pattern::kBidirectional,
                    Pattern::kAllToAll, Pattern::kAllReduce}) {
    if (text == pattern_name(p)) {
      *pattern = p;
      return true;
    }
  }
  if (text == "bidir") {
    *pattern = Pattern::kBidirectional;
    return true;
  }
  return false;
}

bool parse_size(const std::string& text, size_t* bytes) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  std::string unit = text.substr(used);
  int shift = unit.empty() || unit == "B"                ? 0
              : unit == "K" || unit == "KiB" || unit == "k" ? 10
              : unit == "M" || unit == "MiB"              ? 20
              : unit == "G" || unit == "GiB"              ? 30
                                                          : -1;
  if (shift < 0 || value > (1ULL << 32)) return false;
  *bytes = static_cast<size_t>(value) << shift;
  return *bytes <= (size_t(1) << 30);  // the plugin's maxP2pBytes
}

std::string format_size(size_t bytes) {
  if (bytes >= (1 << 30) && bytes % (1 << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::vector<Measurement> run(const Options& o,
                             const std::function<void(const std::string&)>& progress) {
  if (o.ranks < 2) throw std::runtime_error("netbench: --ranks must be at least 2");
  if (o.rank >= 0) {
    // One rank of a multi-host run.
    const std::string token =
        !o.token.empty() ? o.token : launch_token([](const char* name) { return std::getenv(name); });
    std::string host;
    int port = 0;
    if (!split_host_port(o.coordinator, &host, &port)) {
      throw std::runtime_error("netbench: --coordinator must be HOST:PORT, got '" +
                               o.coordinator + "'");
    }
    std::unique_ptr<Coordinator> coordinator;
    std::thread serving;
    std::string coordinator_error;
    if (o.rank == 0) {
      coordinator = std::make_unique<Coordinator>(host, port, o.ranks, token);
      serving = std::thread([&] {
        try {
          coordinator->serve(o.timeout_s);
        } catch (const std::exception& e) {
          coordinator_error = e.what();
        }
      });
    }
    std::vector<std::string> blobs;
    try {
      BootstrapClient boot(host, port, o.rank, o.ranks, token, o.timeout_s);
      blobs = run_rank(o, o.rank, o.ranks, boot, progress);
    } catch (...) {
      if (serving.joinable()) serving.detach();
      throw;
    }
    if (serving.joinable()) serving.join();
    if (!coordinator_error.empty()) throw std::runtime_error(coordinator_error);
    return o.rank == 0 ? merge(o, blobs) : std::vector<Measurement>{};
  }

  // Local: fork the ranks on this host; the parent coordinates.
  std::string token = random_token();
  Coordinator coordinator("127.0.0.1", 0, o.ranks, token);
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("netbench: fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        setenv("ASTRAL_SOCKET_IFNAME", "lo", 0);  // local ranks talk over loopback
        BootstrapClient boot("127.0.0.1", coordinator.port(), r, o.ranks, token, o.timeout_s);
        run_rank(o, r, o.ranks, boot, progress);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    children.push_back(pid);
  }
  std::string error;
  try {
    coordinator.serve(o.timeout_s);
  } catch (const std::exception& e) {
    error = e.what();
    for (pid_t pid : children) kill(pid, SIGKILL);
  }
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    if (error.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      error = fmt::format("netbench: rank {} failed (see its error above)", r);
    }
  }
  if (!error.empty()) throw std::runtime_error(error);
  return merge(o, coordinator.last_round());
}

}  // namespace astral::netbench
