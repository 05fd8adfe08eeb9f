// The plugin's performance targets, measured side by side with plain sockets on this machine:
//   stream of 4 MiB messages      >= 0.9x the sockets baseline (bandwidth)
//   8-byte pingpong latency (p50) <= 1.3x the sockets baseline
// Two local ranks over loopback; each engine runs --repeat times, interleaved, median reported.
// Usage: bench_netbench [repeats=5]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "astral/netbench/netbench.hpp"

namespace nb = astral::netbench;

namespace {
struct Pair {
  nb::Measurement plugin, sockets;
};

Pair measure(nb::Pattern pattern, size_t bytes, int repeat) {
  nb::Options o;
  o.pattern = pattern;
  o.sizes = {bytes};
  o.ranks = 2;
  o.repeat = repeat;
  o.baseline_sockets = true;
  Pair pair;
  for (const auto& m : nb::run(o, [](const std::string& line) {
         std::fprintf(stderr, "%s\n", line.c_str());
       })) {
    (m.engine == "plugin" ? pair.plugin : pair.sockets) = m;
  }
  return pair;
}
}  // namespace

int main(int argc, char** argv) {
  int repeat = argc > 1 ? std::atoi(argv[1]) : 5;
  Pair stream = measure(nb::Pattern::kStream, size_t(4) << 20, repeat);
  Pair ping = measure(nb::Pattern::kPingPong, 8, repeat);
  double bandwidth = stream.plugin.gb_per_s / stream.sockets.gb_per_s;
  double latency = ping.plugin.p50_us / ping.sockets.p50_us;
  std::printf("stream 4 MiB:  plugin %.3f GB/s, sockets %.3f GB/s, ratio %.2fx (target >= 0.9x) %s\n",
              stream.plugin.gb_per_s, stream.sockets.gb_per_s, bandwidth,
              bandwidth >= 0.9 ? "ok" : "BELOW TARGET");
  std::printf("pingpong 8 B:  plugin p50 %.2f us (p99 %.2f), sockets p50 %.2f us (p99 %.2f), "
              "ratio %.2fx (target <= 1.3x) %s\n",
              ping.plugin.p50_us, ping.plugin.p99_us, ping.sockets.p50_us, ping.sockets.p99_us,
              latency, latency <= 1.3 ? "ok" : "ABOVE TARGET");
  bool verified = stream.plugin.verified && ping.plugin.verified;
  return verified && bandwidth >= 0.9 && latency <= 1.3 ? 0 : 1;
}
