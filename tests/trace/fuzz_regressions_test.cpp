// Inputs that coverage-guided fuzzing found (tests/fixtures/astral/fuzz-regressions/trace_reader):
// a header whose clock readings are beyond any real clock made wall - mono overflow int64_t in
// TraceFile::wall_offset_ns (undefined behaviour). The reader now ignores such readings as damage,
// so every time and offset it returns is below kMaxClockNs and the cluster tools stay in range.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "astral/trace/chrome_export.hpp"
#include "astral/trace/cluster.hpp"
#include "astral/trace/reader.hpp"

using namespace astral::trace;

namespace {
std::vector<uint8_t> bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("Fuzz regressions: trace clock readings beyond any real clock are damage, not overflow") {
  const std::filesystem::path dir = ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/trace_reader";
  const auto data = bytes_of(dir / "crash-minimized-wall-offset-overflow.bin");
  REQUIRE(data.size() == 4096);
  std::vector<TraceFile> files;
  files.push_back(read_trace_bytes(data.data(), data.size(), "overflow.atrace"));
  const TraceFile& f = files[0];
  CHECK(f.damage.bad_clock_readings >= 1);
  CHECK(f.damage.corrupt());
  CHECK(f.info.start_wall_ns < kMaxClockNs);
  CHECK(f.info.start_mono_ns < kMaxClockNs);
  for (const auto& c : f.clock) {
    CHECK(c.wall_ns < kMaxClockNs);
    CHECK(c.mono_ns < kMaxClockNs);
  }
  for (const auto& e : f.events) CHECK(e.time_ns < kMaxClockNs);
  const int64_t offset = f.wall_offset_ns();
  CHECK(offset > -int64_t(kMaxClockNs));
  CHECK(offset < int64_t(kMaxClockNs));
  const Matching m = match_transfers(files);
  const Alignment a = align_clocks(files, m);
  std::ostringstream out;
  write_chrome_trace(out, files, m, a);
  CHECK(!out.str().empty());
}

TEST_CASE("Fuzz regressions: every trace_reader reproducer reads or is refused with TraceError") {
  const std::filesystem::path dir = ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/trace_reader";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto data = bytes_of(entry.path());
    INFO(entry.path().filename().string());
    try {
      std::vector<TraceFile> all{read_trace_bytes(data.data(), data.size(), entry.path().string())};
      const Matching m = match_transfers(all);
      (void)align_clocks(all, m);
    } catch (const TraceError&) {
    }
    ++files;
  }
  CHECK(files == 2);
}
