// Accuracy on generated incidents (issue 7): top-1 root cause >= 97 % over the fault kinds, and a
// root cause claimed on <= 2 % of fault-free bundles. Small jobs keep CI cheap; the large run is
// bench_monitor.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/simulate.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Accuracy on 22 generated scenarios of every fault kind, plant faults included") {
  const FabricGraph fabric = make_rail_fabric(24, 8, 8, 2);
  TempDir dir;
  const int per_kind = 22;
  int faults = 0, correct = 0, healthy = 0, false_claims = 0;
  std::map<std::string, std::pair<int, int>> by_kind;  // kind -> (correct, total)
  std::vector<std::string> misses;
  for (FaultKind kind : all_fault_kinds()) {
    for (int i = 0; i < per_kind; ++i) {
      SimulateOptions o;
      o.fault = kind;
      o.ranks = i % 2 ? 24 : 16;
      o.seed = uint64_t(7000 + i);
      const std::string name = std::string(to_string(kind)) + "-" + std::to_string(i);
      GroundTruth truth = simulate(fabric, o, dir / name);
      BundleOptions bo;
      bo.jobs = 1;
      Bundle b = load_bundle(dir / name, bo);
      Diagnosis d = diagnose(b);
      auto& k = by_kind[std::string(to_string(kind))];
      ++k.second;
      if (kind == FaultKind::none) {
        ++healthy;
        if (!d.root_causes.empty()) {
          ++false_claims;
          misses.push_back(name + ": claimed " + d.root_causes[0].summary);
        } else {
          ++k.first;
        }
      } else {
        ++faults;
        if (!d.root_causes.empty() && matches(d.root_causes[0], truth)) {
          ++correct, ++k.first;
        } else {
          misses.push_back(name + ": expected " + truth.description + ", got " +
                           (d.root_causes.empty() ? std::string("nothing") : d.root_causes[0].summary));
        }
      }
    }
  }
  for (auto& [kind, ck] : by_kind) std::printf("accuracy %-14s %2d/%2d\n", kind.c_str(), ck.first, ck.second);
  std::printf("top-1 %d/%d (%.1f %%), false claims %d/%d\n", correct, faults, 100.0 * correct / faults, false_claims,
              healthy);
  for (const auto& m : misses) std::printf("  miss %s\n", m.c_str());
  CHECK(faults + healthy >= 200);
  CHECK(double(correct) >= 0.97 * faults);
  CHECK(double(false_claims) <= 0.02 * healthy);
}

TEST_CASE("Healthy runs with cleared or unrelated conditions stay healthy") {
  // The simulator's healthy runs carry traps: a RAS mismatch cleared at the next report, a slow
  // checkpoint iteration, a stale Xid from before the job, a flap on a port outside the job; and
  // they end with Destroy COMPLETE on every rank. None of them may become a root cause.
  const FabricGraph fabric = make_rail_fabric(24, 8, 8, 2);
  TempDir dir;
  int ras_cleared = 0, checkpoints = 0, stale_xids = 0, outside_flaps = 0, claims = 0;
  for (int i = 0; i < 16; ++i) {
    SimulateOptions o;
    o.fault = FaultKind::none;
    o.ranks = 16;
    o.seed = uint64_t(9100 + i);
    const std::string name = "healthy-" + std::to_string(i);
    GroundTruth truth = simulate(fabric, o, dir / name);
    BundleOptions bo;
    bo.jobs = 1;
    Bundle b = load_bundle(dir / name, bo);
    bool mismatch = false, ok_after = false, stale = false, flap = false, checkpoint = false;
    int64_t job_start = INT64_MAX;
    for (const Event& e : b.events)
      if (e.kind == "nccl_init" && e.has_time()) job_start = std::min(job_start, e.time_us);
    for (const Event& e : b.events) {
      mismatch = mismatch || e.kind == "ras_lagging_rank";
      ok_after = ok_after || (e.kind == "ras_comm_status" && e.attr("errors") == "OK");
      stale = stale || (e.kind == "xid" && e.keys.xid == 48 && e.has_time() && e.time_us < job_start);
      flap = flap || (e.kind == "nic_link_down" &&
                      std::find(truth.hosts.begin(), truth.hosts.end(), e.host) == truth.hosts.end());
      checkpoint = checkpoint || e.message.find("Saving checkpoint") != std::string::npos;
    }
    ras_cleared += mismatch && ok_after;
    stale_xids += stale;
    outside_flaps += flap;
    checkpoints += checkpoint || std::any_of(b.samples.begin(), b.samples.end(), [](const CollectiveSample& s) {
                     return s.duration_us > 0 && s.rank == 0;
                   });
    Diagnosis d = diagnose(b);
    if (!d.root_causes.empty()) {
      ++claims;
      std::printf("  healthy %s claimed %s\n", name.c_str(), d.root_causes[0].summary.c_str());
    }
  }
  std::printf("traps: ras cleared %d, checkpoints %d, stale xids %d, outside flaps %d; claims %d/16\n", ras_cleared,
              checkpoints, stale_xids, outside_flaps, claims);
  CHECK(ras_cleared >= 3);
  CHECK(checkpoints >= 3);
  CHECK(stale_xids >= 3);
  CHECK(outside_flaps >= 3);
  CHECK(claims == 0);
}
