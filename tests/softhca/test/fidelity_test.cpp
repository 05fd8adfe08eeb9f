// Fidelity: Debian's unmodified rdma-core programs (ibverbs-utils 44) run on softhca through
// LD_LIBRARY_PATH, as two "hosts" (two processes with different SOFTHCA_HOST); plus the RTR path
// log that later path tests read.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_process.hpp"
#include "softhca_support.hpp"

using namespace softhca_test;
using astral::test::ProcessResult;
using astral::test::run_process;

namespace {
[[maybe_unused]] Env& g_env = env();

// What a child needs to load softhca. Under ASan the Debian program is not instrumented, so the
// runtime is preloaded (it must come first); its own leaks are not ours to report.
std::vector<std::string> child_env(const std::string& host) {
  std::vector<std::string> e = {"LD_LIBRARY_PATH=" SOFTHCA_LIB_DIR, "SOFTHCA_HOST=" + host};
  if (std::string(SOFTHCA_ASAN_PRELOAD).size()) {
    e.push_back("LD_PRELOAD=" SOFTHCA_ASAN_PRELOAD);
    e.push_back("ASAN_OPTIONS=detect_leaks=0");
  }
  return e;
}

int free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Whether something listens on TCP `port` (any address family), from /proc/net/tcp{,6}.
bool listening(int port) {
  char want[16];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, state;
      ss >> sl >> local >> remote >> state;
      if (local.size() > 5 && local.substr(local.size() - 5) == want && state == "0A") return true;
    }
  }
  return false;
}

struct PingPong {
  ProcessResult server, client;
};

PingPong pingpong(const std::vector<std::string>& server_args, const std::vector<std::string>& client_args) {
  REQUIRE(std::string(IBV_RC_PINGPONG).size() > 0);  // ibverbs-utils (scripts/install-deps.sh)
  std::string port = std::to_string(free_tcp_port());
  std::vector<std::string> s = {IBV_RC_PINGPONG, "-p", port};
  s.insert(s.end(), server_args.begin(), server_args.end());
  auto server = std::async(std::launch::async, [&] { return run_process(s, 60, child_env("beta")); });
  for (int i = 0; i < 2000 && !listening(std::stoi(port)); ++i) usleep(5000);
  std::vector<std::string> c = {IBV_RC_PINGPONG, "-p", port};
  c.insert(c.end(), client_args.begin(), client_args.end());
  c.push_back("localhost");
  PingPong r;
  r.client = run_process(c, 60, child_env("alpha"));
  r.server = server.get();
  return r;
}

std::vector<nlohmann::json> path_log() {
  std::vector<nlohmann::json> out;
  std::ifstream in(env().dir + "/path.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("ibv_devinfo lists the fabric file's devices with their ports and LIDs and GIDs") {
  REQUIRE(std::string(IBV_DEVINFO).size() > 0);
  ProcessResult r = run_process({IBV_DEVINFO}, 60, child_env("beta"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("hca_id:\tmlx5_0") != std::string::npos);
  CHECK(r.out.find("hca_id:\tmlx5_2") != std::string::npos);  // beta has three devices
  CHECK(r.out.find("port_lid:\t\t5") != std::string::npos);
  CHECK(r.out.find("port_lmc:\t\t0x02") != std::string::npos);
  CHECK(r.out.find("PORT_DOWN (1)") != std::string::npos);  // mlx5_2 is down in the file
  CHECK(r.out.find("board_id:\t\t\tSOFTHCA_ROCE") != std::string::npos);

  r = run_process({IBV_DEVINFO, "-v", "-d", "mlx5_1"}, 60, child_env("alpha"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("link_layer:\t\tEthernet") != std::string::npos);
  CHECK(r.out.find("GID[  0]:\t\tfe80:0000:0000:0000:0000:0000:000a:0001, RoCE v1") != std::string::npos);
  CHECK(r.out.find("GID[  1]:\t\t::ffff:10.1.0.1, RoCE v2") != std::string::npos);
}

TEST_CASE("ibv_devinfo: no fabric is rdma-core's no-RDMA answer and a bad fabric file is one line") {
  ProcessResult r = run_process({IBV_DEVINFO}, 60, [] {
    auto e = child_env("alpha");
    e.push_back("SOFTHCA_FABRIC=");
    return e;
  }());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("Failed to get IB devices list: Function not implemented") != std::string::npos);

  std::string bad = env().dir + "/bad.json";
  std::ofstream(bad) << R"({"hosts":[{"name":"alpha","devices":[{"name":"d","ports":[{"link_layer":"IB"}]}]}]})";
  r = run_process({IBV_DEVINFO}, 60, [&] {
    auto e = child_env("alpha");
    e.push_back("SOFTHCA_FABRIC=" + bad);
    return e;
  }());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("softhca: SOFTHCA_FABRIC=" + bad + ": fabric.hosts[0].devices[0].ports[0].lid: an ACTIVE IB port needs a LID\n") !=
        std::string::npos);
}

TEST_CASE("ibv_rc_pingpong between two hosts over IB with one side on a completion channel") {
  PingPong r = pingpong({"-d", "mlx5_0", "-c"}, {"-d", "mlx5_0", "-c", "-e"});
  INFO("server: " << r.server.out << r.server.err << "\nclient: " << r.client.out << r.client.err);
  REQUIRE(r.client.exit_code == 0);
  REQUIRE(r.server.exit_code == 0);
  CHECK(r.client.out.find("local address:  LID 0x0001") != std::string::npos);
  CHECK(r.client.out.find("remote address: LID 0x0005") != std::string::npos);
  CHECK(r.client.out.find("8192000 bytes in") != std::string::npos);  // 1000 iters x 4096 B x 2
  CHECK(r.server.out.find("1000 iters in") != std::string::npos);
}

TEST_CASE("ibv_rc_pingpong -g on a RoCE port with multi-segment messages logs both paths at RTR") {
  std::ofstream(env().dir + "/path.jsonl", std::ios::trunc);
  PingPong r = pingpong({"-d", "mlx5_1", "-g", "1", "-s", "150000", "-n", "50", "-c"},
                        {"-d", "mlx5_1", "-g", "1", "-s", "150000", "-n", "50", "-c"});
  INFO("server: " << r.server.out << r.server.err << "\nclient: " << r.client.out << r.client.err);
  REQUIRE(r.client.exit_code == 0);
  REQUIRE(r.server.exit_code == 0);
  CHECK(r.client.out.find("GID ::ffff:10.1.0.1") != std::string::npos);
  CHECK(r.client.out.find("GID ::ffff:10.1.0.2") != std::string::npos);
  CHECK(r.client.out.find("15000000 bytes in") != std::string::npos);

  auto lines = path_log();
  REQUIRE(lines.size() == 2);  // one per QP at RTR, both processes append to the same file
  for (const auto& j : lines) {
    INFO(j.dump());
    CHECK(j["device"] == "mlx5_1");
    CHECK(j["gid_type"] == "RoCEv2");
    CHECK(j["sgid_index"] == 1);
    CHECK(j["rail"] == 1);
    CHECK(j["flow_label"] == 0);  // what ibv_rc_pingpong sets: mlx5 then hashes the QPNs
    CHECK(j["udp_sport_from"] == "qpn_hash");
    uint64_t v = uint64_t(j["qpn"].get<uint32_t>()) * j["dest_qpn"].get<uint32_t>();
    v ^= v >> 20;
    v ^= v >> 40;
    uint32_t fl = static_cast<uint32_t>(v & 0xfffff);
    CHECK(j["udp_sport"] == (0xC000 | ((fl & 0x3fff) ^ (fl >> 14))));
  }
  CHECK(lines[0]["host"] != lines[1]["host"]);
}

TEST_CASE("the RTR log has the mlx5 UDP source port of a flow label and the TC and SL and hop limit and an IB DLID") {
  std::ofstream(env().dir + "/path.jsonl", std::ios::trunc);
  ibv_context* ctx = open_device("mlx5_1");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc r = make_rc(pd, 4096);
  REQUIRE(to_init(r.qp) == 0);
  Path p;
  p.sgid_index = 1;
  REQUIRE(inet_pton(AF_INET6, "::ffff:10.1.0.2", p.dgid.raw) == 1);
  p.flow_label = 0x12345;
  p.traffic_class = 106;  // DSCP 26 << 2
  p.sl = 3;
  REQUIRE(to_rtr(r.qp, 0x123, p) == 0);
  destroy(r);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);

  ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  pd = ibv_alloc_pd(ctx);
  r = make_rc(pd, 4096);
  REQUIRE(to_init(r.qp) == 0);
  Path ib;
  ib.dlid = 5 + 3;  // beta's base LID plus path index 3 (LMC 2)
  REQUIRE(to_rtr(r.qp, 0x200, ib) == 0);
  destroy(r);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);

  auto lines = path_log();
  REQUIRE(lines.size() == 2);
  const auto& roce = lines[0];
  INFO(roce.dump());
  CHECK(roce["udp_sport"] == (0xC000 | ((0x12345 & 0x3fff) ^ (0x12345 >> 14))));
  CHECK(roce["udp_sport_from"] == "flow_label");
  CHECK(roce["traffic_class"] == 106);
  CHECK(roce["hop_limit"] == 255);
  CHECK(roce["sl"] == 3);
  CHECK(roce["dest_qpn"] == 0x123);
  CHECK(roce["peer"]["host"] == "beta");
  CHECK(roce["dgid"] == "::ffff:10.1.0.2");
  const auto& lid = lines[1];
  INFO(lid.dump());
  CHECK(lid["link_layer"] == "IB");
  CHECK(lid["dlid"] == 8);
  CHECK(lid["peer"]["host"] == "beta");
  CHECK(lid["is_global"] == false);
}
