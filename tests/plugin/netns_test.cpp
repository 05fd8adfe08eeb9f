// Multi-host, multi-rail runs on one machine: each "host" is a network namespace, each rail a veth
// pair on its own subnet (rail r: 10.77.r.0/24), so a device can only reach the same rail of its
// peer. The plugin runs unmodified inside the namespaces (rail_peer, astral netbench).
// Needs root (CI runs as root); skipped with one message where namespaces cannot be created.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "astral/trace/reader.hpp"
#include "child.hpp"
#include "harness.hpp"
#include "run_process.hpp"
#include "temp_dir.hpp"

using namespace astral::test;

namespace {

constexpr const char* kIp = "/usr/sbin/ip";

bool sh(const std::string& command, std::string* err = nullptr) {
  auto r = run_process({"/bin/sh", "-c", command}, 30);
  if (err) *err = r.out + r.err;
  return r.exit_code == 0;
}

// `hosts` namespaces joined by `rails` veth pairs between host 0 and host 1 (two hosts: the
// shape NCCL's per-rail connections have between a pair of nodes). Removed on destruction.
class Fabric {
 public:
  Fabric(int rails) : rails_(rails) {
    const std::string tag = std::to_string(getpid() % 100000);
    for (int h = 0; h < 2; ++h) ns_.push_back("astral" + tag + "h" + std::to_string(h));
    std::string err;
    if (!sh(std::string(kIp) + " netns add " + ns_[0], &err)) {
      why_not_ = "cannot create network namespaces (" + err + "); the multi-host tests need root";
      ns_.clear();
      return;
    }
    sh(std::string(kIp) + " netns add " + ns_[1]);
    for (const auto& ns : ns_) sh(std::string(kIp) + " -n " + ns + " link set lo up");
    for (int r = 0; r < rails; ++r) {
      std::string a = "av" + tag + "r" + std::to_string(r), b = "bv" + tag + "r" + std::to_string(r);
      std::string rail = "rail" + std::to_string(r);
      bool ok = sh(std::string(kIp) + " link add " + a + " type veth peer name " + b, &err) &&
                sh(std::string(kIp) + " link set " + a + " netns " + ns_[0] + " name " + rail, &err) &&
                sh(std::string(kIp) + " link set " + b + " netns " + ns_[1] + " name " + rail, &err);
      for (int h = 0; ok && h < 2; ++h) {
        ok = sh(std::string(kIp) + " -n " + ns_[h] + " addr add " + address(h, r) + "/24 dev " + rail, &err) &&
             sh(std::string(kIp) + " -n " + ns_[h] + " link set " + rail + " up", &err);
      }
      if (!ok) why_not_ = "cannot build the veth rails: " + err;
    }
  }
  ~Fabric() {
    for (const auto& ns : ns_) sh(std::string(kIp) + " netns del " + ns);  // takes its veths along
  }
  const std::string& why_not() const { return why_not_; }
  const std::string& ns(int h) const { return ns_.at(size_t(h)); }
  static std::string address(int host, int rail) {
    return "10.77." + std::to_string(rail) + "." + std::to_string(host + 1);
  }
  std::string ifnames() const {
    std::string list = "=";
    for (int r = 0; r < rails_; ++r) list += (r ? ",rail" : "rail") + std::to_string(r);
    return list;
  }
  // argv that runs `program` inside host h's namespace.
  std::vector<std::string> in_host(int h, std::vector<std::string> program) const {
    std::vector<std::string> argv = {kIp, "netns", "exec", ns(h)};
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  }

 private:
  int rails_;
  std::vector<std::string> ns_;
  std::string why_not_;
};

#define ASTRAL_REQUIRE_FABRIC(fabric)                                    \
  if (!(fabric).why_not().empty()) {                                     \
    WARN("skipped: " << (fabric).why_not());                             \
    return;                                                              \
  }

std::vector<std::string> peer_env(const Fabric& fabric, const std::string& trace_dir, int timeout_ms) {
  return {"ASTRAL_SOCKET_IFNAME=" + fabric.ifnames(), "ASTRAL_TRACE_DIR=" + trace_dir,
          "ASTRAL_TCP_TIMEOUT_MS=" + std::to_string(timeout_ms), "ASTRAL_TCP_STREAMS=1",
          "ASAN_OPTIONS=detect_leaks=0"};
}

// Receiver on host 1, sender on host 0; returns both outputs after "done". `mid_stream` runs
// once both stream on every rail.
std::pair<std::string, std::string> stream_rails(const Fabric& fabric, const std::string& size, int count,
                                                 const std::string& trace_dir, int timeout_ms,
                                                 const std::function<void()>& mid_stream = {}) {
  Child recv(fabric.in_host(1, {ASTRAL_RAIL_PEER, "recv", size, std::to_string(count)}),
             peer_env(fabric, trace_dir + "/h1", timeout_ms));
  Child send(fabric.in_host(0, {ASTRAL_RAIL_PEER, "send", size, std::to_string(count)}),
             peer_env(fabric, trace_dir + "/h0", timeout_ms));
  for (std::string line = recv.read_line(); line != "ready"; line = recv.read_line()) {
    REQUIRE(line.rfind("handle ", 0) == 0);
    send.write_line(line);
  }
  std::string first = send.read_line(60);
  INFO(first);
  REQUIRE(first == "streaming");
  if (mid_stream) mid_stream();
  send.write_line("go");
  std::string sent = send.read_rest(120), received = recv.read_rest(120);
  CHECK(send.wait(30) == 0);
  CHECK(recv.wait(30) == 0);
  return {sent, received};
}

}  // namespace

TEST_CASE("three rails between two hosts: every rail-i device meets rail i of its peer", "[plugin][netns]") {
  Fabric fabric(3);
  ASTRAL_REQUIRE_FABRIC(fabric);
  TempDir traces;
  auto [sent, received] = stream_rails(fabric, "65536", 40, traces.path(), 10000);
  INFO(sent << received);
  for (int r = 0; r < 3; ++r) {
    std::string ok = "rail " + std::to_string(r) + " rail" + std::to_string(r) + " ok 40";
    CHECK(sent.find(ok) != std::string::npos);
    CHECK(received.find(ok) != std::string::npos);
  }
  // The trace files of both hosts: each connection (same id at both ends) joins rail r to rail r,
  // and its addresses are on rail r's subnet.
  std::map<uint64_t, std::vector<std::pair<std::string, std::string>>> ends;  // conn -> (nic, local addr)
  for (const auto& path : astral::trace::find_trace_files({traces.path()})) {
    auto file = astral::trace::read_trace_file(path);
    for (const auto& e : file.events) {
      const auto* c = e.as<astral::trace::Connection>();
      if (e.kind != astral::trace::EventKind::NetConnect || !c) continue;
      ends[c->conn_id].emplace_back(std::string(file.str(c->nic)), std::string(file.str(c->local_addr)));
    }
  }
  REQUIRE(ends.size() == 3);
  std::set<std::string> rails_seen;
  for (const auto& [id, pair] : ends) {
    REQUIRE(pair.size() == 2);
    CHECK(pair[0].first == pair[1].first);
    const std::string rail = pair[0].first;
    rails_seen.insert(rail);
    const std::string subnet = "10.77." + rail.substr(4) + ".";
    for (const auto& [nic, addr] : pair) CHECK(addr.rfind(subnet, 0) == 0);
  }
  CHECK(rails_seen == std::set<std::string>{"rail0", "rail1", "rail2"});
}

TEST_CASE("one rail's link cut mid-stream fails only that rail, within the timeout", "[plugin][netns]") {
  Fabric fabric(3);
  ASTRAL_REQUIRE_FABRIC(fabric);
  TempDir traces;
  const int timeout_ms = 1500;
  auto [sent, received] = stream_rails(fabric, "1048576", 60, traces.path(), timeout_ms, [&] {
    REQUIRE(sh(std::string(kIp) + " -n " + fabric.ns(0) + " link set rail1 down"));
  });
  INFO(sent << received);
  for (int r : {0, 2}) {  // untouched rails: every message arrived and verified
    std::string ok = "rail " + std::to_string(r) + " rail" + std::to_string(r) + " ok 60";
    CHECK(sent.find(ok) != std::string::npos);
    CHECK(received.find(ok) != std::string::npos);
  }
  // The cut rail failed on both hosts, each within a small multiple of the timeout after its last
  // completion (TCP_USER_TIMEOUT on the sender, mid-message silence on the receiver).
  std::regex failed(R"(rail 1 rail1 failed after (\d+) result (\d+) stalled_ms (\d+))");
  for (const std::string* out : {&sent, &received}) {
    std::smatch m;
    REQUIRE(std::regex_search(*out, m, failed));
    CHECK(std::stoi(m[1]) < 60);
    CHECK(std::stoi(m[2]) != 0);
    CHECK(std::stoi(m[3]) <= 4 * timeout_ms + 2000);
  }
}

TEST_CASE("netbench across two hosts from Slurm's variables alone", "[plugin][netns][netbench]") {
  Fabric fabric(1);
  ASTRAL_REQUIRE_FABRIC(fabric);
  auto env_for = [&](int rank) -> std::vector<std::string> {
    return {"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=2", "SLURM_STEP_ID=0",
            "SLURM_STEP_NODELIST=" + Fabric::address(0, 0) + "," + Fabric::address(1, 0),
            "ASTRAL_NETBENCH_TOKEN=netns-test-token", "ASTRAL_SOCKET_IFNAME=rail0",
            "ASAN_OPTIONS=detect_leaks=0"};
  };
  const std::vector<std::string> args = {ASTRAL_CLI_BIN, "netbench", "--pattern", "stream", "--size", "256K",
                                         "--iters", "20", "--timeout", "60", "--json"};
  Child rank1(fabric.in_host(1, args), env_for(1));
  auto rank0 = run_process(fabric.in_host(0, args), 120, env_for(0));
  std::string rest1 = rank1.read_rest(60);
  INFO(rank0.out << rank0.err << rest1);
  CHECK(rank1.wait(30) == 0);
  REQUIRE(rank0.exit_code == 0);
  CHECK(rank0.err.find("rank 0 of 2 from the launcher, coordinator " + Fabric::address(0, 0)) != std::string::npos);
  auto json = nlohmann::json::parse(rank0.out);
  CHECK(json["ranks"] == 2);
  REQUIRE_FALSE(json["results"].empty());
  for (const auto& m : json["results"]) CHECK(m["verified"] == true);
  CHECK(rank0.out.find("netns-test-token") == std::string::npos);  // never echoed
}
