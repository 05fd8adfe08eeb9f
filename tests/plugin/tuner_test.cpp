// The tuner as NCCL drives it: dlopen the built library, resolve ncclTunerPlugin_v5 (and the older
// tables NCCL falls back to), init per communicator, getCollInfo on NCCL's contiguous cost table
// with guard values around it, finalize. The expected costs come from Seer's model in-process.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "abi/tuner_v2.h"
#include "abi/tuner_v3.h"
#include "abi/tuner_v4.h"
#include "abi/tuner_v5.h"
#include "abi/tuner_v6.h"
#include "astral/seer/ecmp_table.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/nccl_tuner.hpp"
#include "harness.hpp"
#include "test_paths.hpp"

using namespace astral::test;
namespace seer = astral::seer;

namespace {

constexpr float kGuard = 4242.5f;
constexpr float kNcclOnly = 1e9f;  // an entry only NCCL estimates (CollNet): never the cheapest

// NCCL's stack table with guard values on both sides, filled as initCollCostTable and
// updateCollCostTable leave it: -1 everywhere, NCCL's estimate where the algorithm is usable.
struct GuardedTable {
  float before[32];
  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  float after[32];

  explicit GuardedTable(bool nvls = true, bool collnet = true) {
    std::fill(std::begin(before), std::end(before), kGuard);
    std::fill(std::begin(after), std::end(after), kGuard);
    for (auto& row : table) std::fill(std::begin(row), std::end(row), float(NCCL_ALGO_PROTO_IGNORE));
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      table[NCCL_ALGO_TREE][p] = 100.0f + p;
      table[NCCL_ALGO_RING][p] = 200.0f + p;
      if (nvls) table[NCCL_ALGO_NVLS][p] = 300.0f + p;
      if (collnet) table[NCCL_ALGO_COLLNET_DIRECT][p] = kNcclOnly;
    }
    table[NCCL_ALGO_TREE][NCCL_PROTO_LL128] = float(NCCL_ALGO_PROTO_IGNORE);  // as NCCL_PROTO=^LL128 on tree
  }
  float** as_nccl_passes_it() { return reinterpret_cast<float**>(table); }
  bool guards_intact() const {
    for (float g : before) if (g != kGuard) return false;
    for (float g : after) if (g != kGuard) return false;
    return true;
  }
  std::pair<int, int> cheapest() const {
    int a_best = -1, p_best = -1;
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p)
        if (table[a][p] >= 0 && (a_best < 0 || table[a][p] < table[a_best][p_best])) a_best = a, p_best = p;
    return {a_best, p_best};
  }
};

// NCCL-like latency constants (µs) handed to v5 init.
ncclTunerConstants_v5_t nccl_constants() {
  ncclTunerConstants_v5_t c{};
  auto d = seer::LatencyConstants::defaults();
  std::memcpy(c.baseLatencies, d.base, sizeof c.baseLatencies);
  std::memcpy(c.hwLatencies, d.hw, sizeof c.hwLatencies);
  for (auto& row : c.llMaxBws) std::fill(std::begin(row), std::end(row), 39.0);
  return c;
}

// The tuner's environment for a test: host shape from the hardware profile, so the expected
// model below is built from the same inputs on every machine.
struct TunerEnv {
  ScopedEnv host{"ASTRAL_TUNER_HOST", "off"};
  ScopedEnv mode{"ASTRAL_TUNER", nullptr};
  ScopedEnv hw{"ASTRAL_TUNER_HW", nullptr};
  ScopedEnv network{"ASTRAL_TUNER_NETWORK", nullptr};
};

struct Tuner {
  LoadedPlugin plugin;
  const ncclTuner_v5_t& v5 = *static_cast<const ncclTuner_v5_t*>(plugin.symbol("ncclTunerPlugin_v5"));

  void* init(size_t ranks, size_t nodes, uint64_t comm = 0xC0FFEE) {
    ncclNvlDomainInfo_v5_t nvl{int(nodes), int(ranks / nodes), int(ranks / nodes)};
    auto constants = nccl_constants();
    void* ctx = nullptr;
    REQUIRE(v5.init(&ctx, comm, ranks, nodes, &LogCapture::logger, &nvl, &constants) == ncclSuccess);
    return ctx;
  }
};

seer::NcclTunerModel expected_model(int ranks, int nodes, const char* network = nullptr) {
  auto hw = seer::load_hardware("h100-sxm");
  auto net = network ? seer::load_network(network, hw) : seer::uniform_network(hw, ranks);
  static const auto constants = seer::LatencyConstants::defaults();
  return seer::NcclTunerModel(net, ranks, nodes, &constants);
}

}  // namespace

TEST_CASE("every tuner table NCCL looks up is exported and complete", "[plugin][tuner]") {
  LoadedPlugin plugin;
  const auto* v5 = static_cast<const ncclTuner_v5_t*>(plugin.symbol("ncclTunerPlugin_v5"));
  const auto* v4 = static_cast<const ncclTuner_v4_t*>(plugin.symbol("ncclTunerPlugin_v4"));
  const auto* v3 = static_cast<const ncclTuner_v3_t*>(plugin.symbol("ncclTunerPlugin_v3"));
  const auto* v2 = static_cast<const ncclTuner_v2_t*>(plugin.symbol("ncclTunerPlugin_v2"));
  REQUIRE(v5);
  REQUIRE(v4);
  REQUIRE(v3);
  REQUIRE(v2);
  for (const char* name : {v5->name, v4->name, v3->name, v2->name}) CHECK(std::string(name) == "Astral");
  CHECK((v5->init && v5->getCollInfo && v5->finalize));
  CHECK((v4->init && v4->getCollInfo && v4->destroy));
  CHECK((v3->init && v3->getCollInfo && v3->destroy));
  CHECK((v2->init && v2->getCollInfo && v2->destroy));
  const auto* v6 = static_cast<const ncclTuner_v6_t*>(plugin.symbol("ncclTunerPlugin_v6"));
  REQUIRE(v6);  // NCCL 2.30 looks it up first
  CHECK(std::string(v6->name) == "Astral");
  CHECK((v6->init && v6->getCollInfo && v6->finalize && v6->getChunkSize));
  // The first four members are v5's: the same calls behind both tables.
  CHECK((void*)v6->getCollInfo == (void*)v5->getCollInfo);
  CHECK((void*)v6->finalize == (void*)v5->finalize);
}

TEST_CASE("v5 getCollInfo writes Seer's costs inside NCCL's table and keeps what NCCL disabled",
          "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  const int ranks = 64, nodes = 8;
  void* ctx = t.init(ranks, nodes);
  REQUIRE(ctx);
  auto model = expected_model(ranks, nodes);
  for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; ++coll) {
    for (size_t bytes = 8; bytes <= (size_t(1) << 32); bytes *= 16) {
      INFO("collective " << coll << ", " << bytes << " bytes");
      GuardedTable g;
      GuardedTable expected;
      model.fill(coll, bytes, &expected.table[0][0], NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS);
      int channels = 0;
      REQUIRE(t.v5.getCollInfo(ctx, ncclFunc_t(coll), bytes, 1, g.as_nccl_passes_it(), NCCL_NUM_ALGORITHMS,
                               NCCL_NUM_PROTOCOLS, 0, &channels) == ncclSuccess);
      CHECK(g.guards_intact());
      CHECK(channels == 0);  // NCCL keeps its channel count
      for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a)
        for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
          INFO("algorithm " << a << ", protocol " << p);
          CHECK(g.table[a][p] == expected.table[a][p]);
          GuardedTable nccl;
          if (nccl.table[a][p] < 0) CHECK(g.table[a][p] == float(NCCL_ALGO_PROTO_IGNORE));
        }
      CHECK(g.table[NCCL_ALGO_COLLNET_DIRECT][NCCL_PROTO_SIMPLE] == kNcclOnly);  // no opinion: kept
      CHECK(g.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] != 202.0f);              // Seer's estimate
    }
  }
  REQUIRE(t.v5.finalize(ctx) == ncclSuccess);
}

TEST_CASE("the entry NCCL will pick is Seer's cheapest algorithm and protocol", "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  for (auto [ranks, nodes] : {std::pair{8, 1}, std::pair{16, 2}, std::pair{1024, 128}}) {
    void* ctx = t.init(ranks, nodes);
    auto model = expected_model(ranks, nodes);
    std::set<std::pair<int, int>> picks;
    for (size_t bytes = 64; bytes <= (size_t(1) << 31); bytes *= 8) {
      INFO(ranks << " ranks on " << nodes << " nodes, AllReduce of " << bytes << " bytes");
      // Everything enabled, NCCL's estimates out of the running: the cheapest is Seer's pick.
      GuardedTable g;
      for (auto& row : g.table) std::fill(std::begin(row), std::end(row), kNcclOnly);
      int channels = 0;
      t.v5.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, g.as_nccl_passes_it(), NCCL_NUM_ALGORITHMS,
                       NCCL_NUM_PROTOCOLS, 0, &channels);
      auto best = model.model().best(seer::Collective::kAllReduce, double(bytes));
      auto [a, p] = g.cheapest();
      CHECK(a == int(best.algorithm));
      CHECK(p == int(best.protocol));
      CHECK(g.table[a][p] == Approx(best.seconds * 1e6).epsilon(1e-5));
      picks.insert({a, p});
    }
    CHECK(picks.size() >= 2);  // small and large messages do not want the same algorithm/protocol
    t.v5.finalize(ctx);
  }
}

TEST_CASE("ASTRAL_TUNER=off leaves NCCL's table untouched", "[plugin][tuner]") {
  TunerEnv env;
  ScopedEnv off{"ASTRAL_TUNER", "off"};
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(16, 2);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "disabled by ASTRAL_TUNER=off") == 1);
  for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(1) << 30}) {
    GuardedTable g, untouched;
    int channels = 0;
    REQUIRE(t.v5.getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, g.as_nccl_passes_it(), NCCL_NUM_ALGORITHMS,
                             NCCL_NUM_PROTOCOLS, 0, &channels) == ncclSuccess);
    CHECK(std::memcmp(&g, &untouched, sizeof g) == 0);
    CHECK(channels == 0);
  }
  REQUIRE(t.v5.finalize(ctx) == ncclSuccess);
}

TEST_CASE("older tables: v4 and v3 fill the table, v2 names Seer's choice", "[plugin][tuner]") {
  TunerEnv env;
  LoadedPlugin plugin;
  const auto& v4 = *static_cast<const ncclTuner_v4_t*>(plugin.symbol("ncclTunerPlugin_v4"));
  const auto& v3 = *static_cast<const ncclTuner_v3_t*>(plugin.symbol("ncclTunerPlugin_v3"));
  const auto& v2 = *static_cast<const ncclTuner_v2_t*>(plugin.symbol("ncclTunerPlugin_v2"));
  void *c4 = nullptr, *c3 = nullptr, *c2 = nullptr;
  REQUIRE(v4.init(32, 4, &LogCapture::logger, &c4) == ncclSuccess);
  REQUIRE(v3.init(32, 4, &LogCapture::logger, &c3) == ncclSuccess);
  REQUIRE(v2.init(32, 4, &LogCapture::logger, &c2) == ncclSuccess);
  auto model = [] {  // v2-v4 hand over no constants: Seer's defaults
    auto hw = seer::load_hardware("h100-sxm");
    return seer::NcclTunerModel(seer::uniform_network(hw, 32), 32, 4);
  }();
  const size_t bytes = 1 << 24;
  GuardedTable expected;
  model.fill(ncclFuncAllReduce, bytes, &expected.table[0][0], NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS);

  GuardedTable g4, g3;
  int channels = 0;
  REQUIRE(v4.getCollInfo(c4, ncclFuncAllReduce, bytes, 1, g4.as_nccl_passes_it(), NCCL_NUM_ALGORITHMS,
                         NCCL_NUM_PROTOCOLS, 1, &channels) == ncclSuccess);
  REQUIRE(v3.getCollInfo(c3, ncclFuncAllReduce, bytes, 1, g3.as_nccl_passes_it(), NCCL_NUM_ALGORITHMS,
                         NCCL_NUM_PROTOCOLS, &channels) == ncclSuccess);
  CHECK(g4.guards_intact());
  CHECK(g3.guards_intact());
  CHECK(std::memcmp(g4.table, expected.table, sizeof g4.table) == 0);
  CHECK(std::memcmp(g3.table, expected.table, sizeof g3.table) == 0);

  for (int nvls : {0, 1}) {
    for (size_t b : {size_t(256), size_t(1) << 30}) {
      int algorithm = NCCL_ALGO_UNDEF, protocol = NCCL_PROTO_UNDEF;
      REQUIRE(v2.getCollInfo(c2, ncclFuncAllReduce, b, 0, nvls, 1, &algorithm, &protocol, &channels) ==
              ncclSuccess);
      INFO("nvls " << nvls << ", " << b << " bytes");
      // Seer's cheapest among what a v2 NCCL runs: tree, ring, NVLS when offered.
      seer::CostTable costs;
      model.model().cost_table(seer::Collective::kAllReduce, double(b), costs);
      int want_a = -1, want_p = -1;
      for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING, NCCL_ALGO_NVLS, NCCL_ALGO_NVLS_TREE}) {
        if (!nvls && (a == NCCL_ALGO_NVLS || a == NCCL_ALGO_NVLS_TREE)) continue;
        for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p)
          if (costs[a][p] >= 0 && (want_a < 0 || costs[a][p] < costs[want_a][want_p])) want_a = a, want_p = p;
      }
      CHECK(algorithm == want_a);
      CHECK(protocol == want_p);
    }
  }
  CHECK(channels == 0);
  CHECK(v4.destroy(c4) == ncclSuccess);
  CHECK(v3.destroy(c3) == ncclSuccess);
  CHECK(v2.destroy(c2) == ncclSuccess);
}

TEST_CASE("odd calls are answered without touching anything", "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  void* ctx = t.init(16, 2);
  int channels = 0;
  GuardedTable g, untouched;
  // A null context (init ran out of memory) and collectives the tuner never sees.
  CHECK(t.v5.getCollInfo(nullptr, ncclFuncAllReduce, 1024, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels) ==
        ncclSuccess);
  CHECK(t.v5.getCollInfo(ctx, ncclFunc_t(7), 1024, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels) == ncclSuccess);
  CHECK(t.v5.getCollInfo(ctx, ncclFunc_t(-1), 1024, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels) == ncclSuccess);
  CHECK(t.v5.getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, nullptr, 7, 3, 0, &channels) == ncclSuccess);
  CHECK(std::memcmp(&g, &untouched, sizeof g) == 0);
  CHECK(t.v5.finalize(nullptr) == ncclSuccess);

  // A narrower table (an NCCL with fewer algorithms): rows past num_algo are never written.
  GuardedTable narrow;
  const int algos = NCCL_ALGO_NVLS;  // tree, ring, CollNet x2
  float* block = &narrow.table[0][0];
  std::fill(block + algos * NCCL_NUM_PROTOCOLS, block + NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS, kGuard);
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) block[NCCL_ALGO_RING * NCCL_NUM_PROTOCOLS + p] = 7.0f;
  t.v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, narrow.as_nccl_passes_it(), algos, NCCL_NUM_PROTOCOLS, 0,
                   &channels);
  CHECK(narrow.guards_intact());
  for (int i = algos * NCCL_NUM_PROTOCOLS; i < NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS; ++i) CHECK(block[i] == kGuard);
  CHECK(narrow.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] != 7.0f);
  t.v5.finalize(ctx);
}

TEST_CASE("aggregated operations pay the ring's latency once each", "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  void* ctx = t.init(64, 8);
  GuardedTable one, eight;
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, one.as_nccl_passes_it(), 7, 3, 0, &channels);
  t.v5.getCollInfo(ctx, ncclFuncAllReduce, 4096, 8, eight.as_nccl_passes_it(), 7, 3, 0, &channels);
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) CHECK(eight.table[NCCL_ALGO_RING][p] > one.table[NCCL_ALGO_RING][p]);
  CHECK(eight.table[NCCL_ALGO_TREE][NCCL_PROTO_LL] == one.table[NCCL_ALGO_TREE][NCCL_PROTO_LL]);
  CHECK(eight.guards_intact());
  t.v5.finalize(ctx);
}

TEST_CASE("init and finalize log what the tuner uses and what it chose", "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(16, 2, 0xABCD);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "comm 0xabcd: ncclTunerPlugin_v5, Seer model for 16 ranks on 2 nodes") == 1);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "ASTRAL_TUNER_HOST=off") == 1);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "Seer's AllReduce choices: 1 KiB ") == 1);
  for (int i = 0; i < 3; ++i) {
    GuardedTable g;
    int channels = 0;
    t.v5.getCollInfo(ctx, ncclFuncAllReduce, size_t(1) << 30, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  }
  t.v5.finalize(ctx);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "comm 0xabcd: 3 getCollInfo calls; AllReduce: ") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
}

TEST_CASE("bad settings warn, name the variable and fall back", "[plugin][tuner]") {
  TunerEnv env;
  ScopedEnv hw{"ASTRAL_TUNER_HW", "/nonexistent/gpu.json"};
  ScopedEnv net{"ASTRAL_TUNER_NETWORK", "no-such-network"};
  ScopedEnv mode{"ASTRAL_TUNER", "sometimes"};
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(16, 2);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_TUNER='sometimes' is not on or off") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_TUNER_HW=/nonexistent/gpu.json") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_TUNER_NETWORK=no-such-network") == 1);
  // Still tuning, with the defaults: the same table as the default model's.
  auto model = expected_model(16, 2);
  GuardedTable g, expected;
  model.fill(ncclFuncAllGather, 1 << 20, &expected.table[0][0], 7, 3);
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncAllGather, 1 << 20, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  CHECK(std::memcmp(g.table, expected.table, sizeof g.table) == 0);
  t.v5.finalize(ctx);
}

TEST_CASE("ASTRAL_TUNER_NETWORK puts the fabric's rails and tiers into the costs", "[plugin][tuner]") {
  TunerEnv env;
  ScopedEnv net{"ASTRAL_TUNER_NETWORK", "astral-same-rail-12k"};
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(1024, 128);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
  auto model = expected_model(1024, 128, "astral-same-rail-12k");
  auto uniform = expected_model(1024, 128);
  GuardedTable g, expected, default_costs;
  model.fill(ncclFuncReduceScatter, size_t(1) << 28, &expected.table[0][0], 7, 3);
  uniform.fill(ncclFuncReduceScatter, size_t(1) << 28, &default_costs.table[0][0], 7, 3);
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncReduceScatter, size_t(1) << 28, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  CHECK(std::memcmp(g.table, expected.table, sizeof g.table) == 0);
  CHECK(std::memcmp(expected.table, default_costs.table, sizeof g.table) != 0);  // the fabric matters
  t.v5.finalize(ctx);
}

namespace {

// An ECMP-efficiency table written for one test and removed after it: ring and all-to-all at 1,024
// GPUs, `one_qp` at 1 QP and `four_qps` at 4.
struct EcmpTableFile {
  std::string path;
  EcmpTableFile(const char* name, int fabric_gpus, double one_qp, double four_qps)
      : path(std::filesystem::temp_directory_path().string() + "/astral-tuner-" + name + "-" +
             std::to_string(getpid()) + ".json") {
    nlohmann::json entries = nlohmann::json::array();
    for (const char* pattern : {"ring", "alltoall"})
      for (int qps : {1, 4})
        entries.push_back({{"pattern", pattern}, {"group_size", 1024}, {"qps", qps}, {"tier", 2},
                           {"efficiency", qps == 1 ? one_qp : four_qps}});
    nlohmann::json doc = {{"format", "astral-ecmp-efficiency"}, {"version", 1},
                          {"fabric", {{"gpus", fabric_gpus}}}, {"hash_model", nlohmann::json::object()},
                          {"entries", entries}};
    std::ofstream(path) << doc.dump();
  }
  ~EcmpTableFile() { std::filesystem::remove(path); }
};

int same_rail_12k_gpus() {
  auto net = seer::load_network("astral-same-rail-12k", seer::load_hardware("h100-sxm"));
  return net.hosts * net.gpus_per_host;
}

// The table Seer would fill for a ReduceScatter of 256 MiB on 1,024 ranks of the fabric, with the
// table read at `qps` (nullptr: the tiers' own ECMP efficiency).
GuardedTable reduce_scatter_costs(const char* table, int qps) {
  auto hw = seer::load_hardware("h100-sxm");
  auto net = seer::load_network("astral-same-rail-12k", hw);
  if (table) {
    seer::attach_ecmp_table(net, table);
    net.ecmp_qps = qps;
  }
  static const auto constants = seer::LatencyConstants::defaults();
  seer::NcclTunerModel model(net, 1024, 128, &constants);
  GuardedTable g;
  model.fill(ncclFuncReduceScatter, size_t(1) << 28, &g.table[0][0], 7, 3);
  return g;
}

GuardedTable tuner_reduce_scatter(Tuner& t) {
  void* ctx = t.init(1024, 128);
  GuardedTable g;
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncReduceScatter, size_t(1) << 28, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  t.v5.finalize(ctx);
  return g;
}

}  // namespace

TEST_CASE("ASTRAL_TUNER_ECMP_TABLE: the simulated efficiencies, at NCCL's QPs per connection",
          "[plugin][tuner]") {
  TunerEnv env;
  EcmpTableFile table("ecmp", same_rail_12k_gpus(), 0.5, 0.9);
  ScopedEnv net{"ASTRAL_TUNER_NETWORK", "astral-same-rail-12k"};
  ScopedEnv ecmp{"ASTRAL_TUNER_ECMP_TABLE", table.path.c_str()};
  ScopedEnv qps{"NCCL_IB_QPS_PER_CONNECTION", nullptr};
  Tuner t;
  LogCapture::clear();
  GuardedTable one_qp = tuner_reduce_scatter(t);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "ECMP efficiency simulated (4 entries, ecmp routing, read at 1 QPs)") == 1);
  GuardedTable expected = reduce_scatter_costs(table.path.c_str(), 1);
  CHECK(std::memcmp(one_qp.table, expected.table, sizeof expected.table) == 0);
  GuardedTable tiers = reduce_scatter_costs(nullptr, 1);
  CHECK(std::memcmp(expected.table, tiers.table, sizeof expected.table) != 0);  // the table matters

  ScopedEnv four{"NCCL_IB_QPS_PER_CONNECTION", "4"};
  GuardedTable four_qps = tuner_reduce_scatter(t);
  GuardedTable expected4 = reduce_scatter_costs(table.path.c_str(), 4);
  CHECK(std::memcmp(four_qps.table, expected4.table, sizeof expected4.table) == 0);
  CHECK(std::memcmp(four_qps.table, one_qp.table, sizeof one_qp.table) != 0);
}

TEST_CASE("a bad or misplaced ECMP table is one warning and the tiers' efficiency", "[plugin][tuner]") {
  TunerEnv env;
  EcmpTableFile other("ecmp-other", 2048, 0.5, 0.5);
  ScopedEnv ecmp{"ASTRAL_TUNER_ECMP_TABLE", other.path.c_str()};
  Tuner t;
  GuardedTable tiers = reduce_scatter_costs(nullptr, 1);
  SECTION("another fabric's table") {
    ScopedEnv net{"ASTRAL_TUNER_NETWORK", "astral-same-rail-12k"};
    LogCapture::clear();
    GuardedTable g = tuner_reduce_scatter(t);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "simulated on a fabric of 2048 GPUs") == 1);
    CHECK(std::memcmp(g.table, tiers.table, sizeof g.table) == 0);
  }
  SECTION("no such file") {
    ScopedEnv net{"ASTRAL_TUNER_NETWORK", "astral-same-rail-12k"};
    ScopedEnv missing{"ASTRAL_TUNER_ECMP_TABLE", "/nonexistent/ecmp.json"};
    LogCapture::clear();
    GuardedTable g = tuner_reduce_scatter(t);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_TUNER_ECMP_TABLE: /nonexistent/ecmp.json: cannot "
                                           "open the ECMP-efficiency table") == 1);
    CHECK(std::memcmp(g.table, tiers.table, sizeof g.table) == 0);
  }
  SECTION("no network to attach it to") {
    LogCapture::clear();
    void* ctx = t.init(16, 2);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "needs ASTRAL_TUNER_NETWORK") == 1);
    t.v5.finalize(ctx);
  }
}

TEST_CASE("repeated init and finalize, communicators alive side by side", "[plugin][tuner]") {
  TunerEnv env;
  Tuner t;
  const auto& v2 = *static_cast<const ncclTuner_v2_t*>(t.plugin.symbol("ncclTunerPlugin_v2"));
  for (int round = 0; round < 50; ++round) {
    void* a = t.init(8, 1, round);
    void* b = t.init(256, 32, round + 1000);
    void* c = nullptr;
    REQUIRE(v2.init(64, 8, &LogCapture::logger, &c) == ncclSuccess);
    REQUIRE(a != b);
    GuardedTable ga, gb;
    int channels = 0, algorithm = -1, protocol = -1;
    t.v5.getCollInfo(a, ncclFuncAllReduce, 1 << 20, 1, ga.as_nccl_passes_it(), 7, 3, 0, &channels);
    t.v5.getCollInfo(b, ncclFuncAllReduce, 1 << 20, 1, gb.as_nccl_passes_it(), 7, 3, 0, &channels);
    v2.getCollInfo(c, ncclFuncBroadcast, 1 << 20, 0, 0, 1, &algorithm, &protocol, &channels);
    CHECK(ga.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] != gb.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]);
    CHECK(algorithm == NCCL_ALGO_RING);  // NCCL broadcasts only with ring
    REQUIRE(t.v5.finalize(b) == ncclSuccess);
    REQUIRE(v2.destroy(c) == ncclSuccess);
    REQUIRE(t.v5.finalize(a) == ncclSuccess);
  }
}

TEST_CASE("ASTRAL_TUNER_HOST takes GPUs and rails per host from topo", "[plugin][tuner]") {
  TunerEnv env;
  const std::string p4d = fixture("hwloc/aws-p4d-topology.xml");  // 8 GPUs, 4 EFA rails
  ScopedEnv host{"ASTRAL_TUNER_HOST", p4d.c_str()};
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(64, 8);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "host from topo (" + p4d + "): 8 GPUs, 4 rails") == 1);
  auto hw = seer::load_hardware("h100-sxm");
  hw.nics_per_node = 4;
  const auto constants = seer::LatencyConstants::defaults();
  seer::NcclTunerModel four_rails(seer::uniform_network(hw, 64), 64, 8, &constants);
  GuardedTable g, expected, eight_rails;
  four_rails.fill(ncclFuncAllReduce, size_t(1) << 30, &expected.table[0][0], 7, 3);
  expected_model(64, 8).fill(ncclFuncAllReduce, size_t(1) << 30, &eight_rails.table[0][0], 7, 3);
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncAllReduce, size_t(1) << 30, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  CHECK(std::memcmp(g.table, expected.table, sizeof g.table) == 0);
  CHECK(g.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] > eight_rails.table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE]);
  t.v5.finalize(ctx);

  ScopedEnv bad{"ASTRAL_TUNER_HOST", "/nonexistent/hwloc.xml"};
  LogCapture::clear();
  t.v5.finalize(t.init(64, 8));
  CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_TUNER_HOST=/nonexistent/hwloc.xml") == 1);
}

TEST_CASE("the default host shape comes from discovering this host, whatever it has", "[plugin][tuner]") {
  TunerEnv env;
  ScopedEnv live{"ASTRAL_TUNER_HOST", nullptr};  // default: live
  Tuner t;
  LogCapture::clear();
  void* ctx = t.init(16, 2);
  // A GPU host reports its GPUs and rails; this CI machine has none and says so. Either way the
  // tuner tunes and nothing is a warning.
  CHECK(LogCapture::count(NCCL_LOG_INFO, "host from topo (live)") +
            LogCapture::count(NCCL_LOG_INFO, "host topology unavailable") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
  GuardedTable g, untouched;
  int channels = 0;
  t.v5.getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, g.as_nccl_passes_it(), 7, 3, 0, &channels);
  CHECK(g.guards_intact());
  CHECK(std::memcmp(g.table, untouched.table, sizeof g.table) != 0);
  t.v5.finalize(ctx);
}
