// The tuner core: settings and inputs at init, Seer's collective model per communicator, the cost
// table per collective, a summary of what it chose at finalize.
#include "tuner/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "astral/seer/ecmp_table.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/nccl_tuner.hpp"
#include "astral/topo/node.hpp"
#include "core/host_view.hpp"
#include "tuner/settings.hpp"

namespace astral::plugin::tuner {
namespace {

constexpr int kCollectives = 5;  // ncclFunc_t values that reach the tuner: Broadcast .. AllReduce
constexpr int kAlgos = seer::kAlgorithms;
constexpr int kProtos = seer::kProtocols;
constexpr int kRing = int(seer::Algorithm::kRing);
constexpr const char* kCollectiveNames[kCollectives] = {"Broadcast", "Reduce", "AllGather",
                                                        "ReduceScatter", "AllReduce"};

// Messages go through the logger NCCL gave this communicator, subsystem TUNING; without one,
// warnings go to stderr and the rest is dropped.
void tuner_log(ncclDebugLogger_t logger, ncclDebugLogLevel level, const std::string& text) {
  if (logger) {
    logger(level, NCCL_INIT | NCCL_TUNING, __FILE__, __LINE__, "TUNER/Astral: %s", text.c_str());
  } else if (level == NCCL_LOG_WARN) {
    std::fprintf(stderr, "TUNER/Astral WARN: %s\n", text.c_str());
  }
}

// ---- inputs, loaded once per process per distinct settings ------------------------------------

struct Inputs {
  Settings settings;
  seer::HardwareSpec hw;                 // with the host's GPU and rail counts when topo knows them
  std::optional<seer::Network> network;  // from ASTRAL_TUNER_NETWORK
  std::string host_note;                 // where the host shape came from
  std::vector<std::string> warnings;
};

// The host's GPU and rail counts from topo, applied to the hardware profile. "live" reads the
// process's host view, the same discovery the net side uses.
std::shared_ptr<const topo::Node> host_node(const std::string& host) {
  if (host != "live")  // inside a training job: never fork (see topo::XmlImport)
    return std::make_shared<const topo::Node>(topo::load_hwloc_xml(host, topo::XmlImport::in_process));
  std::string why;
  auto node = host_view()->node(&why);
  if (!node) throw std::runtime_error(why);
  return node;
}

void apply_host(Inputs& in) {
  const std::string& host = in.settings.host;
  if (host == "off") {
    in.host_note = "host shape from the hardware profile (ASTRAL_TUNER_HOST=off)";
    return;
  }
  try {
    auto node_ptr = host_node(host);
    const topo::Node& node = *node_ptr;
    int gpus = int(node.gpus.size());
    int rails = int(std::count_if(node.rails.begin(), node.rails.end(),
                                  [](const topo::Rail& r) { return !r.nics.empty(); }));
    if (gpus > 0 && rails > 0) {
      in.hw.gpus_per_node = gpus;
      in.hw.nics_per_node = rails;
      in.host_note = fmt::format("host from topo ({}): {} GPUs, {} rails", host, gpus, rails);
    } else {
      in.host_note = fmt::format("host from topo ({}) has {} GPUs and {} rails; using the profile's",
                                 host, gpus, rails);
    }
  } catch (const std::exception& e) {
    if (host != "live") in.warnings.push_back(fmt::format("ASTRAL_TUNER_HOST={}: {}", host, e.what()));
    in.host_note = fmt::format("host topology unavailable ({}); using the hardware profile's", e.what());
  }
}

// The flow simulator's ECMP efficiencies replace the tiers' own. A table belongs to one fabric, so
// it needs that fabric's network; anything wrong is one warning and the tiers' values stay.
void apply_ecmp_table(Inputs& in) {
  const std::string& path = in.settings.ecmp_table;
  if (path.empty()) return;
  if (!in.network) {
    in.warnings.push_back(fmt::format("ASTRAL_TUNER_ECMP_TABLE={}: needs ASTRAL_TUNER_NETWORK, the "
                                      "fabric it was simulated on; ignored", path));
    return;
  }
  try {
    seer::attach_ecmp_table(*in.network, path);
    in.network->ecmp_qps = in.settings.qps;
  } catch (const std::exception& e) {
    // The message names the file already.
    in.warnings.push_back(
        fmt::format("ASTRAL_TUNER_ECMP_TABLE: {}; using the tiers' ECMP efficiency", e.what()));
  }
}

std::shared_ptr<const Inputs> load_inputs(const Settings& settings) {
  auto in = std::make_shared<Inputs>();
  in->settings = settings;
  try {
    in->hw = seer::load_hardware(settings.hardware);
  } catch (const std::exception& e) {
    in->warnings.push_back(fmt::format("ASTRAL_TUNER_HW={}: {}; using h100-sxm", settings.hardware, e.what()));
    in->hw = seer::load_hardware("h100-sxm");
  }
  apply_host(*in);
  if (!settings.network.empty()) {
    try {
      in->network = seer::load_network(settings.network, in->hw);
    } catch (const std::exception& e) {
      in->warnings.push_back(fmt::format("ASTRAL_TUNER_NETWORK={}: {}; using a uniform non-blocking fabric",
                                         settings.network, e.what()));
    }
  }
  apply_ecmp_table(*in);
  return in;
}

// Communicators are created many at a time with the same settings: load (and discover the host)
// once, again only when the settings change. `fresh` tells the caller to report the warnings.
std::shared_ptr<const Inputs> cached_inputs(const Settings& settings, bool* fresh) {
  static std::mutex mutex;
  static std::shared_ptr<const Inputs> cached;
  std::lock_guard lock(mutex);
  *fresh = !cached || !(cached->settings == settings);
  if (*fresh) cached = load_inputs(settings);
  return cached;
}

std::string describe(const seer::Network& net) {
  std::string ecmp;
  if (net.ecmp_table)
    ecmp = fmt::format(", ECMP efficiency simulated ({} entries, {} routing, read at {} QPs)",
                       net.ecmp_table->entries.size(), net.ecmp_table->routing, net.ecmp_qps);
  return fmt::format("{} ({} GPUs and {} rails x {:.0f} Gb/s per host, {} switch tiers{}{})", net.name,
                     net.gpus_per_host, net.rails, net.nic_bandwidth * 8 / 1e9, net.tiers.size(),
                     net.nvls ? ", NVLS" : "", ecmp);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fmt::format("{:g} {}", b, units[u]);
}

}  // namespace

// ---- per-communicator context ------------------------------------------------------------------

class Context {
 public:
  explicit Context(const InitArgs& args) : comm_id(args.comm_id), logger(args.logger) {}

  uint64_t comm_id;
  ncclDebugLogger_t logger;
  std::optional<seer::NcclTunerModel> model;  // empty: disabled, NCCL's table stays untouched
  // NCCL calls getCollInfo for one communicator from one thread at a time: plain counters.
  uint64_t calls = 0;
  std::array<uint64_t, kCollectives * kAlgos * kProtos> chosen{};
  uint64_t chunk_calls = 0;
  bool warned_chunk_input = false;  // one WARN per communicator for inputs the tuner ignores

  void count_choice(int coll, const float* table, int num_algo, int num_proto) {
    int best = -1;
    float best_cost = FLT_MAX;
    for (int a = 0; a < std::min(num_algo, kAlgos); ++a)
      for (int p = 0; p < std::min(num_proto, kProtos); ++p) {
        float c = table[a * num_proto + p];
        if (c >= 0 && c < best_cost) best_cost = c, best = a * kProtos + p;
      }
    if (best >= 0) ++chosen[coll * kAlgos * kProtos + best];
  }
};

EnvLookup process_env() {
  return [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
}

Context* init(const InitArgs& args, const EnvLookup& env) noexcept {
  Context* ctx = new (std::nothrow) Context(args);
  if (!ctx) {
    tuner_log(args.logger, NCCL_LOG_WARN, "out of memory at init; NCCL's own tuning stays in effect");
    return nullptr;
  }
  try {
    const std::string comm = fmt::format("comm {:#x}", args.comm_id);
    std::vector<std::string> warnings;
    Settings settings = parse_settings(env, &warnings);
    for (const auto& w : warnings) tuner_log(args.logger, NCCL_LOG_WARN, w);
    if (!settings.enabled) {
      tuner_log(args.logger, NCCL_LOG_INFO, comm + ": disabled by ASTRAL_TUNER=off; NCCL's own tuning stays in effect");
      return ctx;
    }
    bool fresh = false;
    auto in = cached_inputs(settings, &fresh);
    if (fresh)
      for (const auto& w : in->warnings) tuner_log(args.logger, NCCL_LOG_WARN, w);
    const int ranks = int(std::clamp<std::size_t>(args.n_ranks, 1, 1 << 24));
    const int nodes = int(std::clamp<std::size_t>(args.n_nodes, 1, std::size_t(ranks)));
    seer::Network net = in->network ? *in->network : seer::uniform_network(in->hw, ranks);
    ctx->model.emplace(net, ranks, nodes, args.nccl);

    tuner_log(args.logger, NCCL_LOG_INFO,
        fmt::format("{}: ncclTunerPlugin_v{}, Seer model for {} ranks on {} nodes; hardware {}; network {}; "
                    "{}; latency constants from {}{}",
                    comm, args.abi_version, ranks, nodes, in->hw.name, describe(net), in->host_note,
                    args.nccl ? "NCCL" : "Seer's defaults",
                    args.nvl ? fmt::format("; {} NVLink domains of {}-{} ranks", args.nvl->domains,
                                           args.nvl->min_ranks, args.nvl->max_ranks)
                             : std::string()));
    std::string picks;
    for (double bytes : {1024.0, 65536.0, 1048576.0, 67108864.0, 1073741824.0}) {
      auto best = ctx->model->model().best(seer::Collective::kAllReduce, bytes);
      picks += fmt::format("{}{} {}/{} {:.1f} us", picks.empty() ? "" : ", ", human_bytes(bytes),
                           seer::to_string(best.algorithm), seer::to_string(best.protocol), best.seconds * 1e6);
    }
    tuner_log(args.logger, NCCL_LOG_INFO, comm + ": Seer's AllReduce choices: " + picks);
  } catch (const std::exception& e) {
    ctx->model.reset();
    tuner_log(args.logger, NCCL_LOG_WARN, std::string(e.what()) + "; NCCL's own tuning stays in effect");
  } catch (...) {
    ctx->model.reset();
    tuner_log(args.logger, NCCL_LOG_WARN, "unknown error at init; NCCL's own tuning stays in effect");
  }
  return ctx;
}

ncclResult_t fill_cost_table(Context* ctx, int coll, std::size_t bytes, int num_pipe_ops, float* table,
                             int num_algo, int num_proto) noexcept {
  if (!ctx || !ctx->model) return ncclSuccess;  // disabled: no opinion
  if (!table || coll < 0 || coll >= kCollectives) return ncclInvalidArgument;
  ++ctx->calls;
  if (ctx->model->fill(coll, bytes, table, num_algo, num_proto) == 0) return ncclSuccess;
  if (num_pipe_ops > 1 && num_algo > kRing && num_proto > 0) {
    // NCCL pays a ring's latency once per aggregated operation (the other algorithms batch them):
    // add Seer's one-byte ring cost for each operation after the first.
    float latency[kAlgos * kProtos] = {};
    ctx->model->fill(coll, 1, latency, kAlgos, kProtos);
    for (int p = 0; p < std::min(num_proto, kProtos); ++p) {
      float& entry = table[kRing * num_proto + p];
      if (entry >= 0) entry += float(num_pipe_ops - 1) * latency[kRing * kProtos + p];
    }
  }
  ctx->count_choice(coll, table, num_algo, num_proto);
  return ncclSuccess;
}

ncclResult_t choose(Context* ctx, int coll, std::size_t bytes, bool nvls_supported, int num_pipe_ops,
                    int* algorithm, int* protocol) noexcept {
  if (!ctx || !ctx->model) return ncclSuccess;
  if (!algorithm || !protocol) return ncclInvalidArgument;
  // What a v2 NCCL can run: tree and ring, NVLS when it says so. FLT_MAX marks "enabled, no
  // estimate yet", so an entry Seer does not model is never the cheapest.
  float table[kAlgos * kProtos];
  std::fill(std::begin(table), std::end(table), -1.0f);
  for (int a : {int(seer::Algorithm::kTree), int(seer::Algorithm::kRing)})
    for (int p = 0; p < kProtos; ++p) table[a * kProtos + p] = FLT_MAX;
  if (nvls_supported)
    for (int a : {int(seer::Algorithm::kNvls), int(seer::Algorithm::kNvlsTree)})
      for (int p = 0; p < kProtos; ++p) table[a * kProtos + p] = FLT_MAX;
  if (ncclResult_t res = fill_cost_table(ctx, coll, bytes, num_pipe_ops, table, kAlgos, kProtos);
      res != ncclSuccess)
    return res;
  int best = -1;
  for (int i = 0; i < kAlgos * kProtos; ++i)
    if (table[i] >= 0 && table[i] < FLT_MAX && (best < 0 || table[i] < table[best])) best = i;
  if (best < 0) return ncclSuccess;
  *algorithm = best / kProtos;
  *protocol = best % kProtos;
  return ncclSuccess;
}

std::size_t protocol_grain(int protocol) noexcept {
  switch (protocol) {
    case int(seer::Protocol::kLL): return 16;
    case int(seer::Protocol::kLL128): return 1920;
    case int(seer::Protocol::kSimple): return 512;
    default: return 0;
  }
}

ncclResult_t chunk_size(Context* ctx, int coll, std::size_t bytes, int algorithm, int protocol,
                        int n_channels, std::size_t* chunk_bytes) noexcept {
  if (!ctx) return ncclSuccess;
  if (!chunk_bytes) return ncclInvalidArgument;
  ++ctx->chunk_calls;
  const bool modelled = bytes > 0 && coll >= 0 && coll < kCollectives && algorithm >= 0 &&
                        algorithm < kAlgos && protocol_grain(protocol) > 0 && n_channels > 0;
  if (!modelled) {
    if (!ctx->warned_chunk_input) {
      ctx->warned_chunk_input = true;
      try {
        tuner_log(ctx->logger, NCCL_LOG_WARN,
                  fmt::format("comm {:#x}: getChunkSize(coll {}, nBytes {}, algo {}, proto {}, nChannels {}) "
                              "is outside what the tuner models; NCCL's chunk size {} stays (reported once)",
                              ctx->comm_id, coll, bytes, algorithm, protocol, n_channels, *chunk_bytes));
      } catch (...) {
      }
    }
    return ncclInvalidArgument;
  }
  // Seer's collective model prices whole collectives (alpha-beta per algorithm and protocol); it
  // has no pipelining term that would say a chunk size is better than NCCL's, so NCCL's value
  // stands. Where it gains one, its answer goes here, raised to the protocol grain.
  std::optional<std::size_t> seer_choice;
  if (seer_choice) *chunk_bytes = std::max(*seer_choice, protocol_grain(protocol));
  return ncclSuccess;
}

void finalize(Context* ctx) noexcept {
  if (!ctx) return;
  if (ctx->model) {
    try {
      std::string summary;
      for (int c = 0; c < kCollectives; ++c) {
        std::string row;
        for (int a = 0; a < kAlgos; ++a)
          for (int p = 0; p < kProtos; ++p)
            if (uint64_t n = ctx->chosen[(c * kAlgos + a) * kProtos + p])
              row += fmt::format("{}{}/{} {}", row.empty() ? "" : ", ", seer::to_string(seer::Algorithm(a)),
                                 seer::to_string(seer::Protocol(p)), n);
        if (!row.empty()) summary += fmt::format("; {}: {}", kCollectiveNames[c], row);
      }
      tuner_log(ctx->logger, NCCL_LOG_INFO,
          fmt::format("comm {:#x}: {} getCollInfo calls{}", ctx->comm_id, ctx->calls, summary));
    } catch (...) {
      // A summary that cannot be formatted is not worth failing commDestroy for.
    }
  }
  delete ctx;
}

}  // namespace astral::plugin::tuner
