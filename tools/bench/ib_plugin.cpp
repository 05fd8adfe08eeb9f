// The ib transport's performance targets (issue 13, README "The ib transport"): the plugin's
// per-message cost against a raw verbs loop running the same pattern on the same softhca, in
// the same invocation:
//   8 B pingpong round trip (p50)   plugin <= 1.3x the raw loop
//   4 MiB stream bandwidth          plugin >= 0.9x the raw loop
// The raw side is bench_ib_verbs (next to this program), run on the same fabric, host and device
// as the plugin side; the plugin side is netbench's two local ranks driving libnccl-net-astral.so
// through NCCL's net API with ASTRAL_TRANSPORT=ib over softhca. The sides alternate --repeat
// times; their medians are compared, each side's best run shown beside. softhca's absolute
// speed is context, the ratios are the point.
//
// Usage: bench_ib_plugin [--repeat 5] [--iters 2000] [--messages 64] [--window 4]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "astral/netbench/netbench.hpp"

namespace nb = astral::netbench;
namespace fs = std::filesystem;

namespace {

struct Options {
  int repeat = 5, iters = 2000, messages = 64, window = 4;
};

struct RawFigures {
  double ping_rtt_us = 0, stream_gb_per_s = 0;
  bool verified = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_ib_plugin: %s\nusage: bench_ib_plugin [--repeat N] [--iters N] "
               "[--messages N] [--window N]\n", what.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + ": missing value or unknown option");
    char* end = nullptr;
    long v = std::strtol(argv[++i], &end, 10);
    if (*argv[i] == '\0' || *end != '\0' || v < 1 || v > 1000000)
      usage_error(flag + " '" + argv[i] + "': expected an integer in [1, 1000000]");
    if (flag == "--repeat") o.repeat = int(v);
    else if (flag == "--iters") o.iters = int(v);
    else if (flag == "--messages") o.messages = int(v);
    else if (flag == "--window") o.window = int(std::min(v, 64L));
    else usage_error("unknown option " + flag);
  }
  return o;
}

// Runs bench_ib_verbs on node0/node0 of the fabric and reads its two figures off its report.
bool measure_raw(const Options& o, const std::string& device, RawFigures* raw) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec).parent_path() / "bench_ib_verbs";
  std::string command = exe.string() + " --hosts node0,node0 --device " + device +
                        " --fabric " + ASTRAL_PLUGIN_FABRIC + " --repeat " + std::to_string(o.repeat) +
                        " --iters " + std::to_string(o.iters) + " --messages " +
                        std::to_string(o.messages) + " --window " + std::to_string(o.window);
  FILE* out = popen(command.c_str(), "r");
  if (!out) return false;
  char line[512];
  while (std::fgets(line, sizeof line, out)) {
    std::fputs(line, stderr);
    std::sscanf(line, "  pingpong 8 B: p50 %lf", &raw->ping_rtt_us);
    std::sscanf(line, "  stream 4 MiB: %lf", &raw->stream_gb_per_s);
    if (std::strstr(line, "data checks:   ok")) raw->verified = true;
  }
  int status = pclose(out);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && raw->ping_rtt_us > 0 &&
         raw->stream_gb_per_s > 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

nb::Measurement measure_plugin(nb::Pattern pattern, size_t bytes, int iterations, int window,
                               int repeat) {
  nb::Options o;
  o.pattern = pattern;
  o.sizes = {bytes};
  o.ranks = 2;
  o.iterations = iterations;
  o.window = window;
  o.repeat = repeat;
  auto results = nb::run(o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  for (const auto& m : results)
    if (m.engine == "plugin") return m;
  throw std::runtime_error("netbench returned no plugin measurement");
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  const std::string device = "mlx5_0";  // the IB port of the one-host fabric
  char dir[] = "/tmp/abp-XXXXXX";       // short: softhca's Unix socket paths live under it
  if (!mkdtemp(dir)) usage_error(std::string("cannot create a rendezvous directory: ") + std::strerror(errno));
  // Both sides: the same softhca library, fabric, host and device.
  setenv("SOFTHCA_FABRIC", ASTRAL_PLUGIN_FABRIC, 1);
  setenv("SOFTHCA_DIR", dir, 1);
  setenv("SOFTHCA_HOST", "node0", 1);
  setenv("ASTRAL_TRANSPORT", "ib", 1);
  setenv("ASTRAL_IBVERBS_LIB", ASTRAL_SOFTHCA_LIB, 1);
  setenv("ASTRAL_IB_HCA", ("=" + device).c_str(), 1);
  setenv("ASTRAL_SOCKET_IFNAME", "lo", 1);  // the out-of-band channel
  int rc = 1;
  try {
    // Raw and plugin runs alternate, so that both sides see the same machine: softhca's round
    // trip is bimodal on this 2-core VM (about 55 or 110 us, for both sides, depending on where
    // the four busy threads of two processes land) and the mode can change between runs. The
    // targets are checked on the medians; each side's best run is printed beside them.
    std::vector<double> raw_rtt, raw_gbps, plugin_rtt_us, plugin_gbps;
    bool verified = true;
    Options once = o;
    once.repeat = 1;
    for (int r = 0; r < o.repeat; ++r) {
      RawFigures raw;
      if (!measure_raw(once, device, &raw)) throw std::runtime_error("the raw verbs run failed (see above)");
      nb::Measurement ping = measure_plugin(nb::Pattern::kPingPong, 8, o.iters, 1, 1);
      nb::Measurement stream = measure_plugin(nb::Pattern::kStream, size_t(4) << 20, o.messages,
                                              o.window, 1);
      raw_rtt.push_back(raw.ping_rtt_us);
      raw_gbps.push_back(raw.stream_gb_per_s);
      plugin_rtt_us.push_back(2 * ping.p50_us);  // netbench reports half the round trip
      plugin_gbps.push_back(stream.gb_per_s);
      verified = verified && raw.verified && ping.verified && stream.verified;
    }
    auto best_low = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto best_high = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    double latency = median(plugin_rtt_us) / median(raw_rtt);
    double bandwidth = median(plugin_gbps) / median(raw_gbps);
    std::printf("softhca %s (one host, two processes), median of %d alternating runs (best):\n",
                device.c_str(), o.repeat);
    std::printf("  pingpong 8 B:  plugin p50 %.2f us round trip (%.2f), raw verbs %.2f us (%.2f), "
                "ratio %.2fx (target <= 1.3x) %s\n", median(plugin_rtt_us), best_low(plugin_rtt_us),
                median(raw_rtt), best_low(raw_rtt), latency, latency <= 1.3 ? "ok" : "ABOVE TARGET");
    std::printf("  stream 4 MiB:  plugin %.3f GB/s (%.3f), raw verbs %.3f GB/s (%.3f), ratio %.2fx "
                "(target >= 0.9x) %s\n", median(plugin_gbps), best_high(plugin_gbps),
                median(raw_gbps), best_high(raw_gbps), bandwidth, bandwidth >= 0.9 ? "ok" : "BELOW TARGET");
    std::printf("  data checks:   %s\n", verified ? "ok" : "FAILED");
    rc = verified && latency <= 1.3 && bandwidth >= 0.9 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ib_plugin: %s\n", e.what());
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return rc;
}
