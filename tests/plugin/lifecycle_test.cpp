// NCCL calls init per communicator and dlcloses the library after the last finalize: by then no
// thread of ours may run and nothing of ours may stay open or registered.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "harness.hpp"
#include "softhca_env.hpp"

using namespace astral::test;

namespace {
int count_entries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}
int open_fds() { return count_entries("/proc/self/fd"); }
int threads() { return count_entries("/proc/self/task"); }

// The thread count once it stops falling. pthread_join returns when the kernel clears the
// thread's tid, which it does before it removes the task, so a thread just joined can still be
// listed in /proc/self/task for a moment. A thread that was not joined stays, and is counted.
int threads_after_joins() {
  int n = threads();
  for (int quiet_ms = 0, waited_ms = 0; quiet_ms < 20 && waited_ms < 2000; waited_ms += 2) {
    usleep(2000);
    int now = threads();
    quiet_ms = now < n ? 0 : quiet_ms + 2;
    n = std::min(n, now);
  }
  return n;
}

void one_message(const ncclNet_v11_t& net, void* ctx) {
  CommPair pair = connect_pair(net, ctx);
  exchange_one_message(net, pair);
  net.closeSend(pair.send);
  net.closeRecv(pair.recv);
}
}  // namespace

TEST_CASE("repeated init/finalize cycles, then dlclose, the process runs on",
          "[plugin][lifecycle]") {
  ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "lo");
  // Over ib the verbs provider (softhca here, rdma-core's providers on a real host) stays loaded
  // with threads and descriptors of its own: libibverbs is never unloaded, as under NCCL. So the
  // idle counts are taken after the first cycle; with tcp they equal the counts before.
  const bool ib = std::getenv("ASTRAL_TRANSPORT") && std::string(std::getenv("ASTRAL_TRANSPORT")) == "ib";
  int fds_before = open_fds();
  int threads_before = threads();
  int fds_idle = -1, threads_idle = -1, threads_live = -1;
  {
    LoadedPlugin plugin;
    const ncclNet_v11_t& net = plugin.net();
    auto* live = reinterpret_cast<int (*)()>(
        plugin.symbol("_ZN6astral6plugin3net13live_contextsEv"));
    CHECK(live == nullptr);  // internals are not exported
    for (int cycle = 0; cycle < 20; ++cycle) {
      // Two communicators overlapping, as when a job creates a sub-communicator.
      void* a = plugin.init(cycle);
      void* b = plugin.init(cycle + 1000);
      one_message(net, a);
      REQUIRE(net.finalize(a) == ncclSuccess);
      one_message(net, b);  // the other context is unaffected
      if (threads_live < 0) threads_live = threads();
      CHECK(threads() == threads_live);  // nothing grows from cycle to cycle
      if (!ib) CHECK(threads() == threads_before);
      REQUIRE(net.finalize(b) == ncclSuccess);
      if (threads_idle < 0) threads_idle = threads_after_joins(), fds_idle = open_fds();
      CHECK(threads_after_joins() == threads_idle);  // the last finalize joined every thread of ours
      CHECK(open_fds() == fds_idle);
    }
    // finalize must accept the context of an init that failed (NCCL calls it anyway).
    CHECK(net.finalize(nullptr) == ncclSuccess);
  }  // dlclose
  void* still = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  CHECK(still == nullptr);  // really unloaded: nothing kept it mapped
  if (still) dlclose(still);
  CHECK(open_fds() == (ib ? fds_idle : fds_before));
  CHECK(threads_after_joins() == (ib ? threads_idle : threads_before));
  // And it loads and works again after the unload.
  PluginContext again;
  one_message(again.net, again.ctx);
}

TEST_CASE("a connection NCCL abandons mid-connect is released by the last finalize",
          "[plugin][lifecycle]") {
  ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "lo");
  int fds_before = open_fds();
  {
    LoadedPlugin plugin;
    void* ctx = plugin.init();
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen_comm = nullptr;
    REQUIRE(plugin.net().listen(ctx, 0, handle, &listen_comm) == ncclSuccess);
    void* send_comm = nullptr;
    REQUIRE(plugin.net().connect(ctx, 0, handle, &send_comm, nullptr) == ncclSuccess);
    REQUIRE(send_comm == nullptr);  // in progress, then never polled again
    plugin.net().closeListen(listen_comm);
    REQUIRE(plugin.net().finalize(ctx) == ncclSuccess);
  }
  CHECK(open_fds() == fds_before);
}

TEST_CASE("calls before init fail cleanly", "[plugin][lifecycle]") {
  LoadedPlugin plugin;
  int ndev = -1;
  CHECK(plugin.net().devices(&ndev) == ncclInternalError);
  ncclNetProperties_v11_t props;
  CHECK(plugin.net().getProperties(0, &props) == ncclInternalError);
}

TEST_CASE("no usable interface: zero devices, so NCCL moves on", "[tcp-only][plugin][lifecycle]") {
  ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "=no-such-interface0");
  LoadedPlugin plugin;
  void* ctx = plugin.init();
  int ndev = -1;
  CHECK(plugin.net().devices(&ndev) == ncclSuccess);
  CHECK(ndev == 0);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "ASTRAL_SOCKET_IFNAME matches no up interface") >= 1);
  plugin.net().finalize(ctx);
}

// The ib counterpart: softhca lists devices but none has a port ASTRAL_IB_HCA selects that is
// ACTIVE (mlx5_2's only port is DOWN). No usable device is 0 devices and one INFO line, not an
// error: NCCL then moves on to another transport. [.ib-only]: run by the "plugin: ib: " entries.
TEST_CASE("ib: no ACTIVE port: zero devices and one INFO line, so NCCL moves on",
          "[.ib-only][plugin][lifecycle]") {
  SofthcaEnv env;
  ScopedEnv hca("ASTRAL_IB_HCA", "=mlx5_2");
  LogCapture::clear();
  LoadedPlugin plugin;
  void* ctx = plugin.init();
  int ndev = -1;
  CHECK(plugin.net().devices(&ndev) == ncclSuccess);
  CHECK(ndev == 0);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "NET/IB : no device") == 1);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "ACTIVE IB or RoCE port") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
  INFO(LogCapture::dump());
  plugin.net().finalize(ctx);
}
