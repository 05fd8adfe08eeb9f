// NCCL 2.30's view of the library: the tables it binds first (net v12, tuner v6, profiler v6),
// v12's moved property layout with rail and plane, setNetAttr before every connect/accept poll
// and from the progress thread while transfers run, getChunkSize at many sizes, and the bad
// inputs of each (one WARN naming the input, a clean ncclResult_t).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "abi/net_v11.h"
#include "abi/net_v12.h"
#include "abi/tuner_v6.h"
#include "core/net.hpp"
#include "astral/plugin/observer.hpp"
#include "harness.hpp"
#include "run_process.hpp"

using namespace astral::test;

namespace {

struct V12 {
  ScopedEnv ifname{"ASTRAL_SOCKET_IFNAME", "lo"};
  LoadedPlugin plugin;
  const ncclNet_v12_t& net = *static_cast<const ncclNet_v12_t*>(plugin.symbol("ncclNetPlugin_v12"));
  void* ctx = nullptr;

  explicit V12(int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF) {
    ncclNetCommConfig_v12_t config{traffic_class};
    if (net.init(&ctx, 0x230, &config, &LogCapture::logger, nullptr) != ncclSuccess)
      throw std::runtime_error("v12 init failed: " + LogCapture::dump());
  }
  ~V12() { net.finalize(ctx); }
};

// NCCL's connect-time hints for a collective connection (reference §1.6).
ncclNetAttr_v12_t connect_hints(int flows) {
  ncclNetAttr_v12_t a;
  a.sendCommAttr = {4, 1, flows, 1};
  a.recvCommAttr = {4, 1, flows, 1};
  a.op = a.algo = a.proto = uint32_t(NCCL_NET_ATTR_UNDEF);
  return a;
}

}  // namespace

TEST_CASE("NCCL 2.30's lookup binds net v12, tuner v6 and profiler v6", "[plugin][abi][nccl230]") {
  auto r = run_process({ASTRAL_PLUGIN_PROBE, "nccl230", plugin_path()}, 60,
                       {"ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "net=v12 tuner=v6 profiler=v6\n");
}

TEST_CASE("v12 properties fill the 128-byte layout, rail and plane included", "[plugin][abi][nccl230]") {
  V12 p;
  int ndev = 0;
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  REQUIRE(ndev == 1);
  struct {
    ncclNetProperties_v12_t props;
    unsigned char guard[64];
  } buffer;
  std::memset(&buffer, 0xA5, sizeof buffer);  // NCCL passes an uninitialised stack struct
  REQUIRE(p.net.getProperties(0, &buffer.props) == ncclSuccess);
  for (unsigned char g : buffer.guard) REQUIRE(g == 0xA5);
  const auto& v12 = buffer.props;
  CHECK(std::string(v12.name) == device0_name());
  CHECK(v12.ptrSupport == NCCL_PTR_HOST);
  CHECK(v12.vProps.ndevs == 1);
  CHECK(v12.vProps.devs[0] == 0);
  // The fields after vProps sit 16 bytes further on than in v11: a v11 fill would leave them 0xA5.
  CHECK(v12.maxP2pBytes > 0);
  CHECK(v12.maxP2pBytes <= size_t(NCCL_MAX_NET_SIZE_BYTES));
  CHECK(v12.maxCollBytes == v12.maxP2pBytes);
  CHECK(v12.maxMultiRequestSize == 1);
  // Loopback has no RDMA NIC behind it: no rail; no fabric planes known: undefined. Over ib,
  // softhca serves no sysfs, so its port joins no NIC of the host model either.
  CHECK(v12.railId == NCCL_NET_ID_UNDEF);
  CHECK(v12.planeId == NCCL_NET_ID_UNDEF);

  const auto& v11 = *static_cast<const ncclNet_v11_t*>(p.plugin.symbol("ncclNetPlugin_v11"));
  ncclNetProperties_v11_t p11;
  REQUIRE(v11.getProperties(0, &p11) == ncclSuccess);
  CHECK(p11.maxP2pBytes == v12.maxP2pBytes);
  CHECK(p11.speed == v12.speed);
  CHECK(p11.guid == v12.guid);

  LogCapture::clear();
  CHECK(p.net.getProperties(1, &buffer.props) != ncclSuccess);
  CHECK(p.net.getProperties(-3, &buffer.props) != ncclSuccess);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "device 1 does not exist") == 1);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "device -3 does not exist") == 1);
}

TEST_CASE("v12 connects with setNetAttr before every poll and from a second thread while data moves",
          "[plugin][abi][nccl230]") {
  V12 p;
  auto hints = connect_hints(2);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
  void *send = nullptr, *recv = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!send || !recv) {
    // NCCL's proxy service thread sets the hints first thing before each connect/accept poll.
    REQUIRE(p.net.setNetAttr(p.ctx, &hints) == ncclSuccess);
    if (!send) REQUIRE(p.net.connect(p.ctx, 0, handle, &send, nullptr) == ncclSuccess);
    REQUIRE(p.net.setNetAttr(p.ctx, &hints) == ncclSuccess);
    if (!recv) REQUIRE(p.net.accept(listen_comm, &recv, nullptr) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  REQUIRE(p.net.closeListen(listen_comm) == ncclSuccess);

  // The progress thread's transfer-time hints race the service thread's connect-time ones.
  std::atomic<bool> stop{false};
  std::thread service([&] {
    auto h = connect_hints(4);
    while (!stop.load()) p.net.setNetAttr(p.ctx, &h);
  });
  struct Joiner {  // a failed REQUIRE unwinds past a joinable thread otherwise (std::terminate)
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, service};
  for (int i = 0; i < 200; ++i) {
    ncclNetAttr_v12_t xfer = connect_hints(1);
    xfer.op = 1u << 4;     // AllReduce
    xfer.algo = 1u << 1;   // ring
    xfer.proto = 1u << 2;  // simple
    REQUIRE(p.net.setNetAttr(p.ctx, &xfer) == ncclSuccess);
    uint64_t out = 0x1234000000000000ull + uint64_t(i), in = 0;
    void* data = &in;
    size_t size = sizeof in;
    int tag = 1;
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(p.net.irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
    REQUIRE(p.net.isend(send, &out, sizeof out, 1, nullptr, nullptr, &sreq) == ncclSuccess);
    REQUIRE(rreq);
    REQUIRE(sreq);
    const ncclNet_v11_t& as_v11 = *reinterpret_cast<const ncclNet_v11_t*>(&p.net);
    REQUIRE(wait_pair(as_v11, rreq, nullptr, sreq) == ncclSuccess);
    REQUIRE(in == out);
  }
  stop = true;
  service.join();
  REQUIRE(p.net.closeSend(send) == ncclSuccess);
  REQUIRE(p.net.closeRecv(recv) == ncclSuccess);
}

TEST_CASE("v12 bad input: negative traffic class and hints NCCL never sends get one WARN each",
          "[plugin][abi][nccl230]") {
  LogCapture::clear();
  V12 p(-5);  // init still succeeds: the transport's default class is used
  CHECK(LogCapture::count(NCCL_LOG_WARN, "traffic class -5") == 1);

  auto hints = connect_hints(2);
  hints.sendCommAttr.maxFlowsPerPeer = -7;
  CHECK(p.net.setNetAttr(p.ctx, &hints) == ncclSuccess);  // NCCL ignores the result anyway
  CHECK(LogCapture::count(NCCL_LOG_WARN, "sendCommAttr.maxFlowsPerPeer = -7") == 1);
  // All undefined (NCCL's initialiser) is normal and quiet.
  auto undefined = connect_hints(NCCL_NET_ATTR_UNDEF);
  undefined.sendCommAttr = undefined.recvCommAttr = {-1, -1, -1, -1};
  CHECK(p.net.setNetAttr(p.ctx, &undefined) == ncclSuccess);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "setNetAttr") == 1);
  // A context NCCL never got from init.
  int not_a_context = 0;
  CHECK(p.net.setNetAttr(&not_a_context, &hints) == ncclSuccess);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "unknown net context") == 1);
  // CUDA and DMA-BUF memory on a host-only transport: a clear error, not a crash.
  {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen_comm = nullptr;
    REQUIRE(p.net.listen(p.ctx, 0, handle, &listen_comm) == ncclSuccess);
    void *send = nullptr, *recv = nullptr;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!send || !recv) {
      if (!send) REQUIRE(p.net.connect(p.ctx, 0, handle, &send, nullptr) == ncclSuccess);
      if (!recv) REQUIRE(p.net.accept(listen_comm, &recv, nullptr) == ncclSuccess);
      REQUIRE(Clock::now() < deadline);
    }
    char buffer[64];
    void* mh = reinterpret_cast<void*>(1);
    CHECK(p.net.regMr(send, buffer, sizeof buffer, NCCL_PTR_CUDA, &mh) != ncclSuccess);
    CHECK(mh == nullptr);
    CHECK(p.net.regMrDmaBuf(recv, buffer, sizeof buffer, NCCL_PTR_DMABUF, 0, 3, &mh) != ncclSuccess);
    // Memory the device does not offer: tcp offers host memory only, ib here no GPU memory.
    CHECK(LogCapture::count(NCCL_LOG_WARN, ib_run() ? "GPU memory at" : "supports NCCL_PTR_HOST only") == 2);
    REQUIRE(p.net.regMr(recv, buffer, sizeof buffer, NCCL_PTR_HOST, &mh) == ncclSuccess);
    REQUIRE(mh != nullptr);
    void* flush = reinterpret_cast<void*>(1);
    void* data = buffer;
    int size = sizeof buffer;
    CHECK(p.net.iflush(recv, 1, &data, &size, &mh, &flush) == ncclSuccess);
    CHECK(flush == nullptr);  // sockets write host memory: nothing to flush
    CHECK(p.net.deregMr(recv, mh) == ncclSuccess);
    p.net.closeListen(listen_comm);
    p.net.closeSend(send);
    p.net.closeRecv(recv);
  }
}

TEST_CASE("ASTRAL_TRANSPORT=ib on a host without RDMA: 0 devices and one INFO line, no WARN",
          "[plugin][abi][nccl230][ib]") {
  // The real rdma-core here has no device (no RDMA in the kernel: ENOSYS); a library that is not
  // there at all must read the same way.
  for (const char* lib : {"", "/nonexistent/libibverbs.so.1"}) {
    ScopedEnv transport("ASTRAL_TRANSPORT", "ib");
    ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "lo");
    ScopedEnv verbs("ASTRAL_IBVERBS_LIB", *lib ? lib : nullptr);
    ScopedEnv fabric("SOFTHCA_FABRIC", nullptr);
    LoadedPlugin plugin;
    const auto& v12 = *static_cast<const ncclNet_v12_t*>(plugin.symbol("ncclNetPlugin_v12"));
    LogCapture::clear();
    void* ctx = nullptr;
    ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    REQUIRE(v12.init(&ctx, 1, &config, &LogCapture::logger, nullptr) == ncclSuccess);
    int ndev = -1;
    CHECK(v12.devices(&ndev) == ncclSuccess);
    CHECK(ndev == 0);
    CHECK(LogCapture::count(NCCL_LOG_INFO, "NET/IB : no device") == 1);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "") == 0);
    INFO(LogCapture::dump());
    CHECK(v12.finalize(ctx) == ncclSuccess);
  }
}

TEST_CASE("tuner v6 getChunkSize keeps NCCL's value, never fails, and warns once on inputs it ignores",
          "[plugin][tuner][nccl230]") {
  ScopedEnv host("ASTRAL_TUNER_HOST", "off");
  LoadedPlugin plugin;
  const auto& v6 = *static_cast<const ncclTuner_v6_t*>(plugin.symbol("ncclTunerPlugin_v6"));
  LogCapture::clear();
  void* ctx = nullptr;
  REQUIRE(v6.init(&ctx, 0x66, 64, 8, &LogCapture::logger, nullptr, nullptr) == ncclSuccess);
  REQUIRE(ctx);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "ncclTunerPlugin_v6") == 1);
  // NCCL's defaults (reference §2.3) for every modelled collective, algorithm and protocol.
  const size_t nccl_chunk[NCCL_NUM_PROTOCOLS] = {32768, 576000, 2 << 20};
  const size_t grain[NCCL_NUM_PROTOCOLS] = {NCCL_PROTO_GRAIN_LL, NCCL_PROTO_GRAIN_LL128,
                                            NCCL_PROTO_GRAIN_SIMPLE};
  for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; ++coll)
    for (int algo = 0; algo < NCCL_NUM_ALGORITHMS; ++algo)
      for (int proto = 0; proto < NCCL_NUM_PROTOCOLS; ++proto)
        for (size_t bytes = 1; bytes <= (size_t(1) << 34); bytes *= 8) {
          size_t chunk = nccl_chunk[proto];
          REQUIRE(v6.getChunkSize(ctx, ncclFunc_t(coll), bytes, algo, proto, 1, &chunk) == ncclSuccess);
          // Seer's model has no chunk-size answer yet: NCCL's value stands (and is >= the grain).
          CHECK(chunk == nccl_chunk[proto]);
          CHECK(chunk >= grain[proto]);
        }
  CHECK(LogCapture::count(NCCL_LOG_WARN, "getChunkSize") == 0);

  size_t chunk = 4096;
  CHECK(v6.getChunkSize(ctx, ncclFuncAllReduce, 0, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1, &chunk) == ncclSuccess);
  CHECK(chunk == 4096);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "nBytes 0") == 1);
  CHECK(v6.getChunkSize(ctx, ncclFuncAllReduce, 0, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1, &chunk) == ncclSuccess);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "getChunkSize") == 1);  // once per communicator
  CHECK(v6.finalize(ctx) == ncclSuccess);

  REQUIRE(v6.init(&ctx, 0x67, 64, 8, &LogCapture::logger, nullptr, nullptr) == ncclSuccess);
  CHECK(v6.getChunkSize(ctx, ncclFuncAllReduce, 1 << 20, 42, NCCL_PROTO_SIMPLE, 1, &chunk) == ncclSuccess);
  CHECK(v6.getChunkSize(ctx, ncclFuncAllReduce, 1 << 20, NCCL_ALGO_RING, 9, 1, &chunk) == ncclSuccess);
  CHECK(chunk == 4096);
  CHECK(LogCapture::count(NCCL_LOG_WARN, "algo 42") == 1);
  CHECK(v6.getChunkSize(ctx, ncclFuncAllReduce, 1 << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1, nullptr) ==
        ncclSuccess);
  CHECK(v6.finalize(ctx) == ncclSuccess);
  // A null context (init ran out of memory) is a no-op, not a crash.
  CHECK(v6.getChunkSize(nullptr, ncclFuncAllReduce, 1 << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1, &chunk) ==
        ncclSuccess);
}

namespace {
namespace net = astral::plugin::net;

// What the transport saw of the hints: at connection set-up and at each post.
std::vector<int> g_connect_flows;
std::vector<uint32_t> g_post_ops;

class HintRecorder final : public astral::plugin::NetObserver {
  void on_connected(const astral::plugin::ConnectionInfo& c) noexcept override {
    g_connect_flows.push_back(c.hint_max_flows);
  }
  void on_posted(const astral::plugin::TransferInfo& t) noexcept override { g_post_ops.push_back(t.op_hint); }
};
}  // namespace

TEST_CASE("the transport sees the communicator's setNetAttr hints when it connects and when it posts",
          "[plugin][nccl230]") {
  ScopedEnv ifname("ASTRAL_SOCKET_IFNAME", "lo");
  astral::plugin::set_net_observer_factory(
      [](uint64_t) -> std::shared_ptr<astral::plugin::NetObserver> { return std::make_shared<HintRecorder>(); });
  g_connect_flows.clear();
  g_post_ops.clear();
  void* ctx = nullptr;
  REQUIRE(net::init(&ctx, 0x231, NCCL_NET_TRAFFIC_CLASS_UNDEF, nullptr, nullptr) == ncclSuccess);
  net::NetAttr hints;
  hints.send_max_flows = 3;
  hints.recv_max_flows = 5;
  REQUIRE(net::set_net_attr(ctx, hints) == ncclSuccess);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *listen = nullptr, *send = nullptr, *recv = nullptr;
  REQUIRE(net::listen(ctx, 0, handle, &listen) == ncclSuccess);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!send || !recv) {
    if (!send) REQUIRE(net::connect(ctx, 0, handle, -1, &send) == ncclSuccess);
    if (!recv) REQUIRE(net::accept(listen, &recv) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  REQUIRE(g_connect_flows.size() == 2);
  CHECK(((g_connect_flows[0] == 3 && g_connect_flows[1] == 5) || (g_connect_flows[0] == 5 && g_connect_flows[1] == 3)));

  // A p2p op's hints: algo/proto are stale in NCCL's struct; the op reaches the post.
  hints.op = 1u << 6;  // Send
  hints.algo = 1u << 1;
  REQUIRE(net::set_net_attr(ctx, hints) == ncclSuccess);
  char out[8] = "hint", in[8] = {};
  void* data[1] = {in};
  size_t sizes[1] = {sizeof in};
  int tags[1] = {0};
  void *rr = nullptr, *sr = nullptr;
  REQUIRE(net::irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rr) == ncclSuccess);
  REQUIRE(net::isend(send, out, sizeof out, 0, nullptr, nullptr, &sr) == ncclSuccess);
  for (void* r : {rr, sr}) {
    int done = 0;
    while (!done) REQUIRE(net::test(r, &done, nullptr) == ncclSuccess);
  }
  REQUIRE(g_post_ops.size() == 2);
  CHECK(g_post_ops[0] == (1u << 6));
  CHECK(g_post_ops[1] == (1u << 6));
  CHECK(std::string(in) == "hint");
  net::close_send(send);
  net::close_recv(recv);
  net::close_listen(listen);
  net::finalize(ctx);
  astral::plugin::set_net_observer_factory(nullptr);
}
