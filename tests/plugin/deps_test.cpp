// What the library brings into a training process: only glibc, libstdc++/libgcc_s and hwloc at
// load time (verbs, CUDA and NVML are reached with dlopen), only NCCL's entry points exported, and
// with LD_PRELOAD alone it points NCCL at itself.
#include <catch2/catch.hpp>
#include <climits>
#include <cstdlib>
#include <set>
#include <sstream>

#include "harness.hpp"
#include "run_process.hpp"

using namespace astral::test;

namespace {

// Library names ("libc.so.6") that `ldd` lists for `path`.
std::set<std::string> ldd_names(const std::string& path) {
  auto r = run_process({"ldd", path}, 60);
  REQUIRE(r.exit_code == 0);
  std::set<std::string> names;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    auto slash = name.rfind('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    if (!name.empty()) names.insert(name);
  }
  return names;
}

bool starts_with_any(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

std::string realpath_of(const std::string& path) {
  char resolved[PATH_MAX];
  REQUIRE(realpath(path.c_str(), resolved));
  return resolved;
}

}  // namespace

TEST_CASE("runtime dependencies: glibc, libstdc++/libgcc_s and hwloc only", "[plugin][deps]") {
  std::set<std::string> allowed_via_hwloc;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    std::string hwloc = std::string(dir) + "/libhwloc.so.15";
    if (access(hwloc.c_str(), R_OK) == 0) allowed_via_hwloc = ldd_names(hwloc);
  }
  for (const auto& name : ldd_names(plugin_path())) {
    INFO(name);
    CHECK_FALSE(starts_with_any(name, {"libfmt", "libcurl", "libibverbs", "libcuda", "libcudart",
                                       "libnvidia-ml", "libnccl", "libssl", "libcrypto"}));
    bool glibc = starts_with_any(name, {"linux-vdso", "ld-linux", "libc.so", "libm.so",
                                        "libdl.so", "libpthread.so", "librt.so"});
    bool cxx = starts_with_any(name, {"libstdc++.so", "libgcc_s.so"});
    bool hwloc = starts_with_any(name, {"libhwloc.so"}) || allowed_via_hwloc.count(name);
    bool sanitizer = ASTRAL_SANITIZED && starts_with_any(name, {"libasan", "libubsan"});
    CHECK((glibc || cxx || hwloc || sanitizer));
  }
}

TEST_CASE("no verbs symbol is imported: libibverbs is reached only through dlopen/dlvsym",
          "[plugin][deps][ib]") {
  auto r = run_process({"nm", "-D", "--undefined-only", plugin_path()}, 60);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  int undefined = 0;
  for (std::string line; std::getline(lines, line);) {
    std::string symbol = line.substr(line.rfind(' ') + 1);
    INFO(symbol);
    CHECK(symbol.find("ibv_") == std::string::npos);
    CHECK(symbol.find("mlx5") == std::string::npos);
    undefined += symbol.rfind("dlvsym", 0) == 0;
  }
  CHECK(undefined == 1);  // the versioned lookup the ib transport resolves verbs with
}

TEST_CASE("only NCCL's entry points are exported", "[plugin][deps]") {
  auto r = run_process({"nm", "-D", "--defined-only", plugin_path()}, 60);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  int tables = 0;
  for (std::string line; std::getline(lines, line);) {
    std::string symbol = line.substr(line.rfind(' ') + 1);
    INFO(symbol);
    CHECK(starts_with_any(symbol, {"ncclNetPlugin_v", "ncclTunerPlugin_v", "ncclProfiler_v"}));
    tables += symbol.rfind("ncclNetPlugin_v", 0) == 0;
  }
  CHECK(tables == 5);  // v12, v11, v10, v9, v8
}

TEST_CASE("LD_PRELOAD alone points NCCL at the library", "[plugin][deps]") {
  std::string self = realpath_of(plugin_path());
  // An ASan-built library preloaded ahead of the ASan runtime needs this switch; it is a no-op
  // otherwise.
  std::string asan = "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0";
  SECTION("unset variables are set to the library's own path") {
    auto r = run_process({ASTRAL_PLUGIN_PROBE, "env"}, 60,
                         {"LD_PRELOAD=" + plugin_path(), asan, "NCCL_NET_PLUGIN=",
                          "NCCL_TUNER_PLUGIN=", "NCCL_PROFILER_PLUGIN="});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "NCCL_NET_PLUGIN=" + self + "\nNCCL_TUNER_PLUGIN=" + self +
                       "\nNCCL_PROFILER_PLUGIN=" + self + "\n");
  }
  SECTION("what the user set is kept") {
    auto r = run_process({ASTRAL_PLUGIN_PROBE, "env"}, 60,
                         {"LD_PRELOAD=" + plugin_path(), asan, "NCCL_NET_PLUGIN=mine",
                          "NCCL_TUNER_PLUGIN=none", "NCCL_PROFILER_PLUGIN="});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "NCCL_NET_PLUGIN=mine\nNCCL_TUNER_PLUGIN=none\nNCCL_PROFILER_PLUGIN=" + self +
                       "\n");
  }
  SECTION("loaded with dlopen instead, it changes nothing") {
    ScopedEnv net("NCCL_NET_PLUGIN", nullptr);
    ScopedEnv tuner("NCCL_TUNER_PLUGIN", nullptr);
    LoadedPlugin plugin;
    CHECK(std::getenv("NCCL_NET_PLUGIN") == nullptr);
    CHECK(std::getenv("NCCL_TUNER_PLUGIN") == nullptr);
  }
}
