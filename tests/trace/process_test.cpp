// Real processes: a writer killed with SIGKILL, a ring of ranks exported to Chrome JSON, and the
// `astral trace` commands on their files.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "astral/trace/reader.hpp"
#include "run_process.hpp"
#include "trace_test_util.hpp"

using namespace astral::trace;
using astral::test::run_process;
using astral::trace::test::TempDir;
using nlohmann::json;

TEST_CASE("a writer killed with SIGKILL leaves every completed event readable") {
  TempDir dir;
  constexpr int kThreads = 3;
  const std::string counters_path = dir.path + "/counters";
  {
    std::ofstream c(counters_path, std::ios::binary);
    c << std::string(4096, '\0');
  }
  const int fd = open(counters_path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  auto* counters = static_cast<uint64_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(counters != MAP_FAILED);
  const std::string trace_dir = dir.path + "/trace";

  const pid_t pid = fork();
  if (pid == 0) {
    execl(TRACE_TEST_HELPER, TRACE_TEST_HELPER, "writer", trace_dir.c_str(), std::to_string(kThreads).c_str(),
          counters_path.c_str(), nullptr);
    _exit(127);
  }
  // Let every thread get well into its second chunk, then kill without warning.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto all_past = [&](uint64_t n) {
    for (int t = 0; t < kThreads; ++t)
      if (std::atomic_ref<uint64_t>(counters[t]).load() < n) return false;
    return true;
  };
  while (!all_past(20000) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  REQUIRE(all_past(20000));
  uint64_t claimed[kThreads];
  for (int t = 0; t < kThreads; ++t) claimed[t] = std::atomic_ref<uint64_t>(counters[t]).load();

  const auto files = find_trace_files({trace_dir});
  REQUIRE(files.size() == 1);
  const TraceFile f = read_trace_file(files[0]);
  CHECK_FALSE(f.info.closed);
  CHECK_FALSE(f.damage.corrupt());
  CHECK(f.damage.incomplete_records <= kThreads);  // at most one half-written record per thread
  std::map<uint64_t, std::vector<uint64_t>> seqs;
  for (const auto& e : f.events)
    if (auto* t = e.as<Transfer>()) seqs[t->conn_id].push_back(t->seq);
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << " published " << claimed[t]);
    const auto& s = seqs[t];
    // Every event the thread finished before the kill (seq < claimed) is there, in order, and
    // at most the one it was writing when killed comes after.
    REQUIRE(s.size() >= claimed[t]);
    REQUIRE(s.size() <= claimed[t] + 1);
    for (uint64_t i = 0; i < s.size(); ++i) REQUIRE(s[i] == i);
  }
  munmap(counters, 4096);
  close(fd);
}

namespace {

// Runs the 4-rank ring (separate processes, each its own "host") and exports it.
struct RingRun {
  TempDir dir;
  std::string trace_dir, json_path;
  RingRun(int ranks, int messages) {
    trace_dir = dir.path + "/traces";
    json_path = dir.path + "/timeline.json";
    auto r = run_process({TRACE_TEST_HELPER, "ring", trace_dir, std::to_string(ranks), std::to_string(messages), "8192"});
    REQUIRE(r.exit_code == 0);
  }
};

}  // namespace

TEST_CASE("a multi-process ring exports to Chrome JSON with a flow for every send") {
  constexpr int kRanks = 4, kMessages = 50;
  RingRun run(kRanks, kMessages);
  auto r = run_process({ASTRAL_CLI, "trace", "export", run.trace_dir, "-o", run.json_path, "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json summary = json::parse(r.out);
  CHECK(summary["files"] == kRanks);
  CHECK(summary["matched_transfers"] == kRanks * kMessages);
  CHECK(summary["unmatched_sends"] == 0);
  CHECK(summary["unmatched_receives"] == 0);
  CHECK(summary["alignment"]["causality_violations"] == 0);

  std::ifstream in(run.json_path);
  const json trace = json::parse(in);  // throws (fails the test) if not valid JSON
  REQUIRE(trace["traceEvents"].is_array());
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::string, int> flow_out, flow_in;
  std::map<int, int> sends_per_process, recvs_per_process;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (ph == "M" && e["name"] == "thread_name") thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (ph != "X") continue;
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["ts"].get<double>() >= 0);
    const std::string name = e["name"];
    if (name.rfind("send", 0) == 0) ++sends_per_process[e["pid"]];
    if (name.rfind("recv", 0) == 0) ++recvs_per_process[e["pid"]];
    if (e.contains("flow_out")) ++flow_out[e["bind_id"]];
    if (e.contains("flow_in")) ++flow_in[e["bind_id"]];
  }
  CHECK(process_names.size() == kRanks);  // a process per host
  for (const auto& [pid, name] : process_names) CHECK(name.rfind("host", 0) == 0);
  // every send has exactly one receive at the other end of its arrow
  CHECK(flow_out.size() == size_t(kRanks * kMessages));
  CHECK(flow_in.size() == flow_out.size());
  for (const auto& [id, n] : flow_out) {
    CHECK(n == 1);
    CHECK(flow_in[id] == 1);
  }
  // per-rank counts: each rank sent and received exactly its messages
  for (const auto& [pid, n] : sends_per_process) CHECK(n == kMessages);
  for (const auto& [pid, n] : recvs_per_process) CHECK(n == kMessages);
  CHECK(sends_per_process.size() == kRanks);
  bool rank_track = false;
  for (const auto& [key, name] : thread_names) rank_track |= name.rfind("rank ", 0) == 0 && name.find(" net ") != std::string::npos;
  CHECK(rank_track);
}

TEST_CASE("astral trace stats reports every rank and link of the ring") {
  RingRun run(3, 40);
  auto r = run_process({ASTRAL_CLI, "trace", "stats", run.trace_dir, "--json"});
  REQUIRE(r.exit_code == 0);
  const json s = json::parse(r.out);
  CHECK(s["level"] == "net transfers");
  CHECK(s["transfers"] == 120);
  CHECK(s["matched"] == 120);
  REQUIRE(s["ranks"].size() == 3);
  for (const auto& rank : s["ranks"]) {
    CHECK(rank["sends"] == 40);
    CHECK(rank["recvs"] == 40);
    CHECK(rank["bytes_sent"] == 40 * 8192);
  }
  REQUIRE(s["links"].size() == 3);
  for (const auto& l : s["links"]) {
    CHECK(l["transfers"] == 40);
    CHECK(l["gbytes_per_s"].get<double>() > 0);
    CHECK(l["send_latency"]["count"] == 40);
    CHECK(l["send_latency"]["p50_us"].get<double>() <= l["send_latency"]["p99_us"].get<double>());
    CHECK(l["src_nic"].get<std::string>().rfind("eth", 0) == 0);
  }
  auto human = run_process({ASTRAL_CLI, "trace", "stats", run.trace_dir});
  CHECK(human.exit_code == 0);
  CHECK(human.out.find("slowest links") != std::string::npos);
}

TEST_CASE("astral trace check passes clean files and fails damaged ones") {
  RingRun run(2, 10);
  auto ok = run_process({ASTRAL_CLI, "trace", "check", run.trace_dir});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("0 damaged") != std::string::npos);
  // Damage one record of one file.
  const auto files = find_trace_files({run.trace_dir});
  REQUIRE(files.size() == 2);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + (256 << 10) + 64 * 3 + 10);  // default metadata size in the ring helper
    f.put('\x5a');
  }
  auto bad = run_process({ASTRAL_CLI, "trace", "check", run.trace_dir, "--json"});
  CHECK(bad.exit_code == 1);
  const json j = json::parse(bad.out);
  CHECK(j["damaged"] == 1);
  // export still works with the damaged file, and says so
  auto exp = run_process({ASTRAL_CLI, "trace", "export", run.trace_dir, "-o", run.json_path});
  CHECK(exp.exit_code == 0);
  CHECK(exp.out.find("1 damaged") != std::string::npos);
}

TEST_CASE("astral trace rejects bad input with one line naming it") {
  TempDir dir;
  auto missing = run_process({ASTRAL_CLI, "trace", "export", dir.path + "/nope", "-o", dir.path + "/x.json"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find(dir.path + "/nope") != std::string::npos);
  auto empty = run_process({ASTRAL_CLI, "trace", "stats", dir.path});
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("no trace files") != std::string::npos);
  std::ofstream(dir.path + "/junk.atrace") << "not a trace";
  auto junk = run_process({ASTRAL_CLI, "trace", "export", dir.path, "-o", dir.path + "/x.json"});
  CHECK(junk.exit_code == 2);
  CHECK(junk.err.find("junk.atrace") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path + "/x.json"));
  auto check = run_process({ASTRAL_CLI, "trace", "check", dir.path});
  CHECK(check.exit_code == 1);
  CHECK(check.out.find("UNREADABLE") != std::string::npos);
  auto align = run_process({ASTRAL_CLI, "trace", "export", dir.path, "-o", dir.path + "/x.json", "--align", "ptp"});
  CHECK(align.exit_code == 2);
}
