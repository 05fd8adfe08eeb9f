// The net plugin's own events, end to end: `astral netbench --trace-dir` runs real ranks (separate
// processes, the plugin loaded with dlopen, TCP over loopback), each writes its trace file, and
// `astral trace export` joins them. Plus the promise to the job: an unusable trace directory costs
// one warning and nothing else.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "astral/trace/cluster.hpp"
#include "astral/trace/reader.hpp"
#include "run_process.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::test::run_process;
using astral::trace::test::TempDir;
using nlohmann::json;

TEST_CASE("netbench with tracing: every send has its receive, per-rank counts match, export parses") {
  constexpr int kRanks = 3, kIters = 12, kWarmup = 3;
  constexpr uint64_t kBytes = 64 << 10;
  TempDir dir;
  const std::string traces = dir.path + "/traces", out = dir.path + "/timeline.json";
  auto r = run_process({ASTRAL_CLI, "netbench", "--pattern", "alltoall", "--ranks", std::to_string(kRanks), "--size",
                        "64K", "--iters", std::to_string(kIters), "--warmup", std::to_string(kWarmup), "--trace-dir",
                        traces},
                       120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("WARN") == std::string::npos);

  std::vector<TraceFile> files;
  for (const auto& path : find_trace_files({traces})) files.push_back(read_trace_file(path));
  REQUIRE(files.size() == kRanks);
  // Each all-to-all iteration: one message to and one from every peer.
  constexpr uint64_t kPerRank = uint64_t(kIters + kWarmup) * (kRanks - 1);
  std::set<int> ranks;
  for (const TraceFile& f : files) {
    INFO(f.info.path);
    CHECK_FALSE(f.damage.corrupt());
    ranks.insert(f.info.rank);
    std::map<EventKind, uint64_t> n;
    uint64_t bytes_sent = 0;
    for (const Event& e : f.events) {
      ++n[e.kind];
      if (e.kind == EventKind::NetSendDone) bytes_sent += e.as<Transfer>()->bytes;
    }
    CHECK(n[EventKind::NetSendPosted] == kPerRank);
    CHECK(n[EventKind::NetSendDone] == kPerRank);
    CHECK(n[EventKind::NetRecvPosted] == kPerRank);
    CHECK(n[EventKind::NetRecvDone] == kPerRank);
    CHECK(bytes_sent == kPerRank * kBytes);
    // A send and a receive connection per peer, each described once, each closed at the end.
    CHECK(n[EventKind::NetConnect] == 2 * (kRanks - 1));
    CHECK(n[EventKind::NetClose] == 2 * (kRanks - 1));
    CHECK(n[EventKind::NetError] == 0);
    REQUIRE(f.connections.size() == 2 * (kRanks - 1));
    for (const ConnectionRecord& c : f.connections) {
      CHECK(f.str(c.connection.nic) == "lo");
      CHECK(f.str(c.connection.remote_host) == "127.0.0.1");
      CHECK(c.connection.port > 0);
      CHECK(c.connection.streams >= 1);
    }
  }
  CHECK(ranks == std::set<int>{0, 1, 2});

  const Matching m = match_transfers(files);
  CHECK(m.matched == kRanks * kPerRank);
  CHECK(m.unmatched_sends == 0);
  CHECK(m.unmatched_recvs == 0);
  CHECK(m.duplicates == 0);
  for (const MatchedTransfer& t : m.transfers) {
    REQUIRE(t.send.present());
    REQUIRE(t.recv.present());
    CHECK(t.send.file != t.recv.file);
    CHECK(t.send.bytes == kBytes);
    CHECK(t.recv.bytes == kBytes);
    CHECK(t.send.conn_id == t.recv.conn_id);
  }

  auto e = run_process({ASTRAL_CLI, "trace", "export", traces, "-o", out, "--json"});
  INFO(e.err);
  REQUIRE(e.exit_code == 0);
  const json summary = json::parse(e.out);
  CHECK(summary["files"] == kRanks);
  CHECK(summary["matched_transfers"] == kRanks * kPerRank);
  std::ifstream in(out);
  const json trace = json::parse(in);
  std::map<std::string, int> flow_out, flow_in;
  std::map<std::string, uint64_t> sends_per_track;
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") thread_names[{ev["pid"], ev["tid"]}] = ev["args"]["name"];
    if (ev["ph"] != "X") continue;
    if (ev.contains("flow_out")) ++flow_out[ev["bind_id"].dump()];
    if (ev.contains("flow_in")) ++flow_in[ev["bind_id"].dump()];
  }
  CHECK(flow_out.size() == kRanks * kPerRank);  // an arrow from every send to its receive
  CHECK(flow_in.size() == flow_out.size());
  for (const auto& [id, count] : flow_out) CHECK(flow_in[id] == 1);
  std::set<std::string> net_tracks;
  for (const auto& [key, name] : thread_names)
    if (name.find(" net ") != std::string::npos) net_tracks.insert(name.substr(0, name.find(" net ")));
  CHECK(net_tracks == std::set<std::string>{"rank 0", "rank 1", "rank 2"});
}

TEST_CASE("an unusable trace directory costs the job one warning per rank and nothing else") {
  TempDir dir;
  const std::string blocker = dir.path + "/file";
  std::ofstream(blocker) << "not a directory";
  auto r = run_process({ASTRAL_CLI, "netbench", "--pattern", "pingpong", "--size", "8", "--iters", "50",
                        "--trace-dir", blocker + "/traces"},
                       120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);  // the run itself is unaffected
  size_t warnings = 0;
  for (size_t at = 0; (at = r.err.find("WARN", at)) != std::string::npos; ++at) ++warnings;
  CHECK(warnings == 2);  // one per rank
  CHECK(r.err.find("tracing is off") != std::string::npos);
}
