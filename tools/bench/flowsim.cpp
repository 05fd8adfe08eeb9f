// bench_flowsim: how long a uniform all-to-all takes to simulate with the class engine, against
// the per-connection simulator (the reference) measured in the same run, from 1K to 131K GPUs; and
// how long `astral fabric compare --gpus 16384` (four designs) takes. Times are CPU time of this
// thread (the machine may be shared; wall time is shown too); memory is the process's peak RSS.
//
//   bench_flowsim           131K and 16K targets, the 1K..16K table, compare at 16K
//   bench_flowsim --quick   16K and compare only
#include <sys/resource.h>
#include <time.h>

#include <astral/seer/flowsim.hpp>
#include <astral/seer/flowsim_compare.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace astral;

namespace {

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB on Linux
}

struct Sample {
  int gpus = 0;
  size_t connections = 0, classes = 0;
  double cpu = 0, wall = 0, efficiency = 0, completion = 0;
  std::string method, engine;
};

topo::Fabric fabric_of(int gpus, int radix) {
  topo::GenerateOptions g;
  g.kind = topo::FabricKind::kSameRailT2;
  g.gpus = gpus;
  g.radix = radix;
  return topo::generate_fabric(g);  // not timed: the simulator's input
}

Sample run(const topo::Fabric& fabric, const char* routing, seer::SimEngine engine) {
  seer::FlowSimOptions o;
  o.routing = *topo::parse_routing(routing);
  o.goodput_limit = 0;
  o.engine = engine;
  o.memory_limit_gib = 64;
  double c0 = cpu_now(), w0 = wall_now();
  seer::FlowSimResult r = seer::simulate(fabric, o);
  Sample s;
  s.cpu = cpu_now() - c0;
  s.wall = wall_now() - w0;
  s.gpus = fabric.gpu_count();
  s.connections = r.connections;
  s.classes = r.classes;
  s.efficiency = r.efficiency;
  s.completion = r.completion_s;
  s.method = r.method;
  s.engine = r.engine;
  return s;
}

double agreement(const Sample& fast, const Sample& ref) {
  return std::abs(fast.completion - ref.completion) / ref.completion;
}

bool target_131k() {
  std::printf("\n131,072 GPUs, same-rail-t2 radix 256 (3 tiers), routing same-rail, class engine\n");
  topo::Fabric f = fabric_of(131072, 256);
  seer::FlowSimOptions o;
  o.routing = *topo::parse_routing("same-rail");
  std::printf("memory estimate %.2f GiB (fabric: %zu links, %zu switches)\n",
              seer::estimate_memory_gib(f, o), f.links().size(), f.switches().size());
  Sample s = run(f, "same-rail", seer::SimEngine::kAuto);
  double rss = peak_rss_gib();
  bool pass = s.cpu <= 30 && rss <= 8 && s.engine == "counted";
  std::printf("%zu connections in %zu classes: %.2f s CPU (%.2f s wall), peak RSS %.2f GiB, "
              "efficiency %.4f (%s); targets <= 30 s, <= 8 GiB: %s\n",
              s.connections, s.classes, s.cpu, s.wall, rss, s.efficiency, s.method.c_str(),
              pass ? "PASS" : "FAIL");
  // The same size at radix 128: four same-rail pods joined by the core, and the fat tree.
  topo::GenerateOptions g;
  g.gpus = 131072;
  g.radix = 128;
  for (topo::FabricKind kind : {topo::FabricKind::kSameRailT2, topo::FabricKind::kFatTree}) {
    g.kind = kind;
    topo::Fabric at128 = topo::generate_fabric(g);
    const char* routing = kind == topo::FabricKind::kFatTree ? "ecmp" : "same-rail";
    Sample t = run(at128, routing, seer::SimEngine::kAuto);
    std::printf("radix 128 %s, routing %s (%s): %zu connections, %.2f s CPU, efficiency %.4f\n",
                topo::fabric_kind_name(kind), routing, t.engine.c_str(), t.connections, t.cpu,
                t.efficiency);
  }
  return pass;
}

bool target_16k() {
  std::printf("\n16,384 GPUs, same-rail-t2 radix 128, routing same-rail: counted classes against "
              "the per-connection simulator\n");
  topo::Fabric f = fabric_of(16384, 128);
  Sample fast = run(f, "same-rail", seer::SimEngine::kCounted);
  Sample ref = run(f, "same-rail", seer::SimEngine::kConnections);
  bool pass = fast.cpu <= 1.0 && agreement(fast, ref) <= 0.005;
  std::printf("counted %.3f s CPU (%.3f wall), per-connection %.3f s CPU (%.3f wall): speedup "
              "%.1fx; completion differs by %.2g (efficiency %.5f vs %.5f); targets <= 1 s, "
              "<= 0.5 %%: %s\n",
              fast.cpu, fast.wall, ref.cpu, ref.wall, ref.cpu / fast.cpu, agreement(fast, ref),
              fast.efficiency, ref.efficiency, pass ? "PASS" : "FAIL");
  std::printf("fat-tree radix 128, routing ecmp (no PXN, one connection per GPU pair):\n");
  topo::GenerateOptions g;
  g.kind = topo::FabricKind::kFatTree;
  g.gpus = 16384;
  g.radix = 128;
  topo::Fabric fat = topo::generate_fabric(g);
  Sample ffast = run(fat, "ecmp", seer::SimEngine::kCounted);
  Sample fref = run(fat, "ecmp", seer::SimEngine::kConnections);
  std::printf("counted %.3f s CPU, per-connection %.3f s CPU: speedup %.1fx, completion differs "
              "by %.2g (%zu connections)\n",
              ffast.cpu, fref.cpu, fref.cpu / ffast.cpu, agreement(ffast, fref), ffast.connections);
  return pass;
}

void table() {
  std::printf("\nsame-rail-t2 radix 128, routing same-rail (difference: of the completion, against "
              "per-connection)\n%7s %12s %8s %10s %10s %10s %8s %10s %10s\n",
              "GPUs", "connections", "classes", "counted_s", "classes_s", "per_conn_s", "speedup",
              "diff_cnt", "diff_cls");
  for (int gpus : {1024, 2048, 4096, 8192, 16384}) {
    topo::Fabric f = fabric_of(gpus, 128);
    Sample counted = run(f, "same-rail", seer::SimEngine::kCounted);
    Sample fast = run(f, "same-rail", seer::SimEngine::kClasses);
    Sample ref = run(f, "same-rail", seer::SimEngine::kConnections);
    std::printf("%7d %12zu %8zu %10.4f %10.4f %10.4f %7.1fx %10.2g %10.2g\n", gpus, fast.connections,
                fast.classes, counted.cpu, fast.cpu, ref.cpu, ref.cpu / counted.cpu,
                agreement(counted, ref), agreement(fast, ref));
    std::fflush(stdout);
  }
}

bool target_compare() {
  std::printf("\nastral fabric compare --gpus 16384 (four designs, radix 128, all-to-all)\n");
  topo::GenerateOptions g;
  g.radix = 128;
  seer::FlowSimOptions o;
  o.goodput_limit = 0;
  double w0 = wall_now(), c0 = cpu_now();
  seer::FabricComparison c = seer::compare_fabrics(16384, g, o);
  double wall = wall_now() - w0, cpu = cpu_now() - c0;
  bool pass = wall <= 5.0;
  std::printf("%zu rows in %.2f s wall (%.2f s CPU), gain %+.1f %%; target <= 5 s wall: %s\n",
              c.rows.size(), wall, cpu, 100 * c.gain, pass ? "PASS" : "FAIL");
  return pass;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("bench_flowsim: uniform all-to-all, 64 MiB per GPU, 1 QP, 8 GPUs and 8 x 400G per host\n");
  bool pass = true;
  if (!quick) pass = target_131k() && pass;  // first, so that the peak RSS is its own
  pass = target_16k() && pass;
  if (!quick) table();
  pass = target_compare() && pass;
  std::printf("\n%s\n", pass ? "all targets PASS" : "some target FAILED");
  return pass ? 0 : 1;
}
