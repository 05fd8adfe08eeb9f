// Seer's tuner answer per NCCL getCollInfo call (target <= 1 µs): the exported
// ncclTunerPlugin_v5 entry point of libnccl-net-astral.so (dlopen, as NCCL calls it), the model
// alone in-process, and a tuner that rebuilds the collective model for every call (the naive way),
// side by side in the same run. Per-call cost in thread CPU time over sizes from 8 B to 4 GiB, all
// five tuner collectives. Optional argument: the library path (default: next to the build).
#include <stdlib.h>
#include <time.h>

#include <cstdio>
#include <string>
#include <vector>

#include "abi/tuner_v5.h"
#include "netbench/net_loader.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/nccl_tuner.hpp"

using namespace astral::seer;

namespace {

double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  std::string path = argc > 1 ? argv[1] : astral::netbench::default_net_plugin_path();
  auto lib = astral::netbench::NetPluginLibrary::open(path, &why);
  const auto* v5 = lib ? static_cast<const ncclTuner_v5_t*>(lib->symbol("ncclTunerPlugin_v5")) : nullptr;
  if (!v5) {
    std::fprintf(stderr, "bench_seer_tuner: no ncclTunerPlugin_v5 in '%s' %s\n", path.c_str(), why.c_str());
    return 2;
  }
  setenv("ASTRAL_TUNER_NETWORK", "astral-same-rail-12k", 1);  // the same inputs as the model below
  setenv("ASTRAL_TUNER_HW", "h100-sxm", 1);
  setenv("ASTRAL_TUNER_HOST", "off", 1);

  HardwareSpec hw = load_hardware("h100-sxm");
  Network net = load_network("astral-same-rail-12k", hw);
  const int ranks = 1024, nodes = 128;
  NcclTunerModel tuner(net, ranks, nodes);
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= (size_t(4) << 30); b *= 2) sizes.push_back(b);
  float table[7][3];
  volatile float sink = 0;
  auto reset = [&] {
    for (auto& row : table)
      for (auto& e : row) e = 50.0f;
  };

  const int rounds = 20000;
  double t0 = cpu_now();
  long calls = 0;
  for (int r = 0; r < rounds; ++r)
    for (size_t b : sizes) {
      reset();
      tuner.fill(r % 5, b, &table[0][0], 7, 3);
      sink = sink + table[1][2];
      ++calls;
    }
  const double seer_ns = (cpu_now() - t0) / calls * 1e9;

  void* ctx = nullptr;
  if (v5->init(&ctx, 0xBE7C4, ranks, nodes, nullptr, nullptr, nullptr) != ncclSuccess || !ctx) return 2;
  t0 = cpu_now();
  long plugin_calls = 0;
  int channels = 0;
  for (int r = 0; r < rounds; ++r)
    for (size_t b : sizes) {
      reset();
      v5->getCollInfo(ctx, ncclFunc_t(r % 5), b, 1, reinterpret_cast<float**>(table), 7, 3, 0, &channels);
      sink = sink + table[1][2];
      ++plugin_calls;
    }
  const double plugin_ns = (cpu_now() - t0) / plugin_calls * 1e9;
  v5->finalize(ctx);

  const int naive_rounds = rounds / 10;
  t0 = cpu_now();
  long naive_calls = 0;
  for (int r = 0; r < naive_rounds; ++r)
    for (size_t b : sizes) {
      reset();
      NcclTunerModel fresh(net, ranks, nodes);  // rebuilt per call
      fresh.fill(r % 5, b, &table[0][0], 7, 3);
      sink = sink + table[1][2];
      ++naive_calls;
    }
  const double naive_ns = (cpu_now() - t0) / naive_calls * 1e9;

  std::printf("tuner getCollInfo, %d ranks on %d hosts (Astral same-rail network, H100)\n", ranks, nodes);
  std::printf("  exported ncclTunerPlugin_v5.getCollInfo %8.1f ns/call over %ld calls (%s)\n", plugin_ns,
              plugin_calls, path.c_str());
  std::printf("  seer model alone, in-process            %8.1f ns/call  -> plugin/model %.2fx\n", seer_ns,
              plugin_ns / seer_ns);
  std::printf("  naive (model rebuilt per call)          %8.1f ns/call  -> %.1fx slower than the plugin\n",
              naive_ns, naive_ns / plugin_ns);
  std::printf("  target <= 1000 ns/call (exported entry point): %s\n", plugin_ns <= 1000 ? "met" : "NOT MET");
  return sink < 0;  // keep the work observable
}
