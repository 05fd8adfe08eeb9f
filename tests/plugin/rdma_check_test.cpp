// tools/rdma-check, the prepared two-host check of the IB transport on real RDMA NICs. It cannot
// run here (no NIC, no RDMA kernel subsystem); what can be checked is that the script parses
// (bash -n, shellcheck where installed), refuses bad arguments with one line and exit 2, and in
// --dry-run prints the commands of every step for every device and writes its JSON summary.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct ScriptRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ScriptRun rdma_check_run(const std::string& shell_command) {
  ScriptRun r;
  FILE* p = popen((shell_command + " 2>&1").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string rdma_check_script() {
  return std::filesystem::canonical(std::filesystem::path(ASTRAL_FIXTURES_DIR) / "../../tools/rdma-check").string();
}

ScriptRun rdma_check(const std::string& args) { return rdma_check_run("bash '" + rdma_check_script() + "' " + args); }

}  // namespace

TEST_CASE("rdma-check: the script parses, and is shellcheck clean where shellcheck is installed",
          "[plugin][ib][rdma-check]") {
  CHECK(rdma_check_run("bash -n '" + rdma_check_script() + "'").exit_code == 0);
  if (rdma_check_run("command -v shellcheck").exit_code != 0) {
    WARN("shellcheck is not installed: only bash -n was checked");
    return;
  }
  ScriptRun lint = rdma_check_run("shellcheck '" + rdma_check_script() + "'");
  INFO(lint.output);
  CHECK(lint.exit_code == 0);
}

TEST_CASE("rdma-check: --help, and bad arguments refused with one line naming them (exit 2)",
          "[plugin][ib][rdma-check]") {
  ScriptRun help = rdma_check("--help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("--peer HOST") != std::string::npos);
  CHECK(help.output.find("--dry-run") != std::string::npos);
  const std::pair<const char*, const char*> bad[] = {
      {"", "--peer HOST is required"},
      {"--peer", "--peer: missing value"},
      {"--peer 'a;b'", "--peer 'a;b': not a host name"},
      {"--peer b --port 80", "--port '80': expected an integer in [1024, 65535]"},
      {"--peer b --gid-index x", "--gid-index 'x': expected an integer in [0, 255]"},
      {"--peer b --kill-bound 0", "--kill-bound '0': expected an integer in [1, 3600]"},
      {"--peer b --skip everything", "--skip 'everything': expected preflight, baseline, netbench, wire, kill or vnic"},
      {"--peer b --fuse mlx5_0", "--fuse 'mlx5_0': expected 2 to 4 device names, comma-separated"},
      {"--peer b --devices 'mlx5_0;rm'", "--devices 'mlx5_0;rm': not device names"},
      {"--peer b --fabric /nonexistent.json", "--fabric '/nonexistent.json': cannot read it"},
      {"--peer b --frobnicate", "unknown argument '--frobnicate'"},
  };
  for (const auto& [args, message] : bad) {
    ScriptRun r = rdma_check(args);
    INFO(args << " -> " << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(std::string("rdma-check: ") + message) != std::string::npos);
  }
}

TEST_CASE("rdma-check: --dry-run prints every step's commands per device and a JSON summary",
          "[plugin][ib][rdma-check]") {
  auto out = std::filesystem::temp_directory_path() / ("astral-rdma-check-" + std::to_string(getpid()));
  ScriptRun r = rdma_check("--peer beta --self alpha --dry-run --devices mlx5_0,mlx5_3 --astral /opt/astral "
                           "--capture-if ens1f0 --port 30001 --out '" + out.string() + "'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  for (const char* dev : {"mlx5_0", "mlx5_3"}) {
    std::string d = dev;
    CHECK(r.output.find("+ timeout 60 ib_write_bw -d " + d + " -x 3 -F --report_gbits -s 4194304") != std::string::npos);
    CHECK(r.output.find("+ ssh -o BatchMode=yes -o ConnectTimeout=10 beta timeout 60 ib_write_bw -d " + d) != std::string::npos);
    CHECK(r.output.find("env ASTRAL_TRANSPORT=ib ASTRAL_IB_HCA=" + d) != std::string::npos);
    CHECK(r.output.find("--coordinator alpha:30001") != std::string::npos);
    CHECK(r.output.find("ASTRAL_IB_PATHS=pinned") != std::string::npos);
    CHECK(r.output.find("+ timeout 40 tcpdump -i ens1f0 -nn -c 2000 -w " + (out / ("wire-" + d + ".pcap")).string() +
                        " udp dst port 4791") != std::string::npos);
    CHECK(r.output.find("kill -KILL $(cat '" + (out / ("kill-" + d + ".pid")).string() + "')") != std::string::npos);
  }
  CHECK(r.output.find("/opt/astral topo audit --json") != std::string::npos);
  // The token travels as a file, never on a command line.
  CHECK(r.output.find("ASTRAL_NETBENCH_TOKEN=") == std::string::npos);
  nlohmann::json summary = nlohmann::json::parse(std::ifstream(out / "rdma-check.json"));
  CHECK(summary["check"] == "rdma-check");
  CHECK(summary["steps"].size() == 2 + 2 * 4);  // preflight on both hosts, 4 steps per device

  ScriptRun skipped = rdma_check("--peer beta --dry-run --devices mlx5_0 --skip wire --skip kill --out '" +
                                 out.string() + "'");
  CHECK(skipped.exit_code == 0);
  CHECK(skipped.output.find("tcpdump") == std::string::npos);
  CHECK(skipped.output.find("kill -KILL") == std::string::npos);
  CHECK(skipped.output.find("ib_write_bw") != std::string::npos);
  CHECK(skipped.output.find("--fuse") == std::string::npos);  // no vnic step without --fuse

  // --fuse: netbench over a virtual NIC of exactly those devices, as the plugin's 0 and 1.
  ScriptRun fused = rdma_check("--peer beta --dry-run --devices mlx5_0 --skip wire --skip kill "
                               "--fuse mlx5_0,mlx5_1 --out '" + out.string() + "'");
  INFO(fused.output);
  CHECK(fused.exit_code == 0);
  CHECK(fused.output.find("ASTRAL_IB_HCA==mlx5_0,mlx5_1") != std::string::npos);
  CHECK(fused.output.find("--fuse 0,1 --rank 0") != std::string::npos);
  CHECK(fused.output.find("rdma-check: vnic mlx5_0,mlx5_1: pass (dry run)") != std::string::npos);
  std::filesystem::remove_all(out);
}
