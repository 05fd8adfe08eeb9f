// The library as NCCL sees it: loadable with dlopen, the versioned tables NCCL 2.19-2.28 look
// up, members NCCL calls unconditionally present, properties NCCL's topology code relies on.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "abi/net_v10.h"
#include "abi/net_v11.h"
#include "abi/net_v8.h"
#include "abi/net_v9.h"
#include "harness.hpp"
#include "run_process.hpp"

using namespace astral::test;

namespace {
// Calls getProperties of one table into a buffer with guard bytes behind the struct, so a write
// past the version's layout is caught.
template <typename Props, typename Table>
Props properties_with_guard(const Table& table, int dev) {
  struct {
    Props props;
    unsigned char guard[64];
  } buffer;
  std::memset(&buffer, 0xA5, sizeof buffer);
  REQUIRE(table.getProperties(dev, &buffer.props) == ncclSuccess);
  for (unsigned char g : buffer.guard) REQUIRE(g == 0xA5);
  return buffer.props;
}
}  // namespace

TEST_CASE("every net table NCCL looks up is exported and complete", "[plugin][abi]") {
  LoadedPlugin plugin;
  const auto* v11 = static_cast<const ncclNet_v11_t*>(plugin.symbol("ncclNetPlugin_v11"));
  const auto* v10 = static_cast<const ncclNet_v10_t*>(plugin.symbol("ncclNetPlugin_v10"));
  const auto* v9 = static_cast<const ncclNet_v9_t*>(plugin.symbol("ncclNetPlugin_v9"));
  const auto* v8 = static_cast<const ncclNet_v8_t*>(plugin.symbol("ncclNetPlugin_v8"));
  REQUIRE(v11);
  REQUIRE(v10);
  REQUIRE(v9);
  REQUIRE(v8);
  CHECK(std::string(v11->name) == "Astral");
  CHECK(std::string(v10->name) == "Astral");
  CHECK(std::string(v8->name) == "Astral");
  // NCCL checks only getDeviceMr, irecvConsumed, makeVDevice, setNetAttr for NULL (§1.5).
  const void* required_v11[] = {
      (void*)v11->init,      (void*)v11->devices,  (void*)v11->getProperties, (void*)v11->listen,
      (void*)v11->connect,   (void*)v11->accept,   (void*)v11->regMr,         (void*)v11->regMrDmaBuf,
      (void*)v11->deregMr,   (void*)v11->isend,    (void*)v11->irecv,         (void*)v11->iflush,
      (void*)v11->test,      (void*)v11->closeSend, (void*)v11->closeRecv,    (void*)v11->closeListen,
      (void*)v11->finalize};
  for (const void* member : required_v11) CHECK(member != nullptr);
  const void* required_v8[] = {(void*)v8->init,  (void*)v8->devices, (void*)v8->getProperties,
                               (void*)v8->listen, (void*)v8->connect, (void*)v8->accept,
                               (void*)v8->isend, (void*)v8->irecv,   (void*)v8->test,
                               (void*)v8->closeSend, (void*)v8->closeRecv, (void*)v8->closeListen};
  for (const void* member : required_v8) CHECK(member != nullptr);
  // Internals are hidden: no core symbol is visible to dlsym.
  CHECK(plugin.symbol("_ZN6astral6plugin3net4initEPPvmiPFv17ncclDebugLogLevelmPKciS5_zEPF12ncclResult_tS1_iS1_lS1_E") == nullptr);
}

TEST_CASE("properties describe the device in every table layout", "[plugin][abi]") {
  PluginContext p;
  int ndev = 0;
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  REQUIRE(ndev == 1);  // ASTRAL_SOCKET_IFNAME=lo; over ib ASTRAL_IB_HCA==mlx5_0

  auto v11 = properties_with_guard<ncclNetProperties_v11_t>(p.net, 0);
  CHECK(std::string(v11.name) == device0_name());
  CHECK(v11.pciPath == nullptr);  // loopback is not on PCI; softhca serves no sysfs
  CHECK(v11.ptrSupport == NCCL_PTR_HOST);
  CHECK(v11.speed > 0);
  CHECK(v11.maxComms > 0);
  CHECK(v11.maxRecvs == 8);
  CHECK(v11.maxP2pBytes > 0);
  CHECK(v11.maxP2pBytes <= size_t(NCCL_MAX_NET_SIZE_BYTES));
  CHECK(v11.maxP2pBytes <= size_t(INT32_MAX));  // test() reports sizes as int
  CHECK(v11.netDeviceType == NCCL_NET_DEVICE_HOST);
  CHECK(v11.netDeviceVersion == NCCL_NET_DEVICE_INVALID_VERSION);
  CHECK(v11.vProps.ndevs == 1);
  CHECK(v11.vProps.devs[0] == 0);
  CHECK(v11.maxMultiRequestSize == 1);

  const auto& v10 = *static_cast<const ncclNet_v10_t*>(p.plugin.symbol("ncclNetPlugin_v10"));
  auto p10 = properties_with_guard<ncclNetProperties_v10_t>(v10, 0);
  CHECK(std::string(p10.name) == device0_name());
  CHECK(p10.maxRecvs == v11.maxRecvs);
  CHECK(p10.maxP2pBytes == v11.maxP2pBytes);
  CHECK(p10.vProps.ndevs == 1);

  const auto& v9 = *static_cast<const ncclNet_v9_t*>(p.plugin.symbol("ncclNetPlugin_v9"));
  auto p9 = properties_with_guard<ncclNetProperties_v9_t>(v9, 0);
  CHECK(p9.speed == v11.speed);
  CHECK(p9.guid == v11.guid);

  const auto& v8 = *static_cast<const ncclNet_v8_t*>(p.plugin.symbol("ncclNetPlugin_v8"));
  auto p8 = properties_with_guard<ncclNetProperties_v8_t>(v8, 0);
  CHECK(std::string(p8.name) == device0_name());
  CHECK(p8.port == v11.port);
  CHECK(p8.maxRecvs == v11.maxRecvs);
  CHECK(p8.netDeviceType == NCCL_NET_DEVICE_HOST);

  ncclNetProperties_v11_t bad;
  CHECK(p.net.getProperties(1, &bad) != ncclSuccess);
  CHECK(p.net.getProperties(-1, &bad) != ncclSuccess);
}

TEST_CASE("a plain C program loads the library and resolves every table", "[plugin][abi]") {
  auto r = run_process({ASTRAL_PLUGIN_PROBE, "load", plugin_path()}, 60,
                       {"ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "v11=Astral v10=Astral v9=Astral v8=Astral\n");
}

TEST_CASE("the legacy tables drive a connection too", "[plugin][abi]") {
  ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "lo");
  LoadedPlugin plugin;
  const auto& v8 = *static_cast<const ncclNet_v8_t*>(plugin.symbol("ncclNetPlugin_v8"));
  REQUIRE(v8.init(&LogCapture::logger) == ncclSuccess);
  REQUIRE(v8.init(&LogCapture::logger) == ncclSuccess);  // repeated init is harmless
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  REQUIRE(v8.listen(0, handle, &listen_comm) == ncclSuccess);
  void *send = nullptr, *recv = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!send || !recv) {
    if (!send) REQUIRE(v8.connect(0, handle, &send, nullptr) == ncclSuccess);
    if (!recv) REQUIRE(v8.accept(listen_comm, &recv, nullptr) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  REQUIRE(v8.closeListen(listen_comm) == ncclSuccess);
  char out[100] = "legacy int sizes", in[128] = {};
  void* data = in;
  int size = sizeof in, tag = 3;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(v8.irecv(recv, 1, &data, &size, &tag, nullptr, &rreq) == ncclSuccess);
  REQUIRE(v8.isend(send, out, sizeof out, 3, nullptr, &sreq) == ncclSuccess);
  REQUIRE(rreq);
  REQUIRE(sreq);
  // Both requests are tested, as NCCL's progress thread does: over ib the send moves only when
  // its own request is tested (it waits there for the receiver's clear-to-send).
  int rdone = 0, sdone = 0, got = 0;
  while (!rdone || !sdone) {
    if (!rdone) REQUIRE(v8.test(rreq, &rdone, &got) == ncclSuccess);
    if (!sdone) REQUIRE(v8.test(sreq, &sdone, nullptr) == ncclSuccess);
    REQUIRE(Clock::now() < deadline + std::chrono::seconds(20));
  }
  CHECK(got == int(sizeof out));
  CHECK(std::string(in) == "legacy int sizes");
  CHECK(v8.isend(send, out, -1, 3, nullptr, &sreq) != ncclSuccess);
  REQUIRE(v8.closeSend(send) == ncclSuccess);
  REQUIRE(v8.closeRecv(recv) == ncclSuccess);
  // v8 has no finalize: the process-wide context stays until the library is unloaded.
}
