// A connection's fabric path (astral/trace/path.hpp) in the trace: written with the connection's
// metadata entry, read back field for field, exported as the documented JSON, bounded in size,
// and absent (never damage) in files written before paths existed or by a newer writer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "astral/trace/chrome_export.hpp"
#include "astral/trace/reader.hpp"
#include "format.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::trace::test::small_options;
using astral::trace::test::TempDir;

namespace {

NetPath sample_path(size_t nqps) {
  NetPath p;
  p.transport = "ib";
  p.link_layer = "RoCE";
  p.policy = "pinned";
  p.source = "hash model: disjoint uplinks";
  p.port = 1;
  p.plane = 1;
  p.rail = 3;
  p.sl = 2;
  p.tc = 106;
  p.gid_index = 3;
  for (uint32_t q = 0; q < nqps; ++q)
    p.qps.push_back(NetPathQp{q, 0xc001 + q, uint16_t(0xc001 + q), 0, 0, int32_t(40 + q),
                              "r3-00:1 -> s0-0" + std::to_string(q) + ":3", ""});
  return p;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::vector<uint8_t> b;
  if (!f) return b;
  int c;
  while ((c = std::fgetc(f)) != EOF) b.push_back(uint8_t(c));
  std::fclose(f);
  return b;
}

// The offset of the first connection entry in the metadata region, 0 if none.
size_t connection_entry(const std::vector<uint8_t>& b) {
  format::FileHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  for (size_t off = h.metadata_offset; off + 8 <= h.metadata_offset + h.metadata_bytes;) {
    format::MetaEntryHeader e;
    std::memcpy(&e, b.data() + off, sizeof e);
    if (e.commit == 0 || e.bytes < 16) return 0;
    if (e.type == format::kMetaConnection) return off;
    off += e.bytes;
  }
  return 0;
}

// Changes the path tail's head of the first connection entry and re-commits the entry, as a
// writer that wrote those bytes would have.
std::vector<uint8_t> with_tail_head(const std::string& path, void (*edit)(format::MetaPathHead&)) {
  std::vector<uint8_t> b = file_bytes(path);
  const size_t off = connection_entry(b);
  REQUIRE(off != 0);
  uint8_t* tail = b.data() + off + sizeof(format::MetaEntryHeader) + sizeof(format::MetaConnection);
  format::MetaPathHead head;
  std::memcpy(&head, tail, sizeof head);
  edit(head);
  std::memcpy(tail, &head, sizeof head);
  const uint32_t commit = format::meta_checksum(b.data() + off, off);
  std::memcpy(b.data() + off, &commit, sizeof commit);
  return b;
}

std::string write_one(const std::string& dir, const NetPath* path) {
  auto w = Writer::open(small_options(dir));
  REQUIRE(w);
  Connection c{0x77, 0, 4791, 2, 1, w->intern("beta"), w->intern("mlx5_0"), 0, 0, true};
  w->add_connection(0xabc, c, path);
  Connection r{0x78, 0, 4791, 2, 1, w->intern("beta"), w->intern("mlx5_0"), 0, 0, false};
  w->add_connection(0xabc, r);  // tcp-like: no path
  w->close();
  return w->path();
}

}  // namespace

TEST_CASE("a connection's path round-trips through the writer and the reader") {
  TempDir dir;
  NetPath written = sample_path(3);
  written.note = "both ends under leaf r3-00";
  written.qps[2].uplink_link = -1;  // no hash model for this one: no uplink known
  written.qps[2].uplink.clear();
  const TraceFile f = read_trace_file(write_one(dir.path, &written));
  CHECK_FALSE(f.damage.corrupt());
  REQUIRE(f.connections.size() == 2);
  REQUIRE(f.connections[0].path);
  CHECK(*f.connections[0].path == written);
  CHECK_FALSE(f.connections[1].path);
  CHECK(f.connection_path(0x77) == &*f.connections[0].path);
  CHECK(f.connection_path(0x77, false) == nullptr);
  CHECK(f.connection_path(0x78) == nullptr);
  CHECK(f.connection(0x77)->port == 4791);  // the connection fields are unchanged by the tail
}

TEST_CASE("a fused device's path keeps each QP's member port, and single-port paths stay version 1") {
  TempDir dir;
  NetPath written = sample_path(16);  // the most an entry holds, each with a device string
  for (size_t q = 0; q < written.qps.size(); ++q) {
    written.qps[q].device = q % 2 ? "mlx5_1:1" : "mlx5_0:1";
  }
  const TraceFile f = read_trace_file(write_one(dir.path, &written));
  CHECK_FALSE(f.damage.corrupt());
  REQUIRE(f.connections[0].path);
  CHECK(*f.connections[0].path == written);
  const auto j = nlohmann::json::parse(path_to_json(written));
  CHECK(j["qps"][1]["device"] == "mlx5_1:1");
  CHECK_FALSE(nlohmann::json::parse(path_to_json(sample_path(1)))["qps"][0].contains("device"));
  // The version on disk: 2 only where a device is named (a reader from before skips only those).
  for (bool fused : {false, true}) {
    TempDir d;
    NetPath p = sample_path(3);
    if (fused) p.qps[2].device = "mlx5_3:1";
    const std::vector<uint8_t> bytes = file_bytes(write_one(d.path, &p));
    const uint8_t magic[4] = {'P', 'A', 'T', 'H'};
    auto at = std::search(bytes.begin(), bytes.end(), magic, magic + 4);
    REQUIRE(at != bytes.end());
    CHECK(int(*(at + 4)) == (fused ? 2 : 1));
  }
}

TEST_CASE("path_to_json has the documented shape") {
  NetPath p = sample_path(2);
  p.qps[1].uplink_link = -1;
  p.qps[1].uplink.clear();
  CHECK(path_to_json(p) ==
        R"({"transport":"ib","link_layer":"RoCE","policy":"pinned","source":"hash model: disjoint uplinks",)"
        R"("port":1,"plane":1,"rail":3,"sl":2,"tc":106,"gid_index":3,"qps":[)"
        R"({"qp":0,"flow_label":49153,"udp_sport":49153,"dlid":0,"path_index":0,"uplink":"r3-00:1 -> s0-00:3","uplink_link":40},)"
        R"({"qp":1,"flow_label":49154,"udp_sport":49154,"dlid":0,"path_index":0}]})");
  p.note = "fabric f.json carries no hash_model";
  p.qps_dropped = 2;
  const auto j = nlohmann::json::parse(path_to_json(p));
  CHECK(j["note"] == p.note);
  CHECK(j["qps_dropped"] == 2);
}

TEST_CASE("a path with more QPs than the entry holds keeps the first 16 and counts the rest") {
  TempDir dir;
  const NetPath written = sample_path(20);
  const TraceFile f = read_trace_file(write_one(dir.path, &written));
  CHECK_FALSE(f.damage.corrupt());
  const NetPath* p = f.connection_path(0x77);
  REQUIRE(p);
  REQUIRE(p->qps.size() == kMaxPathQps);
  CHECK(p->qps.back() == written.qps[kMaxPathQps - 1]);
  CHECK(p->qps_dropped == 4);
}

TEST_CASE("a file from before paths reads its connections without one") {
  // Written by the reader's previous release (the fuzz corpus): a connection entry of 56 bytes.
  const TraceFile f = read_trace_file(std::string(ASTRAL_FIXTURES_DIR) + "/astral/trace/corpus/kinds.atrace");
  CHECK_FALSE(f.damage.corrupt());
  REQUIRE(f.connections.size() == 1);
  CHECK_FALSE(f.connections[0].path);
}

TEST_CASE("a path tail from a newer writer is skipped, an impossible one is damage") {
  TempDir dir;
  const NetPath written = sample_path(2);
  const std::string path = write_one(dir.path, &written);
  {
    auto b = with_tail_head(path, [](format::MetaPathHead& h) { h.version = 3; });
    const TraceFile f = read_trace_bytes(b.data(), b.size());
    CHECK_FALSE(f.damage.corrupt());
    REQUIRE(f.connection(0x77));
    CHECK_FALSE(f.connection_path(0x77));
  }
  {
    auto b = with_tail_head(path, [](format::MetaPathHead& h) { h.nqps = 9; });  // entry holds 2
    const TraceFile f = read_trace_bytes(b.data(), b.size());
    CHECK(f.damage.corrupt_metadata == 1);
    REQUIRE(f.connection(0x77));  // the connection itself is intact
    CHECK_FALSE(f.connection_path(0x77));
  }
}

TEST_CASE("the Chrome export carries the path in the connect event's arguments") {
  TempDir dir;
  const NetPath written = sample_path(2);
  const TraceFile f = read_trace_file(write_one(dir.path, &written));
  const std::vector<TraceFile> files{f};
  const Matching m = match_transfers(files);
  std::ostringstream out;
  write_chrome_trace(out, files, m, align_clocks(files, m));
  const auto doc = nlohmann::json::parse(out.str());
  int connects = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") != "connect") continue;
    ++connects;
    CHECK(e["args"]["path"] == nlohmann::json::parse(path_to_json(written)));
  }
  CHECK(connects == 1);
}
