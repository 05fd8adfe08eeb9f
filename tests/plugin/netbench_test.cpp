// netbench end to end: real rank processes over the built plugin and over plain sockets, every
// pattern, payloads verified on every rank; and the errors a user meets.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "astral/plugin/netbench.hpp"
#include "harness.hpp"

namespace nb = astral::plugin::netbench;
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
