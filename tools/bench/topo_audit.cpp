// Audit speed on the largest hwloc fixture (and the HGX node with its sysfs tree), side by side
// with the baseline of hwloc loading the same XML and nothing else.
//   build/release/bench/bench_topo_audit [iterations]
#include <hwloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "astral/topo/audit.hpp"

namespace {

double median_ms(int iterations, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void hwloc_load_only(const std::string& path) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_set_xml(t, path.c_str());
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_load(t);
  hwloc_topology_destroy(t);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  std::string fixtures = ASTRAL_FIXTURES_DIR;
  struct Case {
    const char* name;
    std::string xml, sysfs, profile;
  } cases[] = {
      {"aws-p4d (104 KB, largest)", fixtures + "/hwloc/aws-p4d-topology.xml", "", ""},
      {"nvidiaDGX2 + profile", fixtures + "/hwloc/nvidiaDGX2.xml", "", "dgx2"},
      {"HGX + sysfs + profile", fixtures + "/astral/topo/hgx-h100-8x400g/hwloc.xml",
       fixtures + "/astral/topo/hgx-h100-8x400g", "hgx-h100-8x400g"},
  };
  std::printf("%-28s %12s %14s %8s\n", "fixture", "audit ms", "hwloc-load ms", "ratio");
  for (const auto& c : cases) {
    astral::topo::AuditOptions opt;
    if (!c.profile.empty()) opt.profile = astral::topo::load_profile_by_name_or_path(c.profile);
    if (!c.sysfs.empty()) opt.sysfs.emplace(c.sysfs);
    double audit = median_ms(iterations, [&] {
      auto report = astral::topo::run_audit(astral::topo::load_hwloc_xml(c.xml), opt);
      if (report.checks.empty()) std::abort();
    });
    double load = median_ms(iterations, [&] { hwloc_load_only(c.xml); });
    std::printf("%-28s %12.2f %14.2f %7.2fx\n", c.name, audit, load, audit / load);
  }
  return 0;
}
