// With ASTRAL_TEST_TRANSPORT=ib (the "plugin: ib: " CTest entries), the conformance tests of this
// binary run over the ib transport on softhca: the environment is set before any test starts, and
// the plugin_peer processes they start inherit it.
#include <cstdlib>
#include <cstring>

#include "softhca_env.hpp"

namespace {
const bool kIbRun = [] {
  const char* transport = std::getenv("ASTRAL_TEST_TRANSPORT");
  if (!transport || std::strcmp(transport, "ib") != 0) return false;
  astral::test::use_softhca_process_wide();
  // One device, as the tcp runs have on loopback: the IB port (the RoCE one is the [ib] tests').
  setenv("ASTRAL_IB_HCA", "=mlx5_0", 0);
  // Host memory only, as over tcp, also on a machine with nvidia_peermem (a GPU CI runner).
  setenv("ASTRAL_IB_GDR", "0", 0);
  return true;
}();
}  // namespace
