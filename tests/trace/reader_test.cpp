// The reader on damaged files: what is lost is counted, everything else is returned; only a
// file that is not a trace at all is refused.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include "astral/trace/reader.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::trace::test::small_options;
using astral::trace::test::TempDir;
using astral::trace::test::transfer_event;

namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A closed file with `n` NetSendPosted events (seq 0..n-1) in 4 KiB chunks (63 records each).
std::vector<uint8_t> sample_file(const std::string& dir, int n) {
  auto w = Writer::open(small_options(dir));
  REQUIRE(w);
  w->intern("some name");
  for (int i = 0; i < n; ++i) w->record(transfer_event(EventKind::NetSendPosted, i));
  w->close();
  return slurp(w->path());
}

size_t count_transfers(const TraceFile& f) {
  size_t n = 0;
  for (const auto& e : f.events) n += e.as<Transfer>() != nullptr;
  return n;
}

constexpr size_t kChunks = 4096 + 16384;  // chunk area offset in small_options files
constexpr size_t kChunk = 4096;

}  // namespace

TEST_CASE("a flipped bit in a record loses that record only") {
  TempDir dir;
  auto bytes = sample_file(dir.path, 100);
  const TraceFile clean = read_trace_bytes(bytes.data(), bytes.size());
  REQUIRE(count_transfers(clean) == 100);
  bytes[kChunks + 5 * 64 + 20] ^= 0x10;  // record 5 of the first chunk
  const TraceFile f = read_trace_bytes(bytes.data(), bytes.size());
  CHECK(f.damage.corrupt_records == 1);
  CHECK(f.damage.corrupt());
  CHECK(count_transfers(f) == 99);
  CHECK_FALSE(f.damage.notes.empty());
}

TEST_CASE("a damaged chunk header loses that chunk's records only") {
  TempDir dir;
  auto bytes = sample_file(dir.path, 150);  // 3 chunks
  bytes[kChunks + kChunk + 9] ^= 0xff;      // ordinal of the second chunk
  const TraceFile f = read_trace_bytes(bytes.data(), bytes.size());
  CHECK(f.damage.corrupt_chunks == 1);
  const size_t n = count_transfers(f);
  CHECK(n >= 150 - 63);
  CHECK(n < 150);
}

TEST_CASE("a record started but never committed counts as incomplete, not corrupt") {
  TempDir dir;
  auto bytes = sample_file(dir.path, 10);
  // Wipe the commit word of the last event record (index 10 holds a clock reading or event 9).
  const size_t last = kChunks + 10 * 64;
  std::memset(&bytes[last + 60], 0, 4);
  const TraceFile f = read_trace_bytes(bytes.data(), bytes.size());
  CHECK(f.damage.incomplete_records == 1);
  CHECK_FALSE(f.damage.corrupt());
}

TEST_CASE("a truncated file keeps every record before the cut") {
  TempDir dir;
  auto bytes = sample_file(dir.path, 120);
  bytes.resize(kChunks + kChunk + 30 * 64 + 17);  // mid-record in the second chunk
  const TraceFile f = read_trace_bytes(bytes.data(), bytes.size());
  CHECK(f.damage.truncated_bytes > 0);
  CHECK(f.damage.corrupt());
  const size_t n = count_transfers(f);
  CHECK(n >= 63 + 28);
  CHECK(n <= 63 + 30);
  // and the kept ones are the first ones, in order
  uint64_t expect = 0;
  for (const auto& e : f.events)
    if (auto* t = e.as<Transfer>()) CHECK(t->seq == expect++);
}

TEST_CASE("damaged metadata is counted and the events still read") {
  TempDir dir;
  auto bytes = sample_file(dir.path, 10);
  bytes[4096 + 12] ^= 0x01;  // inside the first string entry
  const TraceFile f = read_trace_bytes(bytes.data(), bytes.size());
  CHECK(f.damage.corrupt_metadata == 1);
  CHECK(count_transfers(f) == 10);
}

TEST_CASE("files that are not usable traces are refused with a reason") {
  TempDir dir;
  const auto good = sample_file(dir.path, 5);
  auto expect_error = [](std::vector<uint8_t> b, const std::string& why) {
    try {
      read_trace_bytes(b.data(), b.size(), "x.atrace");
      FAIL("no error for " << why);
    } catch (const TraceError& e) {
      CHECK(std::string(e.what()).find("x.atrace") == 0);
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
  };
  expect_error({}, "not an Astral trace");
  expect_error({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, "not an Astral trace");
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + 100), "truncated inside the file header");
  auto damaged = good;
  damaged[200] ^= 1;  // inside the host name
  expect_error(damaged, "header is damaged");
  auto newer = good;
  newer[8] = 9;  // version
  expect_error(newer, "version 9 is not supported");
}

TEST_CASE("read_trace_file names the path in its errors") {
  CHECK_THROWS_WITH(read_trace_file("/nonexistent/x.atrace"), Catch::Contains("/nonexistent/x.atrace"));
  TempDir dir;
  const std::string empty = dir.path + "/empty.atrace";
  std::ofstream(empty).close();
  CHECK_THROWS_WITH(read_trace_file(empty), Catch::Contains("empty file"));
}

TEST_CASE("find_trace_files searches folders and rejects missing paths") {
  TempDir dir;
  sample_file(dir.path + "/a/b", 1);
  sample_file(dir.path, 1);
  std::ofstream(dir.path + "/notes.txt") << "x";
  const auto files = find_trace_files({dir.path});
  CHECK(files.size() == 2);
  for (const auto& f : files) CHECK(f.size() > 7);
  CHECK_THROWS_WITH(find_trace_files({dir.path + "/missing"}), Catch::Contains("no such file"));
}

TEST_CASE("request ids are a pure function of the join keys") {
  // Both ends of a step compute the id from (comm, op, seq, channel, src, dst, step).
  const StepKeys sender{0x1234abcd, op_code("AllReduce"), 17, 2, 0, 1, 5};
  const StepKeys receiver = sender;  // the receiver knows the same keys
  CHECK(request_id(sender) == request_id(receiver));
  StepKeys other = sender;
  for (int field = 0; field < 7; ++field) {
    other = sender;
    switch (field) {
      case 0: other.comm_hash ^= 1; break;
      case 1: other.op = kP2pOp; break;
      case 2: other.seq += 1; break;
      case 3: other.channel += 1; break;
      case 4: other.src_rank = 1; break;
      case 5: other.dst_rank = 0; break;
      case 6: other.step += 1; break;
    }
    CHECK(request_id(other) != request_id(sender));
  }
  CHECK(request_id(MessageKeys{1, 2, 3}) == request_id(MessageKeys{1, 2, 3}));
  CHECK(request_id(MessageKeys{1, 2, 3}) != request_id(MessageKeys{1, 2, 4}));
  CHECK(request_id(MessageKeys{}) != 0);
  // Pinned values: the function is part of the file format (docs/trace-format.md); other tools
  // recompute it, so it must never change silently.
  CHECK(request_id(MessageKeys{1, 2, 3}) == 0x625f6a28c5c20b37ull);
  CHECK(request_id(sender) == 0x2053b51f90781ba7ull);
  CHECK(op_code("AllReduce") == 0x98323ab2u);
  // No collisions over a realistic key space.
  std::set<uint64_t> ids;
  for (uint64_t seq = 0; seq < 40; ++seq)
    for (uint16_t ch = 0; ch < 8; ++ch)
      for (int step = 0; step < 64; ++step) ids.insert(request_id(StepKeys{7, kP2pOp, seq, ch, 3, 4, step}));
  CHECK(ids.size() == 40u * 8u * 64u);
}

TEST_CASE("tracing is configured from ASTRAL_TRACE_* variables") {
  auto with_env = [](std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : {"ASTRAL_TRACE_DIR", "ASTRAL_TRACE_EVENTS", "ASTRAL_TRACE_MAX_MB", "ASTRAL_TRACE_ON_FULL",
                             "ASTRAL_TRACE_PREFIX", "RANK"})
      unsetenv(name);
    for (auto [k, v] : vars) setenv(k, v, 1);
    WriterOptions o;
    std::string error;
    const bool ok = options_from_environment(o, &error);
    return std::make_tuple(ok, o, error);
  };
  {
    auto [ok, o, error] = with_env({});
    CHECK_FALSE(ok);
    CHECK(error.find("ASTRAL_TRACE_DIR") != std::string::npos);
  }
  {
    auto [ok, o, error] = with_env({{"ASTRAL_TRACE_DIR", "/tmp/t"}, {"ASTRAL_TRACE_EVENTS", "net, coll"},
                                    {"ASTRAL_TRACE_MAX_MB", "16"}, {"ASTRAL_TRACE_ON_FULL", "stop"},
                                    {"ASTRAL_TRACE_PREFIX", "job7"}, {"RANK", "12"}});
    REQUIRE(ok);
    CHECK(o.dir == "/tmp/t");
    CHECK(o.event_mask == (kCategoryNet | kCategoryColl));
    CHECK(o.max_bytes == 16u << 20);
    CHECK(o.on_full == OnFull::Stop);
    CHECK(o.file_prefix == "job7");
    CHECK(o.rank == 12);
  }
  for (auto [name, value] : {std::pair{"ASTRAL_TRACE_EVENTS", "net,bogus"}, std::pair{"ASTRAL_TRACE_MAX_MB", "0"},
                             std::pair{"ASTRAL_TRACE_MAX_MB", "12x"}, std::pair{"ASTRAL_TRACE_ON_FULL", "rotate"}}) {
    auto [ok, o, error] = with_env({{"ASTRAL_TRACE_DIR", "/tmp/t"}, {name, value}});
    INFO(name << "=" << value);
    CHECK_FALSE(ok);
    CHECK(error.find(name) != std::string::npos);
  }
  with_env({});
}

TEST_CASE("a recycled chunk's left-overs are not damage, a torn record at its frontier is incomplete") {
  TempDir dir;
  auto w = Writer::open(small_options(dir.path, 4096 + 16384 + 8 * 4096));  // 8 chunks of 63 records
  REQUIRE(w);
  for (int i = 0; i < 8 * 63 + 10; ++i) w->record(transfer_event(EventKind::NetSendPosted, i));
  auto bytes = slurp(w->path());
  // Slot 0 was reused for the ninth chunk: records 1..10 are new, 11..63 are left from its first use.
  const TraceFile clean = read_trace_bytes(bytes.data(), bytes.size());
  CHECK_FALSE(clean.damage.corrupt());
  CHECK(clean.damage.incomplete_records == 0);
  CHECK(count_transfers(clean) == 8 * 63 - 53);
  // The writer killed while writing record 11: new words over a stale record.
  auto torn = bytes;
  for (int b = 0; b < 24; ++b) torn[kChunks + 11 * 64 + b] ^= 0x5a;
  const TraceFile t = read_trace_bytes(torn.data(), torn.size());
  CHECK(t.damage.incomplete_records == 1);
  CHECK_FALSE(t.damage.corrupt());
  // The same change in the middle of the new records is damage.
  auto bad = bytes;
  bad[kChunks + 5 * 64 + 3] ^= 0x01;
  CHECK(read_trace_bytes(bad.data(), bad.size()).damage.corrupt_records == 1);
}
