#pragma once
// The environment that runs the plugin's ib transport over softhca (tests/softhca): the library
// path, a one-host fabric (every process of a test is that host; its QPs reach each other), a
// rendezvous directory of this test process's own, and short RC timeouts so that a dead peer
// shows within seconds. Children inherit it.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "harness.hpp"

namespace astral::test {

inline std::string softhca_library() { return std::string(SOFTHCA_LIB_DIR) + "/libibverbs.so.1"; }
inline std::string softhca_fabric() { return std::string(PLUGIN_FABRICS) + "/one-host.json"; }

// A short directory per test process (Unix socket paths are at most 107 bytes), removed at exit.
inline const std::string& softhca_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/shca-plugin-" + std::to_string(getpid());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all("/tmp/shca-plugin-" + std::to_string(getpid()), ec);
    });
    return d;
  }();
  return dir;
}

// Sets (for the whole process) what ASTRAL_TRANSPORT=ib over softhca needs.
inline void use_softhca_process_wide() {
  setenv("ASTRAL_TRANSPORT", "ib", 1);
  setenv("ASTRAL_IBVERBS_LIB", softhca_library().c_str(), 1);
  setenv("SOFTHCA_FABRIC", softhca_fabric().c_str(), 1);
  setenv("SOFTHCA_DIR", softhca_dir().c_str(), 1);
  setenv("SOFTHCA_HOST", "node0", 1);
  // 4.096 us * 2^16 = 268 ms per try, 7 retries: a dead peer fails a send within ~2 s.
  setenv("ASTRAL_IB_TIMEOUT", "16", 0);
}

// The same, for one test's scope.
struct SofthcaEnv {
  ScopedEnv transport{"ASTRAL_TRANSPORT", "ib"};
  ScopedEnv lib{"ASTRAL_IBVERBS_LIB", softhca_library().c_str()};
  ScopedEnv fabric{"SOFTHCA_FABRIC", softhca_fabric().c_str()};
  ScopedEnv dir{"SOFTHCA_DIR", softhca_dir().c_str()};
  ScopedEnv host{"SOFTHCA_HOST", "node0"};
  ScopedEnv timeout{"ASTRAL_IB_TIMEOUT", "16"};
  ScopedEnv ifname{"ASTRAL_SOCKET_IFNAME", "lo"};
};

}  // namespace astral::test
