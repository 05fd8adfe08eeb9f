// astral netbench: checks a network through the NCCL net plugin without GPUs (latency
// percentiles and bandwidth per pattern), optionally side by side with plain sockets.
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "astral/netbench/netbench.hpp"
#include "command.hpp"

namespace astral::cli {
namespace {

namespace nb = astral::netbench;

struct NetbenchArgs {
  std::string pattern = "stream";
  std::vector<std::string> sizes = {"4M"};
  std::string baseline;
  std::string transport;  // --transport: ASTRAL_TRANSPORT for the plugin in every local rank
  bool json = false;
  nb::Options options;
};

nlohmann::json to_json(const nb::Measurement& m) {
  return {{"engine", m.engine},       {"pattern", nb::pattern_name(m.pattern)},
          {"bytes", m.bytes},         {"ranks", m.ranks},
          {"iterations", m.iterations}, {"seconds", m.seconds},
          {"latency_us", {{"p50", m.p50_us}, {"p90", m.p90_us}, {"p99", m.p99_us}, {"max", m.max_us}}},
          {"gb_per_s", m.gb_per_s},   {"bus_gb_per_s", m.bus_gb_per_s},
          {"verified", m.verified}};
}

void print_table(const NetbenchArgs& args, const std::vector<nb::Measurement>& results) {
  std::map<size_t, const nb::Measurement*> plugin, sockets;
  for (const auto& m : results) (m.engine == "plugin" ? plugin : sockets)[m.bytes] = &m;
  bool latency = args.options.pattern == nb::Pattern::kPingPong;
  bool allreduce = args.options.pattern == nb::Pattern::kAllReduce;
  std::printf("%s, %d ranks%s\n", nb::pattern_name(args.options.pattern), args.options.ranks,
              args.options.rank < 0 ? " on this host (loopback)" : "");
  std::printf("%10s %10s %10s %10s %10s%s", "size", "p50 us", "p99 us", "GB/s",
              allreduce ? "busGB/s" : "", sockets.empty() ? "" : "  | sockets:");
  if (!sockets.empty()) std::printf(" %8s %8s %12s", "p50 us", "GB/s", "ratio");
  std::printf("\n");
  for (const auto& [bytes, m] : plugin) {
    std::printf("%10s %10.1f %10.1f %10.3f %10s", nb::format_size(bytes).c_str(), m->p50_us,
                m->p99_us, m->gb_per_s, allreduce ? fmt::format("{:.3f}", m->bus_gb_per_s).c_str() : "");
    if (auto s = sockets.find(bytes); s != sockets.end()) {
      const nb::Measurement& b = *s->second;
      double ratio = latency ? (b.p50_us > 0 ? m->p50_us / b.p50_us : 0)
                             : (b.gb_per_s > 0 ? m->gb_per_s / b.gb_per_s : 0);
      std::printf("  | %15.1f %8.3f %7.2fx %s", b.p50_us, b.gb_per_s, ratio,
                  latency ? "latency" : "bandwidth");
    }
    if (!m->verified) std::printf("  DATA MISMATCH");
    std::printf("\n");
  }
}

void run_netbench(NetbenchArgs& args, Outcome& outcome) {
  nb::Options& o = args.options;
  if (!args.transport.empty()) {
    if (args.transport != "tcp" && args.transport != "ib" && args.transport != "auto") {
      throw UsageError("--transport '" + args.transport + "' is not tcp, ib or auto");
    }
    // The plugin reads its transport from the environment, as under NCCL; local ranks inherit it.
    setenv("ASTRAL_TRANSPORT", args.transport.c_str(), 1);
  }
  if (!nb::parse_pattern(args.pattern, &o.pattern)) {
    throw UsageError("--pattern '" + args.pattern +
                     "' is not one of pingpong, stream, bidirectional, alltoall, allreduce");
  }
  o.sizes.clear();
  for (const auto& text : args.sizes) {
    size_t bytes = 0;
    if (!nb::parse_size(text, &bytes)) {
      throw UsageError("--size '" + text + "' is not a size such as 8, 64K or 4M (at most 1G)");
    }
    o.sizes.push_back(bytes);
  }
  if (!args.baseline.empty() && args.baseline != "sockets") {
    throw UsageError("--baseline '" + args.baseline + "' is not supported (use: sockets)");
  }
  o.baseline_sockets = args.baseline == "sockets";
  try {
    // srun / mpirun / torchrun: rank, size and coordinator from their variables.
    if (nb::apply_launcher([](const char* name) { return std::getenv(name); }, &o)) {
      std::fprintf(stderr, "netbench: rank %d of %d from the launcher, coordinator %s\n", o.rank, o.ranks,
                   o.coordinator.c_str());
    }
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  if (o.rank >= 0 && o.coordinator.empty()) {
    throw UsageError("--rank needs --coordinator HOST:PORT (rank 0's address)");
  }
  if (o.rank >= o.ranks) throw UsageError("--rank must be below --ranks");
  auto results = nb::run(o, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  });
  if (!o.trace_dir.empty() && o.rank <= 0) {
    std::fprintf(stderr, "netbench: trace files in %s (astral trace export %s -o trace.json)\n",
                 o.trace_dir.c_str(), o.trace_dir.c_str());
  }
  bool verified = true;
  for (const auto& m : results) verified = verified && m.verified;
  if (o.rank > 0) return;  // rank 0 reports for everyone
  if (args.json) {
    nlohmann::json out = {{"pattern", nb::pattern_name(o.pattern)}, {"ranks", o.ranks},
                          {"results", nlohmann::json::array()}};
    for (const auto& m : results) out["results"].push_back(to_json(m));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    print_table(args, results);
  }
  if (!verified) {
    std::fprintf(stderr, "netbench: received data did not match what was sent\n");
    outcome.exit_code = kChecksFailed;
  }
}

void register_netbench(CLI::App& root, Outcome& outcome) {
  auto args = std::make_shared<NetbenchArgs>();
  CLI::App* cmd = root.add_subcommand(
      "netbench",
      "Measure the network through the NCCL net plugin (no GPU needed): local ranks on loopback, "
      "or one rank per host");
  cmd->add_option("--pattern", args->pattern,
                  "pingpong | stream | bidirectional | alltoall | allreduce")
      ->capture_default_str();
  cmd->add_option("--size", args->sizes, "message sizes, e.g. 8,64K,4M (per peer)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--ranks", args->options.ranks, "number of ranks")->capture_default_str();
  cmd->add_option("--iters", args->options.iterations, "timed iterations per size (0 = auto)");
  cmd->add_option("--warmup", args->options.warmup, "untimed iterations first (-1 = auto)");
  cmd->add_option("--window", args->options.window, "messages in flight (stream, bidirectional)")
      ->capture_default_str();
  cmd->add_option("--repeat", args->options.repeat,
                  "runs per engine, interleaved; the median is reported")
      ->capture_default_str();
  cmd->add_option("--baseline", args->baseline,
                  "also run the pattern over plain TCP sockets and print our/baseline ratios "
                  "(value: sockets)");
  cmd->add_option("--plugin", args->options.plugin_path,
                  "net plugin library (default: libnccl-net-astral.so next to astral)");
  cmd->add_option("--device", args->options.device, "plugin device index")->capture_default_str();
  cmd->add_option("--fuse", args->options.fuse,
                  "fuse these plugin devices into a virtual NIC (makeVDevice) and run over it "
                  "(e.g. --fuse 0,1: the two planes of one rail)")
      ->delimiter(',')
      ->expected(2, 4);
  cmd->add_option("--transport", args->transport,
                  "the plugin's transport: tcp, ib or auto (sets ASTRAL_TRANSPORT)");
  cmd->add_option("--rank", args->options.rank,
                  "this host's rank in a multi-host run (needs --coordinator and "
                  "ASTRAL_NETBENCH_TOKEN)");
  cmd->add_option("--coordinator", args->options.coordinator,
                  "HOST:PORT where rank 0 listens for the other ranks");
  cmd->add_option("--timeout", args->options.timeout_s, "seconds before a silent rank fails the run")
      ->capture_default_str();
  cmd->add_option("--trace-dir", args->options.trace_dir,
                  "record every connection and transfer of every rank in trace files under DIR "
                  "(then: astral trace export DIR -o trace.json)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag("--verbose", args->options.verbose, "plugin INFO messages on stderr");
  cmd->callback([args, &outcome] { run_netbench(*args, outcome); });
}

}  // namespace

ASTRAL_COMMAND(netbench, register_netbench);

}  // namespace astral::cli
