// The ib transport: its pure parts (ASTRAL_IB_HCA, GID choice, metadata checks, link speed) and,
// over softhca (tests/softhca), device discovery, RoCE addressing and QoS as the RTR path log
// shows them, multi-QP transfers, and each injected fault turning into an error within a bound.
// The rest of the conformance suite runs over ib as the "plugin: ib: " CTest entries.
#include <dlfcn.h>
#include <sys/socket.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "harness.hpp"
#include "ib/hca.hpp"
#include "ib/hca_filter.hpp"
#include "ib/planning.hpp"
#include "ib/wire.hpp"
#include "pattern.hpp"
#include "run_process.hpp"
#include "softhca_env.hpp"
#include "softhca_tools.hpp"

using namespace astral::test;
namespace ib = astral::plugin::ib;

namespace {

ibv_gid gid_of(std::initializer_list<uint8_t> tail) {
  ibv_gid g{};
  size_t i = 16 - tail.size();
  for (uint8_t b : tail) g.raw[i++] = b;
  return g;
}

ib::QpMeta good_meta() {
  ib::QpMeta m{};
  m.magic = ib::kMetaMagic;
  m.version = ib::kMetaVersion;
  m.qps = 2;
  m.qpn[0] = 0x100;
  m.qpn[1] = 0x101;
  m.members = 1;
  m.member[0].mtu = IBV_MTU_4096;
  m.ethernet = 1;
  return m;
}

// Posts one receive and one send of `bytes` and tests both until one fails or both are done,
// within `bound_s`. A fault may fail only one end: RC tells a side with nothing posted nothing.
std::pair<ncclResult_t, ncclResult_t> transfer_until_error(const ncclNet_v11_t& net, CommPair pair,
                                                          size_t bytes, double bound_s) {
  std::vector<uint8_t> out(bytes, 7), in(bytes);
  void* data = in.data();
  size_t size = in.size();
  int tag = 1;
  void *rreq = nullptr, *sreq = nullptr;
  ncclResult_t r = net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq);
  ncclResult_t s = net.isend(pair.send, out.data(), out.size(), 1, nullptr, nullptr, &sreq);
  auto deadline = Clock::now() + std::chrono::duration<double>(bound_s);
  bool rdone = r != ncclSuccess || !rreq, sdone = s != ncclSuccess || !sreq;
  while ((!rdone || !sdone) && r == ncclSuccess && s == ncclSuccess) {
    REQUIRE(Clock::now() < deadline);
    int done = 0;
    if (!rdone && ((r = net.test(rreq, &done, nullptr)) != ncclSuccess || done)) rdone = true;
    done = 0;
    if (!sdone && ((s = net.test(sreq, &done, nullptr)) != ncclSuccess || done)) sdone = true;
  }
  return {r, s};
}

// Waits until the plugin logged `text` at `level` (its async-event thread runs on its own).
bool wait_for_log(int level, const std::string& text, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (LogCapture::count(level, text) == 0) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("ASTRAL_IB_HCA takes NCCL_IB_HCA's syntax", "[plugin][ib][units]") {
  auto all = ib::HcaFilter::parse("");
  CHECK(all.accepts("mlx5_0", 1));
  auto prefix = ib::HcaFilter::parse("mlx5_1,mlx5_3:2");
  CHECK(prefix.accepts("mlx5_1", 1));
  CHECK(prefix.accepts("mlx5_10", 1));  // prefix match, as NCCL's default
  CHECK(prefix.accepts("mlx5_3", 2));
  CHECK_FALSE(prefix.accepts("mlx5_3", 1));
  CHECK_FALSE(prefix.accepts("mlx5_0", 1));
  auto exact = ib::HcaFilter::parse("=mlx5_1");
  CHECK(exact.accepts("mlx5_1", 1));
  CHECK_FALSE(exact.accepts("mlx5_10", 1));
  auto exclude = ib::HcaFilter::parse("^=mlx5_0:1");
  CHECK_FALSE(exclude.accepts("mlx5_0", 1));
  CHECK(exclude.accepts("mlx5_0", 2));
  CHECK(exclude.accepts("mlx5_00", 1));
  auto rails = ib::HcaFilter::parse("mlx5_2:1:3:0");  // 2.30's dev:port:rail:plane
  CHECK(rails.accepts("mlx5_2", 1));
  CHECK_FALSE(rails.accepts("mlx5_2", 2));
  // ... whose rail and plane place the port (NCCL 2.30.7's railId / planeId).
  int rail = -1, plane = -1;
  rails.place("mlx5_2", 1, &rail, &plane);
  CHECK((rail == 3 && plane == 0));
  auto partial = ib::HcaFilter::parse("=mlx5_0:1:5,mlx5_1:1:x:2");
  rail = plane = -1;
  partial.place("mlx5_0", 1, &rail, &plane);
  CHECK((rail == 5 && plane == -1));  // no plane given: the node model's stays
  rail = plane = 7;
  partial.place("mlx5_1", 1, &rail, &plane);
  CHECK((rail == 7 && plane == 2));  // a rail that is not a number is ignored
  rail = plane = -1;
  ib::HcaFilter::parse("^mlx5_2:1:3:0").place("mlx5_2", 1, &rail, &plane);
  CHECK((rail == -1 && plane == -1));  // an exclusion list places nothing
}

TEST_CASE("the accepting side's trace path is the connecting side's plan, with its IB DLIDs",
          "[plugin][ib][units]") {
  ib::PlanMessage message{};
  message.magic = ib::kPlanMagic;
  message.qps = 3;
  message.sl = 4;
  message.policy = uint8_t(ib::PathPolicy::kSpread);
  for (int q = 0; q < 3; ++q) message.path_index[q] = uint8_t(q + 1);
  ib::IbPort local;
  local.port = 1;
  local.rail = 5;
  local.plane = 1;
  ib::QpMeta peer = good_meta();
  peer.member[0].lid = 8;
  peer.member[0].lmc = 1;  // owns LIDs 8 and 9: path indices wrap within the LMC as at RTR
  std::strcpy(peer.host, "beta");
  const ib::ConnectionPlan plan =
      ib::plan_from_message(message, false, ib::single_device(local), peer);
  const astral::trace::NetPath& p = plan.trace_path;
  CHECK(p.transport == "ib");
  CHECK(p.link_layer == "IB");
  CHECK(p.policy == "spread");
  CHECK(p.source == "the connecting side's plan");
  CHECK((p.rail == 5 && p.plane == 1 && p.sl == 4 && p.gid_index == -1));
  REQUIRE(p.qps.size() == 3);
  CHECK(p.qps[0].dlid == 9);
  CHECK(p.qps[1].dlid == 8);
  CHECK(p.qps[2].dlid == 9);
  CHECK(p.qps[1].path_index == 2);
  CHECK(p.qps[1].device.empty());  // one port: no per-QP device
  CHECK(plan.text.find("-> beta") != std::string::npos);

  // Both ends fused: QP q runs from this end's member q % 2 to the peer's member q % 2, whose
  // own base LID its DLID counts from.
  peer.members = 2;
  peer.member[1] = peer.member[0];
  peer.member[1].lid = 20;
  peer.member[1].lmc = 2;
  ib::IbPort second = local;
  second.name = "mlx5_1:1";
  local.name = "mlx5_0:1";
  second.plane = 2;
  const std::vector<ib::IbPort> ports = {local, second};
  const int devs[] = {0, 1};
  ib::IbDevice fused;
  std::string why;
  REQUIRE(ib::fuse_ports(ports, devs, 2, &fused, &why));
  const ib::ConnectionPlan both = ib::plan_from_message(message, false, fused, peer);
  REQUIRE(both.trace_path.qps.size() == 3);
  CHECK(both.trace_path.qps[0].dlid == 9);   // member 0: 8 + (1 & 1)
  CHECK(both.trace_path.qps[1].dlid == 22);  // member 1: 20 + (2 & 3)
  CHECK(both.trace_path.qps[2].dlid == 9);   // member 0: 8 + (3 & 1)
  CHECK(both.trace_path.qps[0].device == "mlx5_0:1");
  CHECK(both.trace_path.qps[1].device == "mlx5_1:1");
  CHECK(both.text.find("qp1 on mlx5_1:1 dlid 22") != std::string::npos);
}

TEST_CASE("RoCE GID choice follows NCCL's index, family and version rules", "[plugin][ib][units]") {
  std::vector<ib::GidCandidate> table = {
      {gid_of({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}), IBV_GID_TYPE_ROCE_V1},
      {gid_of({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}), IBV_GID_TYPE_ROCE_V2},
      {gid_of({0xff, 0xff, 10, 1, 0, 1}), IBV_GID_TYPE_ROCE_V1},
      {gid_of({0xff, 0xff, 10, 1, 0, 1}), IBV_GID_TYPE_ROCE_V2},
      {gid_of({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}), IBV_GID_TYPE_ROCE_V2},
  };
  table[4].gid.raw[0] = 0xfd;  // a global IPv6 address
  astral::plugin::IbConfig config;
  CHECK(ib::choose_gid_index(table, config) == 3);  // RoCEv2, IPv4-mapped
  config.addr_family = AF_INET6;
  CHECK(ib::choose_gid_index(table, config) == 4);  // RoCEv2, global IPv6 (not link-local)
  config.addr_family = AF_INET;
  config.roce_version = 1;
  CHECK(ib::choose_gid_index(table, config) == 2);
  config.gid_index = 1;
  CHECK(ib::choose_gid_index(table, config) == 1);  // an explicit index wins
  CHECK(ib::choose_gid_index({}, astral::plugin::IbConfig{}) == 0);
}

TEST_CASE("a clear-to-send entry's check catches any field read stale", "[plugin][ib][units]") {
  ib::CtsEntry e{};
  e.addr[0] = 0x7f0000001000;
  e.size[0] = 4096;
  e.rkey[0][0] = 0x1234;
  e.rkey[0][1] = 0x5678;  // a fused receiver: a key per member
  e.tag[0] = 7;
  e.count = 1;
  e.seq = 65;
  e.check = ib::cts_check(e);
  CHECK(ib::cts_check(e) == e.check);  // the check itself is not an input
  // A torn read: the new seq with any one 8-byte word of the previous entry (here zeros).
  for (size_t word = 0; word < sizeof e / 8 - 1; ++word) {
    ib::CtsEntry torn = e;
    auto* words = reinterpret_cast<uint64_t*>(&torn);
    if (words[word] == 0) continue;
    words[word] = 0;
    if (word == offsetof(ib::CtsEntry, count) / 8) torn.check = e.check;  // keep the check word
    INFO("word " << word);
    CHECK(ib::cts_check(torn) != torn.check);
  }
  ib::CtsEntry next = e;
  next.seq = 66;
  CHECK(ib::cts_check(next) != e.check);
}

TEST_CASE("QP metadata from a peer is checked field by field", "[plugin][ib][units]") {
  std::string why;
  CHECK(ib::check_meta(good_meta(), true, &why));
  auto bad = [&](auto mutate, const char* field) {
    ib::QpMeta m = good_meta();
    mutate(m);
    std::string w;
    INFO(field);
    CHECK_FALSE(ib::check_meta(m, true, &w));
    CHECK(w.find(field) != std::string::npos);
  };
  bad([](ib::QpMeta& m) { m.magic = 0x41414141; }, "magic");
  bad([](ib::QpMeta& m) { m.version = 9; }, "version");
  bad([](ib::QpMeta& m) { m.qps = 0; }, "qps");
  bad([](ib::QpMeta& m) { m.qps = 17; }, "qps");
  bad([](ib::QpMeta& m) { m.member[0].mtu = 9; }, "mtu");
  bad([](ib::QpMeta& m) { m.ethernet = 0; }, "link layer");
  bad([](ib::QpMeta& m) { m.qpn[1] = 0x1000000; }, "qpn[1]");
  bad([](ib::QpMeta& m) { m.member[0].lmc = 8; }, "lmc");
  bad([](ib::QpMeta& m) { m.members = 0; }, "members");
  bad([](ib::QpMeta& m) { m.members = 9; }, "members");
  // A fused peer: every member it names is checked, the ones past `members` are not.
  bad([](ib::QpMeta& m) { m.members = 2; }, "member 1: mtu");
  {
    ib::QpMeta m = good_meta();
    m.members = 2;
    m.member[1].mtu = IBV_MTU_1024;
    m.member[2].mtu = 77;  // unused
    CHECK(ib::check_meta(m, true, &why));
  }
  bad([](ib::QpMeta& m) { std::memset(m.host, 'x', sizeof m.host); }, "host name");
  ib::PlanMessage plan{};
  plan.magic = ib::kPlanMagic;
  plan.qps = 2;
  CHECK(ib::check_plan(plan, 2, &why));
  CHECK_FALSE(ib::check_plan(plan, 3, &why));
  plan.flow_label[1] = 0x100000;
  CHECK_FALSE(ib::check_plan(plan, 2, &why));
  CHECK(why.find("flow_label[1]") != std::string::npos);
  plan.flow_label[1] = 0;
  plan.sl = 16;
  CHECK_FALSE(ib::check_plan(plan, 2, &why));
  CHECK(why.find("service level") != std::string::npos);
  ib::QpMeta ibm = good_meta();
  ibm.ethernet = 0;
  CHECK_FALSE(ib::check_meta(ibm, false, &why));  // an IB peer needs a LID
  ibm.member[0].lid = 4;
  CHECK(ib::check_meta(ibm, false, &why));
  CHECK(ib::port_speed_mbps(2, 64) == 200000);  // 4X HDR
  CHECK(ib::port_speed_mbps(1, 128) == 100000);  // 1X NDR
  CHECK(ib::port_speed_mbps(0, 0) == 0);
  auto imm = ib::decode_imm(ib::encode_imm(63, 7, 16));
  CHECK((imm.fifo_slot == 63 && imm.slot == 7 && imm.parts == 16));
}

TEST_CASE("softhca: ACTIVE ports become devices and ASTRAL_IB_HCA selects them", "[plugin][ib]") {
  IbEnv env;
  {
    PluginContext p;
    int ndev = 0;
    REQUIRE(p.net.devices(&ndev) == ncclSuccess);
    REQUIRE(ndev == 2);  // mlx5_2's port is DOWN
    ncclNetProperties_v11_t props{};
    REQUIRE(p.net.getProperties(0, &props) == ncclSuccess);
    CHECK(std::string(props.name) == "mlx5_0:1");
    CHECK(props.speed == 200000);
    CHECK(props.ptrSupport == NCCL_PTR_HOST);
    CHECK(props.maxRecvs == 8);
    REQUIRE(p.net.getProperties(1, &props) == ncclSuccess);
    CHECK(std::string(props.name) == "mlx5_1:1");
  }
  for (auto [filter, count] : {std::pair{"=mlx5_1", 1}, {"^mlx5_0", 1}, {"mlx5_0:2", 0}}) {
    ScopedEnv hca("ASTRAL_IB_HCA", filter);
    LogCapture::clear();
    PluginContext p;
    int ndev = -1;
    REQUIRE(p.net.devices(&ndev) == ncclSuccess);
    INFO(filter << "\n" << LogCapture::dump());
    CHECK(ndev == count);
  }
}

TEST_CASE("softhca RoCE: GID, SL, TC and QP count reach the QPs and split messages arrive whole",
          "[plugin][ib]") {
  IbEnv env;
  ScopedEnv hca("ASTRAL_IB_HCA", "=mlx5_1");
  ScopedEnv sl("ASTRAL_IB_SL", "3");
  ScopedEnv tc("ASTRAL_IB_TC", "106");
  ScopedEnv qps("ASTRAL_IB_QPS", "4");
  ScopedEnv split("ASTRAL_IB_SPLIT_DATA_ON_QPS", "1");
  ScopedEnv paths("ASTRAL_IB_PATHS", "spread");
  auto from = path_log_size();
  LogCapture::clear();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx);
  auto lines = path_log_since(from);
  INFO(LogCapture::dump());
  REQUIRE(lines.size() == 8);  // 4 QPs at each end
  // softhca numbers QPs in creation order: the connecting side's four come first.
  std::sort(lines.begin(), lines.end(),
            [](const auto& a, const auto& b) { return a["qpn"].template get<int>() < b["qpn"].template get<int>(); });
  std::set<int> sender_sports, receiver_sports;
  for (const auto& l : lines) {
    INFO(l.dump());
    CHECK(l["device"] == "mlx5_1");
    CHECK(l["sgid_index"] == 2);  // the IPv4-mapped RoCEv2 entry, not index 0 or 1
    CHECK(l["gid_type"] == "RoCEv2");
    CHECK(l["sl"] == 3);
    CHECK(l["traffic_class"] == 106);
    CHECK(l["flow_label"] != 0);  // spread: a chosen label, not NCCL's 0
    CHECK(l["udp_sport_from"] == "flow_label");
    (&l < &lines[4] ? sender_sports : receiver_sports)
        .insert(l["udp_sport"].get<int>());
  }
  CHECK(sender_sports.size() == 4);  // distinct per QP
  CHECK(receiver_sports.size() == 4);
  CHECK(LogCapture::count(NCCL_LOG_INFO, "path plan spread (spread)") == 1);  // the connecting side's
  CHECK(LogCapture::count(NCCL_LOG_INFO, "sl 3 tc 106") == 2);
  // Sizes around the split threshold and odd ones, every byte checked.
  for (size_t bytes : {size_t(0), size_t(1), size_t(65535), size_t(65536), size_t(3 << 20) + 7}) {
    std::vector<uint8_t> out(bytes), in(bytes + 64);
    fill_pattern(out.data(), bytes, bytes);
    void* data = in.data();
    size_t size = in.size();
    int tag = 9, received = -1;
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
    REQUIRE(p.net.isend(pair.send, out.data(), bytes, 9, nullptr, nullptr, &sreq) == ncclSuccess);
    REQUIRE(wait_pair(p.net, rreq, &received, sreq) == ncclSuccess);
    CHECK(received == int(bytes));
    CHECK(check_pattern(in.data(), bytes, bytes) == SIZE_MAX);
  }
  p.net.closeSend(pair.send);
  p.net.closeRecv(pair.recv);
}

// An HCA need not land a write's cache lines in address order (PCIe relaxed ordering, adaptive
// routing). softhca's `last_first` lands each write's last 64 bytes, where the CTS entry's seq
// is, a millisecond before the rest: a sender that trusted seq alone would match a receive by
// stale tags, sizes and addresses (zeros in a fresh slot, the previous receive's in a reused one).
TEST_CASE("softhca landing each write's last cache line first: every receive still gets its own send",
          "[plugin][ib]") {
  IbEnv env;
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 0);
  REQUIRE(softhca_fault(R"({"fault":"last_first"})") == 0);
  for (int i = 0; i < ib::kFifoDepth + 6; ++i) {  // fresh slots, then reused ones
    size_t bytes = 1000 + 37 * size_t(i);
    std::vector<uint8_t> out(bytes), in(bytes + 8);
    fill_pattern(out.data(), bytes, i);
    void* data = in.data();
    size_t size = in.size();
    int tag = i % 3, received = -1;
    void *rreq = nullptr, *sreq = nullptr;
    REQUIRE(p.net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) == ncclSuccess);
    REQUIRE(p.net.isend(pair.send, out.data(), bytes, tag, nullptr, nullptr, &sreq) == ncclSuccess);
    INFO("message " << i);
    REQUIRE(wait_pair(p.net, rreq, &received, sreq, 10) == ncclSuccess);
    CHECK(received == int(bytes));
    CHECK(check_pattern(in.data(), bytes, i) == SIZE_MAX);
  }
  REQUIRE(softhca_fault(R"({"fault":"in_order"})") == 0);
  p.net.closeSend(pair.send);
  p.net.closeRecv(pair.recv);
}

TEST_CASE("softhca: ASTRAL_IB_GID_INDEX picks the GID and IB uses the LID", "[plugin][ib]") {
  IbEnv env;
  ScopedEnv gid("ASTRAL_IB_GID_INDEX", "1");
  ScopedEnv paths("ASTRAL_IB_PATHS", "off");
  auto from = path_log_size();
  PluginContext p;
  for (int dev : {0, 1}) {
    CommPair pair = connect_pair(p.net, p.ctx, dev);
    exchange_one_message(p.net, pair);
    p.net.closeSend(pair.send);
    p.net.closeRecv(pair.recv);
  }
  auto lines = path_log_since(from);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0]["link_layer"] == "IB");
  CHECK(lines[0]["dlid"] == 8);  // the port's base LID: path index 0 with ASTRAL_IB_PATHS=off
  CHECK(lines[2]["link_layer"] == "Ethernet");
  CHECK(lines[2]["sgid_index"] == 1);
  CHECK(lines[2]["flow_label"] == 0);  // off: NCCL's behaviour, the sport hashed from the QPNs
}

TEST_CASE("softhca IB, spread: DLID = base LID + the plan's path index within the LMC",
          "[plugin][ib]") {
  IbEnv env;
  ScopedEnv qps("ASTRAL_IB_QPS", "4");
  ScopedEnv paths("ASTRAL_IB_PATHS", "spread");
  auto from = path_log_size();
  LogCapture::clear();
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 0);
  exchange_one_message(p.net, pair);
  auto lines = path_log_since(from);
  REQUIRE(lines.size() == 8);
  std::set<int> dlids;
  for (const auto& l : lines) {
    INFO(l.dump());
    int dlid = l["dlid"].get<int>();
    CHECK(dlid >= 8);
    CHECK(dlid < 8 + 4);  // LMC 2: the port owns LIDs 8..11
    dlids.insert(dlid);
  }
  CHECK(dlids.size() == 4);  // four QPs, four paths
  INFO(LogCapture::dump());
  CHECK(LogCapture::count(NCCL_LOG_INFO, "dlid ") >= 1);
  p.net.closeSend(pair.send);
  p.net.closeRecv(pair.recv);
}

TEST_CASE("softhca faults: QP error, link drop and port down are errors within bounds, no hang",
          "[plugin][ib]") {
  IbEnv env;
  ScopedEnv timeout("ASTRAL_IB_TIMEOUT", "14");  // 67 ms per try: retry-exceeded in ~0.5 s
  ScopedEnv retry("ASTRAL_IB_RETRY_CNT", "3");
  PluginContext p;
  SECTION("a QP to error: ncclSystemError from the async event or the flushed completion") {
    auto from = path_log_size();
    CommPair pair = connect_pair(p.net, p.ctx, 1);
    exchange_one_message(p.net, pair);
    auto lines = path_log_since(from);
    REQUIRE(lines.size() == 2);
    LogCapture::clear();
    std::string fault = R"({"fault":"qp_error","device":"mlx5_1","qpn":)" +
                        std::to_string(lines[0]["qpn"].get<int>()) + "}";
    REQUIRE(softhca_fault(fault) == 0);
    CHECK(wait_for_log(NCCL_LOG_WARN, "async event", 5));
    auto [r, s] = transfer_until_error(p.net, pair, 1 << 20, 10);
    INFO(LogCapture::dump());
    CHECK((r == ncclSystemError || s == ncclSystemError));
    p.net.closeSend(pair.send);
    p.net.closeRecv(pair.recv);
  }
  SECTION("a link drop: retry exceeded, a WARN in NCCL's shape, ncclRemoteError") {
    CommPair pair = connect_pair(p.net, p.ctx, 0);
    exchange_one_message(p.net, pair);
    LogCapture::clear();
    REQUIRE(softhca_fault(R"({"fault":"link_drop","device":"mlx5_0","port":1})") == 0);
    auto start = Clock::now();
    auto [r, s] = transfer_until_error(p.net, pair, 4096, 20);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    INFO(LogCapture::dump());
    CHECK((r == ncclRemoteError || s == ncclRemoteError));
    CHECK(seconds < 10);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "NET/IB : Got completion from peer 127.0.0.1<") >= 1);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "status=12 ") >= 1);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "vendor err 129 (") >= 1);
    CHECK(LogCapture::count(NCCL_LOG_WARN, "hca mlx5_0 port 1") >= 1);
    REQUIRE(softhca_fault(R"({"fault":"link_restore","device":"mlx5_0","port":1})") == 0);
    p.net.closeSend(pair.send);
    p.net.closeRecv(pair.recv);
  }
  SECTION("port down: the async event fails the comms on that port with ncclSystemError") {
    CommPair pair = connect_pair(p.net, p.ctx, 1);
    exchange_one_message(p.net, pair);
    LogCapture::clear();
    REQUIRE(softhca_fault(R"({"fault":"port_down","device":"mlx5_1","port":1})") == 0);
    REQUIRE(wait_for_log(NCCL_LOG_WARN, "async event", 5));
    auto [r, s] = transfer_until_error(p.net, pair, 4096, 10);
    INFO(LogCapture::dump());
    CHECK(r == ncclSystemError);
    REQUIRE(softhca_fault(R"({"fault":"port_up","device":"mlx5_1","port":1})") == 0);
    p.net.closeSend(pair.send);
    p.net.closeRecv(pair.recv);
  }
}

// Last in this file: a fatal device stays fatal for the rest of the process.
TEST_CASE("softhca fault: device fatal fails its comms with ncclSystemError", "[plugin][ib]") {
  IbEnv env;
  PluginContext p;
  CommPair pair = connect_pair(p.net, p.ctx, 1);
  exchange_one_message(p.net, pair);
  LogCapture::clear();
  REQUIRE(softhca_fault(R"({"fault":"device_fatal","device":"mlx5_1"})") == 0);
  REQUIRE(wait_for_log(NCCL_LOG_WARN, "async event", 5));
  auto [r, s] = transfer_until_error(p.net, pair, 4096, 10);
  INFO(LogCapture::dump());
  CHECK(r == ncclSystemError);
  p.net.closeSend(pair.send);
  p.net.closeRecv(pair.recv);
}

TEST_CASE("astral netbench --transport ib: pingpong and stream over softhca, verified",
          "[plugin][ib][netbench]") {
  IbEnv env;  // the ranks netbench starts inherit it
  auto r = run_process({ASTRAL_CLI_BIN, "netbench", "--transport", "ib", "--ranks", "2",
                        "--pattern", "pingpong", "--size", "8,1M", "--iters", "50", "--json"},
                       120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto out = nlohmann::json::parse(r.out);
  REQUIRE(out["results"].size() == 2);
  for (const auto& m : out["results"]) CHECK(m["verified"] == true);
  auto bad = run_process({ASTRAL_CLI_BIN, "netbench", "--transport", "carrier-pigeon"}, 30);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--transport 'carrier-pigeon'") != std::string::npos);
}
