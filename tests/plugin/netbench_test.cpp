// netbench end to end: real rank processes over the built plugin and over plain sockets, every
// pattern, payloads verified on every rank; and the errors a user meets.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "astral/netbench/netbench.hpp"
#include "harness.hpp"

namespace nb = astral::netbench;
using namespace astral::test;

namespace {
std::vector<nb::Measurement> run_quick(nb::Pattern pattern, int ranks, std::vector<size_t> sizes) {
  nb::Options o;
  o.pattern = pattern;
  o.ranks = ranks;
  o.sizes = std::move(sizes);
  o.iterations = 6;
  o.warmup = 1;
  o.window = 4;
  o.baseline_sockets = true;
  o.plugin_path = plugin_path();
  o.timeout_s = 60;
  return nb::run(o, [](const std::string&) {});
}
}  // namespace

TEST_CASE("netbench runs every pattern over the plugin and the sockets baseline",
          "[plugin][netbench]") {
  struct Case {
    nb::Pattern pattern;
    int ranks;
  };
  for (Case c : {Case{nb::Pattern::kPingPong, 2}, Case{nb::Pattern::kStream, 2},
                 Case{nb::Pattern::kBidirectional, 2}, Case{nb::Pattern::kAllToAll, 3},
                 Case{nb::Pattern::kAllReduce, 3}}) {
    INFO(nb::pattern_name(c.pattern) << " over " << c.ranks << " ranks");
    auto results = run_quick(c.pattern, c.ranks, {0, 8, 100000});
    REQUIRE(results.size() == 6);  // 3 sizes x {plugin, sockets}
    for (const auto& m : results) {
      INFO(m.engine << " " << m.bytes << " bytes");
      CHECK(m.verified);
      CHECK(m.ranks == c.ranks);
      CHECK(m.iterations == 6);
      if (m.bytes > 0) CHECK(m.gb_per_s > 0);
      if (c.pattern != nb::Pattern::kStream) CHECK(m.p50_us > 0);
      CHECK(m.p50_us <= m.p99_us);
      CHECK(m.p99_us <= m.max_us);
      if (c.pattern == nb::Pattern::kAllReduce && m.bytes > 0) {
        CHECK(m.bus_gb_per_s == Approx(m.gb_per_s * 4 / 3));
      }
    }
  }
}

TEST_CASE("netbench reports a missing plugin and bad sizes in one line", "[plugin][netbench]") {
  nb::Options o;
  o.plugin_path = "/nonexistent/libnccl-net-nothing.so";
  o.iterations = 1;
  o.timeout_s = 30;
  CHECK_THROWS_WITH(nb::run(o, [](const std::string&) {}),
                    Catch::Contains("rank") && Catch::Contains("failed"));
  size_t bytes = 0;
  CHECK(nb::parse_size("4M", &bytes));
  CHECK(bytes == 4 << 20);
  CHECK(nb::parse_size("64KiB", &bytes));
  CHECK(bytes == 64 << 10);
  CHECK_FALSE(nb::parse_size("4X", &bytes));
  CHECK_FALSE(nb::parse_size("2G", &bytes));  // above the plugin's largest message
  CHECK_FALSE(nb::parse_size("", &bytes));
  nb::Pattern p;
  CHECK(nb::parse_pattern("bidir", &p));
  CHECK(p == nb::Pattern::kBidirectional);
  CHECK_FALSE(nb::parse_pattern("broadcast", &p));
}

TEST_CASE("netbench across hosts needs a shared token", "[plugin][netbench]") {
  ScopedEnv token("ASTRAL_NETBENCH_TOKEN", nullptr);
  nb::Options o;
  o.rank = 1;
  o.coordinator = "127.0.0.1:1";
  CHECK_THROWS_WITH(nb::run(o, [](const std::string&) {}), Catch::Contains("ASTRAL_NETBENCH_TOKEN"));
}

namespace {
// A launcher's environment as a lookup.
nb::EnvFn env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("netbench expands Slurm node lists", "[plugin][netbench][launcher]") {
  using V = std::vector<std::string>;
  CHECK(nb::expand_slurm_nodelist("node1") == V{"node1"});
  CHECK(nb::expand_slurm_nodelist("gpu[01-03,07],login1") == V{"gpu01", "gpu02", "gpu03", "gpu07", "login1"});
  CHECK(nb::expand_slurm_nodelist("r[1-2]-n[8-9]") == V{"r1-n8", "r1-n9", "r2-n8", "r2-n9"});
  CHECK(nb::expand_slurm_nodelist("a[9-10]") == V{"a9", "a10"});
  CHECK_THROWS_WITH(nb::expand_slurm_nodelist("gpu[3-1]"), Catch::Contains("gpu[3-1]"));
  CHECK_THROWS_WITH(nb::expand_slurm_nodelist("gpu[1-2"), Catch::Contains("Slurm node list"));
}

TEST_CASE("netbench takes rank, size and coordinator from Slurm, Open MPI, PMI and torchrun",
          "[plugin][netbench][launcher]") {
  SECTION("srun: the first host of the step hosts the coordinator") {
    nb::Options o;
    REQUIRE(nb::apply_launcher(env_of({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"},
                                       {"SLURM_STEP_NODELIST", "gpu[07-10]"}}),
                               &o));
    CHECK(o.rank == 2);
    CHECK(o.ranks == 4);
    CHECK(o.coordinator == "gpu07:" + std::to_string(nb::kDefaultCoordinatorPort));
  }
  SECTION("a batch script's own Slurm variables start no multi-host run") {
    nb::Options o;
    CHECK_FALSE(nb::apply_launcher(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"},
                                           {"SLURM_NODELIST", "gpu[07-10]"}}),
                                   &o));
    CHECK(o.rank == -1);
  }
  SECTION("mpirun with MASTER_ADDR and MASTER_PORT") {
    nb::Options o;
    REQUIRE(nb::apply_launcher(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "4242"}}),
                               &o));
    CHECK(o.rank == 1);
    CHECK(o.coordinator == "10.0.0.1:4242");
  }
  SECTION("srun --mpi=pmix sets PMI and Slurm variables that agree") {
    nb::Options o;
    REQUIRE(nb::apply_launcher(env_of({{"PMI_RANK", "3"}, {"PMI_SIZE", "8"}, {"SLURM_PROCID", "3"},
                                       {"SLURM_NTASKS", "8"}, {"SLURM_STEP_ID", "1"},
                                       {"SLURM_STEP_NODELIST", "n1,n2"}}),
                               &o));
    CHECK(o.coordinator == "n1:" + std::to_string(nb::kDefaultCoordinatorPort));
  }
  SECTION("torchrun") {
    nb::Options o;
    REQUIRE(nb::apply_launcher(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "head"}}), &o));
    CHECK(o.coordinator == "head:" + std::to_string(nb::kDefaultCoordinatorPort));
  }
  SECTION("explicit flags win, no launcher means local mode") {
    nb::Options o;
    o.rank = 0;
    o.ranks = 2;
    o.coordinator = "127.0.0.1:9";
    CHECK_FALSE(nb::apply_launcher(env_of({{"RANK", "5"}, {"WORLD_SIZE", "9"}}), &o));
    CHECK(o.coordinator == "127.0.0.1:9");
    nb::Options local;
    CHECK_FALSE(nb::apply_launcher(env_of({}), &local));
  }
}

TEST_CASE("netbench launcher variables that disagree get one clear error", "[plugin][netbench][launcher]") {
  nb::Options o;
  CHECK_THROWS_WITH(nb::apply_launcher(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}}), &o),
                    Catch::Contains("RANK=4 is not below WORLD_SIZE=4"));
  CHECK_THROWS_WITH(nb::apply_launcher(env_of({{"RANK", "1"}, {"WORLD_SIZE", "4"}}), &o),
                    Catch::Contains("missing MASTER_ADDR"));
  CHECK_THROWS_WITH(nb::apply_launcher(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                               {"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}}),
                                       &o),
                    Catch::Contains("disagree: OMPI_COMM_WORLD_RANK=1") && Catch::Contains("RANK=2"));
  CHECK_THROWS_WITH(nb::apply_launcher(env_of({{"RANK", "one"}, {"WORLD_SIZE", "4"}}), &o),
                    Catch::Contains("RANK='one'"));
  CHECK_THROWS_WITH(nb::apply_launcher(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"},
                                               {"MASTER_PORT", "99999"}}),
                                       &o),
                    Catch::Contains("MASTER_PORT='99999'"));
}

TEST_CASE("netbench reads its token from the environment or a file only its owner can read",
          "[plugin][netbench][launcher]") {
  CHECK(nb::launch_token(env_of({{"ASTRAL_NETBENCH_TOKEN", "s3cret"}})) == "s3cret");
  CHECK_THROWS_WITH(nb::launch_token(env_of({})), Catch::Contains("ASTRAL_NETBENCH_TOKEN"));
  char path[] = "/tmp/astral-token-XXXXXX";
  int fd = mkstemp(path);  // mode 0600
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "from-file\n", 10) == 10);
  close(fd);
  CHECK(nb::launch_token(env_of({{"ASTRAL_NETBENCH_TOKEN_FILE", path}})) == "from-file");
  REQUIRE(chmod(path, 0644) == 0);
  CHECK_THROWS_WITH(nb::launch_token(env_of({{"ASTRAL_NETBENCH_TOKEN_FILE", path}})), Catch::Contains("chmod 600"));
  unlink(path);
  CHECK_THROWS_WITH(nb::launch_token(env_of({{"ASTRAL_NETBENCH_TOKEN_FILE", path}})), Catch::Contains(path));
}
