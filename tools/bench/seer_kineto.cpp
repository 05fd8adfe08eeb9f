// Calibration from a large PyTorch profiler (Kineto) trace (target: 200 MB in <= 10 s). The trace
// is built by repeating the shapes fixture's events (ids and times shifted) until it reaches the
// size asked for; then, in the same run, the baseline (a plain JSON parse of the same file that
// keeps nothing: nlohmann::json::accept over the mapped bytes) and `calibrate --kineto`'s whole
// path (streaming read, classification, shape recovery, fit). Times are this thread's CPU time
// (the build machine is shared), wall time printed too.
//
//   bench_seer_kineto [MB (default 200)] [trace path (default /tmp/astral-bench-kineto-<pid>.json)]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "astral/seer/calibrate_kineto.hpp"
#include "astral/seer/inputs.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {

double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Writes a trace of at least `bytes` from the fixture's events; returns the size written.
size_t write_big_trace(const std::string& path, size_t bytes) {
  std::ifstream in(std::string(ASTRAL_FIXTURES_DIR) + "/astral/seer/kineto-shapes-rank0.json");
  json fixture = json::parse(in);
  const json& events = fixture["traceEvents"];
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (!out) return 0;
  std::fputs(R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":2},"traceEvents":[)", out);
  size_t written = 0;
  bool first = true;
  for (long copy = 0; written < bytes; ++copy) {
    for (json e : events) {
      e["ts"] = e["ts"].get<double>() + double(copy) * 1e6;
      if (e.contains("args")) {
        auto& a = e["args"];
        if (a.contains("External id")) a["External id"] = a["External id"].get<long>() + copy * 100000;
        if (a.contains("correlation")) a["correlation"] = a["correlation"].get<long>() + copy * 100000;
      }
      std::string s = e.dump();
      if (!first) std::fputc(',', out);
      first = false;
      std::fputs(s.c_str(), out);
      written += s.size() + 1;
    }
  }
  std::fputs("]}\n", out);
  std::fclose(out);
  return written;
}

bool plain_parse(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st {};
  ::fstat(fd, &st);
  void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  const char* c = static_cast<const char*>(p);
  bool ok = json::accept(c, c + st.st_size);
  ::munmap(p, size_t(st.st_size));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 200.0;
  const std::string path = argc > 2 ? argv[2] : "/tmp/astral-bench-kineto-" + std::to_string(::getpid()) + ".json";
  const size_t size = write_big_trace(path, size_t(mb * 1e6));
  if (size == 0) {
    std::fprintf(stderr, "bench_seer_kineto: cannot write %s\n", path.c_str());
    return 2;
  }
  HardwareSpec hw = load_hardware("a100-80gb");
  double c0 = cpu_now(), w0 = wall_now();
  const bool ok = plain_parse(path);
  double c1 = cpu_now(), w1 = wall_now();
  KinetoCalibration cal = calibrate_kineto(hw, read_kineto_trace(path));
  double c2 = cpu_now(), w2 = wall_now();
  if (argc <= 2) std::remove(path.c_str());
  const double base = c1 - c0, ours = c2 - c1;
  std::printf("trace: %.1f MB, %ld kernels, %zu distinct shapes fitted (gemm %.3f)\n", size / 1e6, cal.kernels,
              cal.fit.rows.size(), cal.fit.calibrated.eff.gemm);
  std::printf("baseline  json::accept (parse, keep nothing)   %7.2f s cpu  %7.2f s wall  %s\n", base, w1 - w0,
              ok ? "" : "(INVALID JSON)");
  std::printf("calibrate --kineto (read + classify + fit)     %7.2f s cpu  %7.2f s wall\n", ours, w2 - w1);
  std::printf("ratio calibrate / plain parse: %.2f; target <= 10 s for 200 MB: %s\n", ours / base,
              ours * 200e6 / double(size) <= 10.0 ? "met" : "NOT met");
  return ok ? 0 : 1;
}
