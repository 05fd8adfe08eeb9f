#pragma once
// netbench: measures a network through the NCCL net plugin, without GPUs, the way NCCL's proxy
// drives it: N ranks (local processes, or one per host), host memory, patterns pingpong, stream,
// bidirectional, all-to-all and ring all-reduce. With a sockets baseline it runs the same pattern
// over plain TCP sockets in the same invocation, so the ratio is meaningful on a noisy machine.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace astral::netbench {

enum class Pattern { kPingPong, kStream, kBidirectional, kAllToAll, kAllReduce };
const char* pattern_name(Pattern pattern);
bool parse_pattern(const std::string& text, Pattern* pattern);

struct Options {
  Pattern pattern = Pattern::kStream;
  std::vector<size_t> sizes = {size_t(4) << 20};
  int ranks = 2;
  int iterations = 0;    // per size; 0 = enough to move ~512 MiB (bounded)
  int warmup = -1;       // -1 = a tenth of the iterations (at least 2)
  int window = 8;        // messages in flight per peer (stream, bidirectional)
  int repeat = 1;        // runs per engine and size, interleaved; the median is reported
  bool baseline_sockets = false;
  std::string plugin_path;  // "" = default_net_plugin_path()
  int device = 0;           // plugin device index
  // Non-empty: these plugin devices are fused into a virtual NIC (makeVDevice, at most 4 through
  // the v11 interface netbench drives) and the run uses it instead of `device`.
  std::vector<int> fuse;
  // Across hosts: this process is rank `rank` of `ranks`; rank 0 hosts the coordinator at
  // `coordinator` (host:port). Local mode (rank < 0) forks `ranks` processes on loopback.
  int rank = -1;
  std::string coordinator;
  double timeout_s = 300;   // a rank silent this long fails the run
  std::string token;        // multi-host: the shared secret ("" = launch_token(environment))
  // Non-empty: every rank records its connections and transfers in a trace file here (the
  // plugin's ASTRAL_TRACE_DIR; merge them with `astral trace export DIR`).
  std::string trace_dir;
  bool verbose = false;     // plugin INFO messages to stderr
};

struct Measurement {
  std::string engine;  // "plugin" or "sockets"
  Pattern pattern = Pattern::kStream;
  size_t bytes = 0;
  int ranks = 0;
  int iterations = 0;
  double seconds = 0;  // timed iterations, slowest rank
  // Per iteration at rank 0, microseconds (pingpong: half the round trip).
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
  double gb_per_s = 0;      // see README: per sender (stream), per rank (a2a), algbw (allreduce)
  double bus_gb_per_s = 0;  // all-reduce bus bandwidth (2(N-1)/N x algbw)
  bool verified = false;    // payload checked on every rank
};

// Runs the benchmark; progress lines go to `progress`. Throws std::runtime_error with a one-line
// message (naming the rank and what to do) on failure. In multi-host mode only rank 0 returns
// measurements.
std::vector<Measurement> run(const Options& options,
                             const std::function<void(const std::string&)>& progress);

// ---- launchers -----------------------------------------------------------------------------------
using EnvFn = std::function<const char*(const char*)>;
inline constexpr int kDefaultCoordinatorPort = 29571;  // when MASTER_PORT is unset

// Fills rank, ranks and coordinator from a launcher's environment: Open MPI
// (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/SIZE), Slurm (SLURM_PROCID/NTASKS inside an srun
// step, i.e. with SLURM_STEP_ID set: a batch script's own variables start no multi-host run) or torchrun
// (RANK/WORLD_SIZE); the coordinator at MASTER_ADDR:MASTER_PORT or on the first host of
// SLURM_STEP_NODELIST (else SLURM_NODELIST). Returns false when no launcher variable is set or
// an explicit --rank was given (flags win). Throws one line naming the variables when they
// disagree, rank >= size, or no coordinator can be found.
bool apply_launcher(const EnvFn& env, Options* options);

// The shared secret: ASTRAL_NETBENCH_TOKEN, else the first line of ASTRAL_NETBENCH_TOKEN_FILE (a
// file its owner alone can read). Throws one line saying what to set.
std::string launch_token(const EnvFn& env);

// Slurm's host list syntax: "gpu[01-03,07],login1" -> gpu01 gpu02 gpu03 gpu07 login1.
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

// Parses "8", "4K", "4KiB", "1M", "256MiB", "1G"; false on anything else.
bool parse_size(const std::string& text, size_t* bytes);
std::string format_size(size_t bytes);

}  // namespace astral::netbench
