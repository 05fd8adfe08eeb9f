// bench_monitor_journal: the 16K-rank incident diagnosed from journal files against the same
// bundle read from files, side by side in one run (target: journal <= 2x files).
// The host lines of bench_monitor's bundle are loaded into a journal folder once, by the real
// systemd-journal-remote (export format, one journal file per group of hosts, like a collector's
// per-sender files); the job's structured dumps and the switch logs stay files on both sides.
//   bench_monitor_journal [--ranks 16384] [--dir /tmp/astral-bench-monitor] [--fault nic-down]
//                         [--jobs 2] [--groups 16]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/simulate.hpp"
#include "astral/monitor/sources.hpp"

namespace fs = std::filesystem;
using namespace astral::monitor;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return argv[i + 1];
  return fallback;
}

void append_entry(std::string& out, int64_t t, const std::string& host, const std::string& line) {
  out += "__REALTIME_TIMESTAMP=" + std::to_string(t) + "\n__MONOTONIC_TIMESTAMP=" + std::to_string(t % 100000000000LL) +
         "\n_BOOT_ID=00112233445566778899aabbccddeeff\n_HOSTNAME=" + host + "\nMESSAGE\n";
  const uint64_t n = line.size();
  for (int i = 0; i < 8; ++i) out += char((n >> (8 * i)) & 0xff);
  out += line + "\n\n";
}

// The job folder without the host text logs (hard links), and the journal folder with them.
void build_journal(const std::string& bundle, const std::string& job, const std::string& journal, unsigned jobs,
                   int groups) {
  BundleOptions o;
  o.jobs = jobs;
  Bundle b = load_bundle(bundle, o);
  std::map<std::pair<uint32_t, uint32_t>, int64_t> time_of_line;
  for (const Event& e : b.events)
    if (e.has_time() && e.line) time_of_line.emplace(std::make_pair(e.file, e.line), e.time_us);
  std::map<std::string, int> group_of_host;
  std::vector<std::vector<std::tuple<int64_t, std::string, std::string>>> lines(static_cast<size_t>(groups));
  fs::create_directories(job);
  fs::create_directories(journal);
  for (uint32_t k = 0; k < b.files.size(); ++k) {
    const FileStats& f = b.files[k];
    const bool host_text = f.kind == FileKind::text_log && f.path.rfind("switches/", 0) != 0;
    if (!host_text) {
      fs::create_directories(fs::path(job + "/" + f.path).parent_path());
      fs::create_hard_link(bundle + "/" + f.path, job + "/" + f.path);
      continue;
    }
    auto it = group_of_host.emplace(f.host, int(group_of_host.size()) % groups).first;
    auto& into = lines[size_t(it->second)];
    std::ifstream in(bundle + "/" + f.path);
    int64_t t = kUnknownTime;
    uint32_t n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (auto hit = time_of_line.find({k, n}); hit != time_of_line.end()) t = hit->second;
      if (t != kUnknownTime && !line.empty()) into.emplace_back(t, f.host, line);
    }
  }
  for (const std::string& src : b.fabric_sources) fs::create_hard_link(bundle + "/" + src, job + "/" + src);
  for (int g = 0; g < groups; ++g) {
    auto& group = lines[size_t(g)];
    std::stable_sort(group.begin(), group.end(), [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
    const std::string export_file = journal + "/group-" + std::to_string(g) + ".export";
    {
      std::string stream;
      for (const auto& [t, host, line] : group) append_entry(stream, t, host, line);
      std::ofstream(export_file, std::ios::binary) << stream;
    }
    const std::string cmd = "/lib/systemd/systemd-journal-remote --split-mode=none --output='" + journal +
                            "/remote-group" + std::to_string(g) + ".journal' '" + export_file + "' 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: journal-remote failed for group %d\n", g);
    fs::remove(export_file);
  }
}

struct Run {
  double load_s = 0, diagnose_s = 0;
  size_t files = 0, events = 0;
  std::string top;
};

Run run(const std::string& bundle, const BundleOptions& o) {
  Run r;
  auto t = Clock::now();
  Bundle b = load_bundle(bundle, o);
  r.load_s = since(t);
  t = Clock::now();
  Diagnosis d = diagnose(b);
  r.diagnose_s = since(t);
  r.files = b.files.size();
  r.events = b.events.size();
  if (!d.root_causes.empty()) {
    const RootCause& c = d.root_causes[0];
    r.top = c.fault + " " + std::string(to_string(c.component.kind)) + " " + c.component.host + " " + c.component.device +
            " " + c.component.switch_name + " " + c.component.port;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = std::atoi(arg(argc, argv, "--ranks", "16384").c_str());
  const unsigned jobs = unsigned(std::atoi(arg(argc, argv, "--jobs", "2").c_str()));
  const int groups = std::max(1, std::atoi(arg(argc, argv, "--groups", "16").c_str()));
  const std::string fault = arg(argc, argv, "--fault", "nic-down");
  const std::string dir = arg(argc, argv, "--dir", "/tmp/astral-bench-monitor");
  const std::string bundle = dir + "/bundle-" + std::to_string(ranks) + "-" + fault;
  if (!fs::exists(bundle + ".truth.json")) {  // the same bundle bench_monitor makes
    fs::remove_all(bundle);
    fs::create_directories(dir);
    const int hosts = (ranks + 7) / 8;
    std::fprintf(stderr, "generating a %d-rank bundle (%d hosts) in %s ...\n", ranks, hosts, bundle.c_str());
    SimulateOptions o;
    o.fault = *parse_fault_kind(fault);
    o.ranks = ranks;
    o.seed = 42;
    simulate(make_rail_fabric(hosts + 2, 8, 32, 4), o, bundle);
  }
  const std::string job = bundle + ".job", journal = bundle + ".journal";
  if (!fs::exists(journal + "/.complete")) {
    fs::remove_all(job);
    fs::remove_all(journal);
    std::fprintf(stderr, "loading the host lines into %s (systemd-journal-remote) ...\n", journal.c_str());
    auto t = Clock::now();
    build_journal(bundle, job, journal, jobs, groups);
    std::ofstream(journal + "/.complete") << "done\n";
    std::fprintf(stderr, "journal written in %.1f s\n", since(t));
  }
  uint64_t journal_bytes = 0;
  for (auto& e : fs::directory_iterator(journal))
    if (e.path().extension() == ".journal") journal_bytes += uint64_t(e.file_size());
  // Warm the page cache so both sides read from memory.
  const std::string warm = "cat '" + bundle + "'/*/* '" + journal + "'/*.journal > /dev/null 2>&1";
  if (std::system(warm.c_str()) != 0) std::fprintf(stderr, "warning: warm-up incomplete\n");

  BundleOptions files;
  files.jobs = jobs;
  const Run a = run(bundle, files);
  BundleOptions with_journal;
  with_journal.jobs = jobs;
  JournalSourceOptions j;
  j.dir = journal;
  j.jobs = jobs;
  with_journal.sources.push_back(journal_source(j));
  const Run b = run(job, with_journal);
  const double ta = a.load_s + a.diagnose_s, tb = b.load_s + b.diagnose_s;
  std::printf("files:   %d ranks, %zu files, %zu events: load %.2f s + diagnose %.2f s = %.2f s\n", ranks, a.files,
              a.events, a.load_s, a.diagnose_s, ta);
  std::printf("journal: %d ranks, %zu files (%.0f MB of journal), %zu events: load %.2f s + diagnose %.2f s = %.2f s\n",
              ranks, b.files, double(journal_bytes) / 1e6, b.events, b.load_s, b.diagnose_s, tb);
  std::printf("ratio journal/files: %.2fx  [target <= 2x]   same root cause: %s\n  files:   %s\n  journal: %s\n",
              tb / ta, a.top == b.top ? "yes" : "NO", a.top.c_str(), b.top.c_str());
  return 0;
}
