// Virtual NICs over ib (makeVDevice): which ports fuse, what NCCL is told about the fused device,
// and, over softhca, connections whose QPs alternate over the members' HCAs, with every byte
// checked, between fused and plain ends in both directions.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "abi/net_v12.h"
#include "harness.hpp"
#include "ib/vnic.hpp"
#include "pattern.hpp"
#include "run_process.hpp"
#include "softhca_tools.hpp"

using namespace astral::test;
namespace ib = astral::plugin::ib;

namespace {

// Two RoCE planes of rail 0 (mlx5_0, mlx5_1, different MTUs), RoCE rail 1 (mlx5_2) and IB rail 0
// (mlx5_3), placed by ASTRAL_IB_HCA's device:port:rail:plane.
struct PlanesEnv : IbEnv {
  ScopedEnv fabric{"SOFTHCA_FABRIC", (std::string(PLUGIN_FABRICS) + "/planes.json").c_str()};
  ScopedEnv hca{"ASTRAL_IB_HCA", "mlx5_0:1:0:0,mlx5_1:1:0:1,mlx5_2:1:1:0,mlx5_3:1:0:2"};
};

// The plugin's virtual NIC of devices 0 and 1 (the two planes of rail 0).
int fuse_planes(const ncclNet_v11_t& net) {
  ncclNetVDeviceProps_v11_t planes{2, {0, 1}};
  int vdev = -1;
  REQUIRE(net.makeVDevice(&vdev, &planes) == ncclSuccess);
  return vdev;
}

CommPair connect_devices(const ncclNet_v11_t& net, void* ctx, int listen_dev, int connect_dev) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  REQUIRE(net.listen(ctx, listen_dev, handle, &listen_comm) == ncclSuccess);
  CommPair pair;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!pair.send || !pair.recv) {
    REQUIRE(net.connect(ctx, connect_dev, handle, &pair.send, nullptr) == ncclSuccess);
    if (!pair.recv) REQUIRE(net.accept(listen_comm, &pair.recv, nullptr) == ncclSuccess);
    REQUIRE(Clock::now() < deadline);
  }
  net.closeListen(listen_comm);
  return pair;
}

// Sizes around the split threshold and odd ones, one and two buffers per receive, every byte
// checked.
void check_transfers(const ncclNet_v11_t& net, CommPair pair) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(65536), size_t(3 << 20) + 7}) {
    INFO(bytes << " bytes");
    std::vector<uint8_t> out(bytes), in(bytes + 64);
    fill_pattern(out.data(), bytes, bytes);
    void* data = in.data();
    size_t size = in.size();
    int tag = 3, received = -1;
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
    REQUIRE(net.isend(pair.send, out.data(), bytes, 3, nullptr, nullptr, &sreq) == ncclSuccess);
    REQUIRE(wait_pair(net, rreq, &received, sreq) == ncclSuccess);
    CHECK(received == int(bytes));
    CHECK(check_pattern(in.data(), bytes, bytes) == SIZE_MAX);
  }
  // A grouped receive: two tags, two buffers, each send lands in its own.
  std::vector<uint8_t> a(100000), b(777), ina(100000), inb(777);
  fill_pattern(a.data(), a.size(), 1);
  fill_pattern(b.data(), b.size(), 2);
  void* data[2] = {ina.data(), inb.data()};
  size_t sizes[2] = {ina.size(), inb.size()};
  int tags[2] = {10, 11};
  void *rreq = nullptr, *sa = nullptr, *sb = nullptr;
  REQUIRE(net.irecv(pair.recv, 2, data, sizes, tags, nullptr, nullptr, &rreq) == ncclSuccess);
  REQUIRE(net.isend(pair.send, b.data(), b.size(), 11, nullptr, nullptr, &sb) == ncclSuccess);
  REQUIRE(net.isend(pair.send, a.data(), a.size(), 10, nullptr, nullptr, &sa) == ncclSuccess);
  int received[2] = {-1, -1};
  REQUIRE(wait_pair(net, rreq, received, sa) == ncclSuccess);
  REQUIRE(wait_request(net, sb, nullptr) == ncclSuccess);
  CHECK((received[0] == 100000 && received[1] == 777));
  CHECK(check_pattern(ina.data(), a.size(), 1) == SIZE_MAX);
  CHECK(check_pattern(inb.data(), b.size(), 2) == SIZE_MAX);
}

}  // namespace

TEST_CASE("makeVDevice's fusion rules: one rail, one link layer, physical devices, NCCL's plane mask",
          "[plugin][ib][units]") {
  auto port = [](const char* name, int rail, int plane, bool ethernet, int speed) {
    ib::IbPort p;
    p.name = name;
    p.rail = rail;
    p.plane = plane;
    p.ethernet = ethernet;
    p.speed_mbps = speed;
    p.gdr = true;
    p.dmabuf = plane != 1;
    return p;
  };
  const std::vector<ib::IbPort> ports = {port("a:1", 0, 0, true, 400000), port("b:1", 0, 1, true, 400000),
                                         port("c:1", 1, 0, true, 400000), port("d:1", 0, 2, false, 200000),
                                         port("e:1", 0, 0, true, 100000)};
  ib::IbDevice d;
  std::string why;
  const int planes[] = {0, 1};
  REQUIRE(ib::fuse_ports(ports, planes, 2, &d, &why));
  CHECK(d.identity.name == "a:1+b:1");
  CHECK(d.identity.speed_mbps == 800000);
  CHECK(d.identity.rail == 0);
  CHECK(d.identity.plane == ((1 << 14) | 0b11));  // never equal to a physical plane
  CHECK(d.gdr);
  CHECK_FALSE(d.dmabuf);  // b:1 cannot: the fused device cannot either
  CHECK(d.members.size() == 2);
  const int same_plane[] = {0, 4};
  REQUIRE(ib::fuse_ports(ports, same_plane, 2, &d, &why));
  CHECK(d.identity.plane == 0);  // one plane: reported as it is
  auto refused = [&](std::vector<int> devs, const char* reason) {
    ib::IbDevice out;
    std::string w;
    INFO(reason);
    CHECK_FALSE(ib::fuse_ports(ports, devs.data(), int(devs.size()), &out, &w));
    CHECK(w.find(reason) != std::string::npos);
  };
  refused({0, 2}, "on rail 1");  // two rails: their traffic would cross rails
  refused({0, 3}, "InfiniBand");
  refused({0, 0}, "named twice");
  refused({0, 5}, "not one of the 5 physical devices");  // a virtual device is not fused again
  refused({0, 1, 4, 0, 1, 4, 0, 1, 4}, "1 to 8");
}

TEST_CASE("softhca makeVDevice: a device fused from two planes reports both and refuses other rails",
          "[plugin][ib]") {
  PlanesEnv env;
  LogCapture::clear();
  PluginContext p;
  int ndev = 0;
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  REQUIRE(ndev == 4);
  ncclNetVDeviceProps_v11_t planes{2, {0, 1}};
  int vdev = -1;
  REQUIRE(p.net.makeVDevice(&vdev, &planes) == ncclSuccess);
  CHECK(vdev == 4);
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  CHECK(ndev == 5);
  int again = -1;
  REQUIRE(p.net.makeVDevice(&again, &planes) == ncclSuccess);
  CHECK(again == 4);  // the same fusion is the same device
  ncclNetProperties_v11_t props{};
  REQUIRE(p.net.getProperties(4, &props) == ncclSuccess);
  CHECK(std::string(props.name) == "mlx5_0:1+mlx5_1:1");
  CHECK(props.vProps.ndevs == 2);
  CHECK((props.vProps.devs[0] == 0 && props.vProps.devs[1] == 1));
  ncclNetProperties_v11_t first{};
  REQUIRE(p.net.getProperties(0, &first) == ncclSuccess);
  CHECK(props.speed == 2 * first.speed);
  CHECK(first.vProps.ndevs == 1);
  // v12 reports the rail, and a plane that no physical device has.
  auto* v12 = static_cast<const ncclNet_v12_t*>(p.plugin.symbol("ncclNetPlugin_v12"));
  REQUIRE(v12);
  ncclNetProperties_v12_t props12{};
  REQUIRE(v12->getProperties(4, &props12) == ncclSuccess);
  CHECK(props12.railId == 0);
  CHECK(props12.planeId == ((1 << 14) | 0b11));
  CHECK(props12.vProps.ndevs == 2);
  for (auto [devs, reason] : {std::pair{ncclNetVDeviceProps_v11_t{2, {0, 2}}, "on rail 1"},
                              std::pair{ncclNetVDeviceProps_v11_t{2, {1, 3}}, "InfiniBand"},
                              std::pair{ncclNetVDeviceProps_v11_t{2, {0, 4}}, "physical"}}) {
    int refused = -1;
    CHECK(p.net.makeVDevice(&refused, &devs) == ncclInvalidUsage);
    CHECK(LogCapture::count(NCCL_LOG_INFO, reason) == 1);
  }
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  CHECK(ndev == 5);  // nothing was added by a refusal
}

TEST_CASE("softhca makeVDevice: ASTRAL_IB_MERGE_NICS=0 fuses nothing", "[plugin][ib]") {
  PlanesEnv env;
  ScopedEnv off("ASTRAL_IB_MERGE_NICS", "0");
  LogCapture::clear();
  PluginContext p;
  ncclNetVDeviceProps_v11_t planes{2, {0, 1}};
  int vdev = -1;
  CHECK(p.net.makeVDevice(&vdev, &planes) == ncclInvalidUsage);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "Skipping makeVDevice: ASTRAL_IB_MERGE_NICS=0") == 1);
  int ndev = 0;
  REQUIRE(p.net.devices(&ndev) == ncclSuccess);
  CHECK(ndev == 4);
}

TEST_CASE("softhca makeVDevice: QPs alternate over the members' HCAs, fused and plain ends both ways",
          "[plugin][ib]") {
  PlanesEnv env;
  ScopedEnv qps("ASTRAL_IB_QPS", "2");
  ScopedEnv split("ASTRAL_IB_SPLIT_DATA_ON_QPS", "1");
  PluginContext p;
  const int vdev = fuse_planes(p.net);
  struct Case {
    int listen_dev, connect_dev;
    size_t qps;  // ASTRAL_IB_QPS per member of the connecting end
  };
  for (Case c : {Case{vdev, vdev, 4}, Case{0, vdev, 4}, Case{vdev, 1, 2}}) {
    INFO("listen on " << c.listen_dev << ", connect from " << c.connect_dev);
    auto from = path_log_size();
    LogCapture::clear();
    CommPair pair = connect_devices(p.net, p.ctx, c.listen_dev, c.connect_dev);
    auto lines = path_log_since(from);
    INFO(LogCapture::dump());
    REQUIRE(lines.size() == 2 * c.qps);
    // RTR order: the connecting side's QPs (it goes first), then the accepting side's, each in
    // QP order. QP q of a fused end is on its member q % 2 and reaches the peer's member
    // q % (the peer's members).
    for (size_t q = 0; q < c.qps; ++q) {
      const auto& sender = lines[q];
      const auto& receiver = lines[c.qps + q];
      INFO(sender.dump() << "\n" << receiver.dump());
      auto member = [&](int dev) { return "mlx5_" + std::to_string(dev == vdev ? int(q % 2) : dev); };
      CHECK(sender["device"] == member(c.connect_dev));
      CHECK(sender["peer"]["device"] == member(c.listen_dev));
      CHECK(receiver["device"] == member(c.listen_dev));
      CHECK(sender["flow_label"] != 0);
    }
    if (c.connect_dev == vdev) CHECK(LogCapture::count(NCCL_LOG_INFO, "qp1 on mlx5_1:1 label") >= 1);
    check_transfers(p.net, pair);
    close_pair(p.net, pair);
  }
}

// Each member's NIC writes its own parts into GPU memory over its own PCIe path, so iflush reads
// through a loopback QP on every member before the data counts as visible.
TEST_CASE("softhca makeVDevice: a fused receive end flushes GPU memory through every member",
          "[plugin][ib]") {
  PlanesEnv env;
  ScopedEnv gdr("ASTRAL_IB_GDR", "1");
  ScopedEnv split("ASTRAL_IB_SPLIT_DATA_ON_QPS", "1");
  PluginContext p;
  const int vdev = fuse_planes(p.net);
  ncclNetProperties_v11_t props{};
  REQUIRE(p.net.getProperties(vdev, &props) == ncclSuccess);
  CHECK(props.ptrSupport == (NCCL_PTR_HOST | NCCL_PTR_CUDA));
  auto from = path_log_size();
  CommPair pair = connect_devices(p.net, p.ctx, vdev, vdev);
  std::set<std::string> loopback_devices;
  for (const auto& l : path_log_since(from)) {
    if (l["qpn"] == l["dest_qpn"]) loopback_devices.insert(l["device"].get<std::string>());
  }
  CHECK(loopback_devices == std::set<std::string>{"mlx5_0", "mlx5_1"});
  std::vector<uint8_t> device(1 << 20);
  void* rmh = nullptr;
  REQUIRE(p.net.regMr(pair.recv, device.data(), device.size(), NCCL_PTR_CUDA, &rmh) == ncclSuccess);
  receive_into(p.net, pair, device.data(), rmh, device.size(), 8);
  CHECK(check_pattern(device.data(), device.size(), 8) == SIZE_MAX);
  void* data = device.data();
  int bytes = int(device.size());
  void* flush = nullptr;
  REQUIRE(p.net.iflush(pair.recv, 1, &data, &bytes, &rmh, &flush) == ncclSuccess);
  REQUIRE(flush != nullptr);
  REQUIRE(wait_request(p.net, flush, nullptr, 10) == ncclSuccess);
  p.net.deregMr(pair.recv, rmh);
  close_pair(p.net, pair);
}

// What tools/rdma-check runs on two hosts with multi-plane NICs, on softhca: netbench over a
// virtual NIC of two planes, every message verified; a fusion across rails is refused by name.
TEST_CASE("astral netbench --fuse runs over a virtual NIC, and a refused fusion is one clear error",
          "[plugin][ib][netbench]") {
  PlanesEnv env;  // the ranks netbench starts inherit it
  ScopedEnv path_log("SOFTHCA_PATH_LOG", (softhca_dir() + "/netbench-path.jsonl").c_str());
  auto r = run_process({ASTRAL_CLI_BIN, "netbench", "--transport", "ib", "--ranks", "2", "--fuse",
                        "0,1", "--pattern", "stream", "--size", "3M", "--iters", "20", "--json"},
                       120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto out = nlohmann::json::parse(r.out);
  REQUIRE(out["results"].size() == 1);
  CHECK(out["results"][0]["verified"] == true);
  std::set<std::string> devices;
  std::ifstream log(softhca_dir() + "/netbench-path.jsonl");
  for (std::string line; std::getline(log, line);) {
    devices.insert(nlohmann::json::parse(line)["device"].get<std::string>());
  }
  CHECK(devices == std::set<std::string>{"mlx5_0", "mlx5_1"});  // both members carried QPs
  auto refused = run_process({ASTRAL_CLI_BIN, "netbench", "--transport", "ib", "--ranks", "2",
                              "--fuse", "0,2", "--pattern", "stream", "--size", "1M"},
                             60);
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("refused to fuse devices 0,2") != std::string::npos);
}
