// Inputs that coverage-guided fuzzing found (tests/fixtures/astral/fuzz-regressions/monitor_lines,
// from ../shared/fixtures/fuzz-findings): each aborted under UBSan on a signed overflow when a
// dmesg stamp's seconds were multiplied into microseconds. They must parse, and a stamp too large
// to be a clock reading must not be taken as one.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/metrics.hpp"
#include "astral/monitor/parse.hpp"
#include "monitor_test_util.hpp"
#include "prefix.hpp"  // monitor/src: the collector prefixes

using namespace astral::monitor;
using namespace astral::monitor::testing;

namespace {
// A monitor_structured reproducer's bytes.
std::string structured_regression(const std::string& name) {
  std::ifstream in(ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/monitor_structured/" + name, std::ios::binary);
  REQUIRE(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

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

TEST_CASE("Fuzz regressions: an ipmitool SEL row with a year of eight digits is damage, not an overflow") {
  // "05/14/20262025": days * 86400000000 overflowed int64_t (found by tools/fuzz-campaign 600,
  // crash-3cf8efb0...). A four-digit year still reads.
  auto r = parse_text("   1 | 05/14/20262025 | 20:40:26 | Power Supply PS1 | Failure detected | Asserted\n"
                      "   2 | 05/14/2025 | 20:40:26 | Power Supply PS1 | Failure detected | Asserted\n");
  CHECK(r.stats.damaged == 1);
  REQUIRE(r.events.size() == 1);
  CHECK(r.events[0].time_us != kUnknownTime);
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
  CHECK(files == 5);  // every reproducer in the folder was read
}

TEST_CASE("Fuzz regressions: RAS collective counts that overflow, and numbers out of range, are not read") {
  // The outlier check summed a rank's collective counts in int64_t (signed overflow) and read
  // rank, pid and cuda_dev with json::value<int> (1e30 -> int: an out-of-range cast).
  const std::string text = structured_regression("crash-handmade-ras-count-overflow.json");
  ParseOptions o;
  o.default_host = "node-a";
  const ParseResult r = parse_buffer(text, FileKind::nccl_ras, o);
  const auto lagging = kind_of(r, "ras_lagging_rank");
  REQUIRE(lagging.size() == 1);  // rank 2 (3 collectives against 5); rank 0's total is unknown
  CHECK(lagging[0]->keys.rank == 2);
  CHECK(lagging[0]->attr("pid") == "12");
  CHECK(lagging[0]->attr("cuda_dev") == "0");  // 1e300 is no device
  const auto dead = kind_of(r, "ras_peer_dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0]->keys.rank == -1);  // 1e30 is no rank
}

TEST_CASE("Fuzz regressions: a Flight Recorder integer written with an exponent beyond int64_t saturates") {
  // JsonCursor::read_int read 1e300 as a double and cast it to int64_t: undefined behaviour.
  const std::string text = structured_regression("crash-handmade-fr-exponent-cast.json");
  ParseOptions o;
  o.default_host = "node-a";
  REQUIRE(detect_file_kind(text, "rank_0.json") == FileKind::flight_recorder);
  const ParseResult r = parse_buffer(text, FileKind::flight_recorder, o);
  const auto entries = kind_of(r, "fr_entry");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0]->keys.seq == INT64_MAX);
  CHECK(entries[0]->attr("state") == "scheduled");
}

TEST_CASE("Fuzz regressions: metric timestamps and values beyond int64_t are bad samples, not overflows") {
  // Exposition timestamps (ms) were multiplied into microseconds unchecked; query_range times
  // went through std::llround of an unbounded double; counter rates subtracted times unchecked;
  // bit masks were std::llround'ed whatever their size.
  const std::filesystem::path file =
      ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/monitor_metrics/crash-handmade-timestamp-overflow.prom";
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t bad = 0;
  const auto series = parse_exposition(text, 1764456060LL * 1000000, "node01", &bad);
  CHECK(bad == 1);  // the first line's 99999999999999999 ms
  size_t samples = 0;
  for (const auto& s : series) samples += s.samples.size();
  CHECK(samples == 5);
  MetricWindow w;
  w.onset_us = 1764456060LL * 1000000;
  (void)metric_changes(series, w, Bundle{}, "fuzz");  // under UBSan: no overflow

  std::vector<MetricSeries> fetched;
  CHECK(read_query_range_reply(R"({"status": "success", "data": {"resultType": "matrix", "result": [
      {"metric": {"__name__": "node_infiniband_symbol_error_total"}, "values": [[1e300, "1"]]}]}})",
                               fetched) == "sample time out of range in the reply");
  fetched.clear();
  CHECK(read_query_range_reply(R"({"status": "success", "data": {"resultType": "matrix", "result": [
      {"metric": {"__name__": "node_infiniband_symbol_error_total"}, "values": [[1764456060.25, "3"]]}]}})",
                               fetched).empty());
  REQUIRE(fetched.size() == 1);
  CHECK(fetched[0].samples.at(0).time_us == 1764456060250000);
}

TEST_CASE("Fuzz regressions: structured records of the wrong shape are damage, not exceptions") {
  // json::value() on a number (a rank record that is 5, a host that is 7, a status that is a
  // string) threw type_error out of parse_buffer; each such record now counts as damaged.
  const std::filesystem::path file =
      ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/monitor_structured/crash-handmade-ras-wrong-types.json";
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ParseOptions o;
  o.default_host = "node-a";
  ParseResult r;
  REQUIRE_NOTHROW(r = parse_buffer(text, FileKind::nccl_ras, o));
  CHECK(r.stats.damaged >= 2);
}
