// bench_monitor: the monitor's speed targets, measured side by side with a baseline.
//   1. Parsing >= 200 MB/s per core, printed as a ratio against `grep -c ''` over the same files.
//   2. A 16,384-rank bundle diagnosed in <= 30 s with 2 parser threads (this 2-core machine).
// The bundle is generated once (astral monitor simulate) and reused from --dir.
//   bench_monitor [--ranks 16384] [--dir /tmp/astral-bench-monitor] [--fault nic-down] [--jobs 2]
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
  // Baseline: grep -c '' (one process at a time over the same files: one core), CPU time.
  double grep_s = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    double c0 = cpu_children();
    std::string cmd = "find '" + bundle + "' -type f -print0 | xargs -0 grep -c '' > /dev/null";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: grep baseline failed\n");
    grep_s = std::min(grep_s, cpu_children() - c0);
  }
  // Ours: every file through detection and its parser, one thread, CPU time; text logs and
  // structured dumps (JSON) reported apart as well.
  double parse_s = 1e9, text_s = 0, json_s = 0;
  uint64_t lines = 0, events = 0, text_bytes = 0, json_bytes = 0;
  for (int rep = 0; rep < 3; ++rep) {
    lines = events = text_bytes = json_bytes = 0;
    double t_text = 0, t_json = 0;
    for (const std::string& f : files) {
      ParseOptions o;
      o.default_host = "h";
      double c0 = cpu_self();
      ParseResult r = parse_file(f, o);
      double dt = cpu_self() - c0;
      (r.stats.kind == FileKind::text_log ? t_text : t_json) += dt;
      (r.stats.kind == FileKind::text_log ? text_bytes : json_bytes) += r.stats.bytes;
      lines += r.stats.lines;
      events += r.events.size();
    }
    if (t_text + t_json < parse_s) parse_s = t_text + t_json, text_s = t_text, json_s = t_json;
  }
  const double ours = mb / parse_s, grep = mb / grep_s;
  std::printf("parse: %zu files, %.1f MB (%.1f MB text logs, %.1f MB JSON dumps), %llu lines, %llu events\n",
              files.size(), mb, double(text_bytes) / 1e6, double(json_bytes) / 1e6,
              static_cast<unsigned long long>(lines), static_cast<unsigned long long>(events));
  std::printf("parse: astral %.0f MB/s per core (%.2f CPU s; text logs %.0f MB/s, JSON dumps %.0f MB/s), "
              "grep -c '' %.0f MB/s (%.2f CPU s), ratio %.2f  [target >= 200 MB/s]\n",
              ours, parse_s, double(text_bytes) / 1e6 / std::max(text_s, 1e-9),
              double(json_bytes) / 1e6 / std::max(json_s, 1e-9), grep, grep_s, ours / grep);
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
