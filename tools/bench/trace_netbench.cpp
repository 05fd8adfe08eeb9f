// The cost of tracing to a training job's network: netbench stream throughput through the net
// plugin with tracing on (ASTRAL_TRACE_DIR: every connection and transfer recorded, per rank)
// against tracing off, side by side in one invocation. Runs alternate on/off (and off/on) so
// the shared machine's noise hits both alike; the median of each is compared.
//
//   bench_trace_netbench [rounds=7]
// Target (issue 4): tracing on >= 0.98x tracing off, for 4 MiB messages (netbench's default)
// and for 64 KiB messages (64x more events per byte moved).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "astral/netbench/netbench.hpp"

namespace nb = astral::netbench;

namespace {

double stream_gb_per_s(size_t bytes, const std::string& trace_dir) {
  nb::Options o;
  o.pattern = nb::Pattern::kStream;
  o.sizes = {bytes};
  o.ranks = 2;
  o.trace_dir = trace_dir;
  double gbps = 0;
  for (const auto& m : nb::run(o, [](const std::string&) {})) {
    if (!m.verified) {
      std::fprintf(stderr, "bench_trace_netbench: payload mismatch\n");
      std::exit(2);
    }
    gbps = m.gb_per_s;
  }
  return gbps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  unsetenv("ASTRAL_TRACE_DIR");  // "off" must really be off
  char tmpl[] = "/tmp/astral-bench-trace-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  bool ok = true;
  for (size_t bytes : {size_t(4) << 20, size_t(64) << 10}) {
    std::vector<double> on, off;
    for (int round = 0; round < rounds; ++round) {
      const std::string dir = root + "/run" + std::to_string(round);
      auto traced = [&] {
        on.push_back(stream_gb_per_s(bytes, dir));
        std::filesystem::remove_all(dir);  // 64 MiB preallocated per rank and run
      };
      if (round % 2) {
        traced();
        off.push_back(stream_gb_per_s(bytes, ""));
      } else {
        off.push_back(stream_gb_per_s(bytes, ""));
        traced();
      }
      std::fprintf(stderr, "round %d/%d %s: off %.3f GB/s, on %.3f GB/s\n", round + 1, rounds,
                   nb::format_size(bytes).c_str(), off.back(), on.back());
    }
    const double ratio = median(on) / median(off);
    const bool met = ratio >= 0.98;
    ok = ok && met;
    std::printf("stream %-8s tracing off %.3f GB/s, on %.3f GB/s (median of %d), ratio %.3fx "
                "(target >= 0.98x) %s\n",
                nb::format_size(bytes).c_str(), median(off), median(on), rounds, ratio,
                met ? "ok" : "BELOW TARGET");
  }
  std::filesystem::remove_all(root);
  return ok ? 0 : 1;
}
