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

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Fuzz regressions: dmesg stamps beyond int64 microseconds are not timestamps") {
  // 68269777084456 s is 2^62 us * 1.000..: secs * 1000000 overflows int64_t.
  auto up = parse_text("[68269777084456.0] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
                       "[ 5.100000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  CHECK(up.stats.lines == 2);
  auto rel = parse_text("[+12345678901234.5] NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, DBE\n"
                        "[  +0.000001] NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, DBE\n");
  CHECK(rel.stats.lines == 2);
  // The largest stamp that fits still reads as one: 9223372036854 s = 2^63 us, less a little.
  auto edge = parse_text("[9223372036854.775807] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  CHECK(edge.stats.lines == 1);
  CHECK(kind_of(edge, "xid").size() == 1);
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
