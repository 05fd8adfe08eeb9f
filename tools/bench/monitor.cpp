// bench_monitor: the monitor's speed targets, measured side by side with a baseline.
//   1. Parsing >= 200 MB/s per core, printed as a ratio against `grep -c ''` over the same files.
//   2. A 16,384-rank bundle diagnosed in <= 30 s with 2 parser threads (this 2-core machine).
// The bundle is generated once (astral monitor simulate) and reused from --dir.
//   bench_monitor [--ranks 16384] [--dir /tmp/astral-bench-monitor] [--fault nic-down] [--jobs 2]
//                 [--parse-only yes]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/parse.hpp"
#include "astral/monitor/simulate.hpp"

namespace fs = std::filesystem;
using namespace astral::monitor;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds of this process / of its finished children: "per core" on a shared, busy machine.
double cpu_self() {
  rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
double cpu_children() {
  rusage u {};
  getrusage(RUSAGE_CHILDREN, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = std::atoi(arg(argc, argv, "--ranks", "16384").c_str());
  const unsigned jobs = unsigned(std::atoi(arg(argc, argv, "--jobs", "2").c_str()));
  const std::string fault = arg(argc, argv, "--fault", "nic-down");
  const std::string dir = arg(argc, argv, "--dir", "/tmp/astral-bench-monitor");
  const std::string bundle = dir + "/bundle-" + std::to_string(ranks) + "-" + fault;
  if (!fs::exists(bundle + ".truth.json")) {
    fs::remove_all(bundle);
    fs::create_directories(dir);
    const int hosts = (ranks + 7) / 8;
    std::fprintf(stderr, "generating a %d-rank bundle (%d hosts) in %s ...\n", ranks, hosts, bundle.c_str());
    auto t = Clock::now();
    SimulateOptions o;
    o.fault = *parse_fault_kind(fault);
    o.ranks = ranks;
    o.seed = 42;
    simulate(make_rail_fabric(hosts + 2, 8, 32, 4), o, bundle);
    std::fprintf(stderr, "generated in %.1f s\n", since(t));
  }
  std::vector<std::string> files;
  uint64_t bytes = 0;
  for (auto& e : fs::recursive_directory_iterator(bundle))
    if (e.is_regular_file()) files.push_back(e.path().string()), bytes += uint64_t(e.file_size());
  const double mb = double(bytes) / 1e6;
  // Warm the page cache so both sides read from memory.
  {
    std::string cmd = "find '" + bundle + "' -type f -print0 | xargs -0 cat > /dev/null";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: warm-up failed\n");
  }
  // Ours: every file through detection and its parser, one thread, CPU time. Text logs and
  // structured dumps (JSON) are timed apart (one clock reading per group, not per file: the
  // files are small and reading the clock would be measured too); an untimed pass sorts them.
  std::vector<std::string> text_files, json_files;
  uint64_t lines = 0, events = 0, text_bytes = 0, json_bytes = 0;
  for (const std::string& f : files) {
    ParseOptions o;
    o.default_host = "h";
    ParseResult r = parse_file(f, o);
    (r.stats.kind == FileKind::text_log ? text_files : json_files).push_back(f);
    (r.stats.kind == FileKind::text_log ? text_bytes : json_bytes) += r.stats.bytes;
    lines += r.stats.lines;
    events += r.events.size();
  }
  auto parse_all = [](const std::vector<std::string>& group) {
    double c0 = cpu_self();
    size_t n = 0;
    for (const std::string& f : group) {
      ParseOptions o;
      o.default_host = "h";
      n += parse_file(f, o).events.size();
    }
    double dt = cpu_self() - c0;
    if (n == size_t(-1)) std::puts("");  // keeps the work observable
    return dt;
  };
  // Baseline: grep -c '' (one process at a time over the same files: one core), CPU time;
  // interleaved with ours so that both see the same machine.
  auto grep_all = [&] {
    double c0 = cpu_children();
    std::string cmd = "find '" + bundle + "' -type f -print0 | xargs -0 grep -c '' > /dev/null";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: grep baseline failed\n");
    return cpu_children() - c0;
  };
  double text_s = 1e9, json_s = 1e9, grep_s = 1e9;
  for (int rep = 0; rep < 5; ++rep) {  // best of 5 on both sides: this machine is shared
    grep_s = std::min(grep_s, grep_all());
    text_s = std::min(text_s, parse_all(text_files));
    json_s = std::min(json_s, parse_all(json_files));
  }
  const double parse_s = text_s + json_s;
  const double ours = mb / parse_s, grep = mb / grep_s;
  std::printf("parse: %zu files, %.1f MB (%.1f MB text logs, %.1f MB JSON dumps), %llu lines, %llu events\n",
              files.size(), mb, double(text_bytes) / 1e6, double(json_bytes) / 1e6,
              static_cast<unsigned long long>(lines), static_cast<unsigned long long>(events));
  std::printf("parse: astral %.0f MB/s per core (%.2f CPU s; text logs %.0f MB/s, JSON dumps %.0f MB/s), "
              "grep -c '' %.0f MB/s (%.2f CPU s), ratio %.2f  [target >= 200 MB/s]\n",
              ours, parse_s, double(text_bytes) / 1e6 / std::max(text_s, 1e-9),
              double(json_bytes) / 1e6 / std::max(json_s, 1e-9), grep, grep_s, ours / grep);
  if (arg(argc, argv, "--parse-only", "no") == std::string("yes")) return 0;
  // Diagnosis of the whole bundle with `jobs` parser threads.
  auto t = Clock::now();
  BundleOptions bo;
  bo.jobs = jobs;
  Bundle b = load_bundle(bundle, bo);
  const double load_s = since(t);
  Diagnosis d = diagnose(b);
  const double total_s = since(t);
  std::printf("diagnose: %d ranks, %zu files, %zu events: load %.2f s + diagnose %.2f s = %.2f s with %u threads  "
              "[target <= 30 s]\n",
              ranks, b.files.size(), b.events.size(), load_s, total_s - load_s, total_s, jobs);
  std::ifstream truth_file(bundle + ".truth.json");
  std::string truth((std::istreambuf_iterator<char>(truth_file)), std::istreambuf_iterator<char>());
  if (!d.root_causes.empty())
    std::printf("diagnose: top cause %s (%.2f): %s\n", std::string(to_string(d.root_causes[0].component.kind)).c_str(),
                d.root_causes[0].confidence, d.root_causes[0].summary.c_str());
  return 0;
}
