// Inputs that coverage-guided fuzzing found (tests/fixtures/astral/fuzz-regressions/monitor_lines,
// from ../shared/fixtures/fuzz-findings): each aborted under UBSan on a signed overflow when a
// dmesg stamp's seconds were multiplied into microseconds. They must parse, and a stamp too large
// to be a clock reading must not be taken as one.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "astral/monitor/parse.hpp"
#include "monitor_test_util.hpp"
#include "prefix.hpp"  // monitor/src: the collector prefixes

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Fuzz regressions: dmesg stamps beyond any real uptime are not timestamps") {
  // 68269777084456 s: secs * 1000000 overflowed int64_t. Such a bracket is not a stamp now; a
  // stamp within 300 years of boot still reads as one.
  CHECK(strip_prefix("[68269777084456.0] NVRM: Xid", 2025).uptime_us == -1);
  CHECK(strip_prefix("68269777084456.0] NVRM: Xid", 2025).uptime_us == -1);
  CHECK(strip_prefix("[10000000000.000001] NVRM: Xid", 2025).uptime_us == -1);
  CHECK(strip_prefix("[9999999999.5] NVRM: Xid", 2025).uptime_us == 9999999999500000);
  CHECK(strip_prefix("[ 5.100000] NVRM: Xid", 2025).uptime_us == 5100000);
  // The relative form of `dmesg -H`.
  CHECK(strip_prefix("[+12345678901234.5] NVRM: Xid", 2025).relative_us == -1);
  CHECK(strip_prefix("[  +0.000001] NVRM: Xid", 2025).relative_us == 1);
  // Whole lines: parsed and counted, never an uptime beyond the bound.
  auto r = parse_text("[68269777084456.0] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
                      "[+12345678901234.5] NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, DBE\n"
                      "[ 5.100000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  CHECK(r.stats.lines == 3);
  for (const auto& e : r.events) CHECK(e.attr_int("uptime_us", 0) <= 10'000'000'000LL * 1000000);
}

TEST_CASE("Fuzz regressions: every monitor_lines reproducer parses") {
  const std::filesystem::path dir = ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/monitor_lines";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().filename().string());
    auto r = parse_text(text);
    CHECK(r.stats.lines > 0);
    CHECK(r.stats.unknown + r.stats.damaged + r.stats.recognised == r.stats.lines);
    ++files;
  }
  CHECK(files == 4);
}
