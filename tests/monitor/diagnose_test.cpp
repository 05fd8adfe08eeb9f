// Bundles and diagnoses: hand-written incidents in the reference's formats (not made by our
// generator), the bundle's host/clock/duplicate handling, the JSON contract and the timeline.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/timeline.hpp"
#include "monitor_test_util.hpp"
#include "test_paths.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

namespace {

Diagnosis diagnose_fixture(const std::string& name, Bundle* out = nullptr) {
  BundleOptions o;
  o.year = 2025;
  o.tz_offset_s = 0;
  o.jobs = 2;
  Bundle b = load_bundle(astral::test::fixture("astral/monitor/incidents/" + name), o);
  Diagnosis d = diagnose(b);
  if (out) *out = std::move(b);
  return d;
}

}  // namespace

TEST_CASE("Incident: RoCE NIC down seen by kernel, switch and NCCL (container host names)") {
  Bundle b;
  Diagnosis d = diagnose_fixture("roce-nic-down", &b);
  CHECK(b.host_aliases.at("kp-ddp-worker-0") == "gpu-a");
  REQUIRE(!d.root_causes.empty());
  const RootCause& top = d.root_causes[0];
  CHECK(top.component.kind == ComponentKind::nic);
  CHECK(top.component.host == "gpu-a");
  CHECK(top.component.device == "mlx5_4");
  CHECK(top.confidence > 0.8);
  bool kernel = false, sw = false, nccl = false;
  for (const Evidence& e : top.evidence) {
    kernel = kernel || (e.layer == Layer::kernel && e.line == 4);
    sw = sw || e.layer == Layer::switch_;
    nccl = nccl || e.kind == "retry_exceeded";
  }
  CHECK(kernel);
  CHECK(sw);
  CHECK(nccl);
  // The cable is named with the NIC, not ranked again on the same lines.
  REQUIRE(top.also_suspect.size() == 1);
  CHECK(top.also_suspect[0].kind == ComponentKind::link);
  CHECK(top.also_suspect[0].host == "gpu-a");
  CHECK(!top.also_suspect[0].switch_name.empty());
  for (size_t i = 1; i < d.root_causes.size(); ++i) {
    CHECK(d.root_causes[i].component.kind != ComponentKind::link);
    CHECK_FALSE((d.root_causes[i].component.host == "gpu-a" && d.root_causes[i].component.device == "mlx5_4"));
  }
  CHECK(d.incident.present);
  CHECK(d.incident.seq == 120049);
  CHECK(d.incident.op == "ALLREDUCE");
  CHECK(d.incident.world_size == 4);
  CHECK(format_time(d.incident.onset_us).substr(0, 19) == "2025-11-21T03:12:09");
}

TEST_CASE("Incident: GB200 NVLink Xid 149, sympathetic Xid 45 elsewhere") {
  Diagnosis d = diagnose_fixture("gb200-xid149");
  REQUIRE(!d.root_causes.empty());
  CHECK(d.root_causes[0].component.kind == ComponentKind::gpu);
  CHECK(d.root_causes[0].component.device == "0019:01:00");
  CHECK(d.root_causes[0].component.rank == 1);
  for (size_t i = 1; i < d.root_causes.size(); ++i) CHECK(d.root_causes[i].confidence < d.root_causes[0].confidence);
}

TEST_CASE("Incident: nccl#1409 desync, one rank in BROADCAST while the others ALLREDUCE") {
  Diagnosis d = diagnose_fixture("desync-1409");
  REQUIRE(!d.root_causes.empty());
  CHECK(d.root_causes[0].component.kind == ComponentKind::process);
  CHECK(d.root_causes[0].component.rank == 7);
  CHECK(d.root_causes[0].fault == "app_desync");
  CHECK(d.incident.stopped_first == std::vector<int>{7});
}

TEST_CASE("Healthy bundle with benign warnings: no root cause") {
  Bundle b;
  Diagnosis d = diagnose_fixture("healthy", &b);
  CHECK(d.root_causes.empty());
  CHECK_FALSE(d.incident.present);
  auto j = to_json(d, b);
  REQUIRE(j.contains("root_causes"));
  CHECK(j["root_causes"].is_array());
  CHECK(j["root_causes"].empty());
}

TEST_CASE("JSON report: root_causes first-class with component, confidence, evidence file:line") {
  Bundle b;
  Diagnosis d = diagnose_fixture("roce-nic-down", &b);
  auto j = to_json(d, b);
  const auto& rc = j["root_causes"][0];
  CHECK(rc["component"]["kind"] == "nic");
  CHECK(rc["component"]["host"] == "gpu-a");
  CHECK(rc["confidence"].get<double>() > 0.8);
  REQUIRE(rc.contains("also_suspect"));
  CHECK(rc["also_suspect"][0]["kind"] == "link");
  REQUIRE(rc["evidence"].size() > 0);
  CHECK(rc["evidence"][0].contains("file"));
  CHECK(rc["evidence"][0]["line"].get<int>() > 0);
  CHECK(rc["blast_radius"]["ranks"] == 4);
  CHECK(j["input"]["files"] == 4);
  CHECK(j["files"].size() == 4);
  // Sorted best first.
  for (size_t i = 1; i < j["root_causes"].size(); ++i)
    CHECK(j["root_causes"][i]["confidence"].get<double>() <= j["root_causes"][i - 1]["confidence"].get<double>());
}

TEST_CASE("Bundle: kern.log and dmesg of one host join, duplicates drop, uptimes get dated") {
  TempDir dir;
  dir.write("n1/kern.log",
            "Mar 10 12:00:00 n1 kernel: [ 1000.000000] mlx5_core 0000:0c:00.0 ibp12s0: Link up\n"
            "Mar 10 12:05:00 n1 kernel: [ 1300.000000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  dir.write("n1/dmesg.txt",
            "[ 1300.000000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
            "[ 1360.000000] NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=python3, An uncorrectable double bit error\n");
  BundleOptions o;
  o.year = 2025;
  o.tz_offset_s = 0;
  Bundle b = load_bundle(dir.path(), o);
  int xid79 = 0;
  const Event* dbe = nullptr;
  for (const Event& e : b.events) {
    xid79 += e.kind == "xid" && e.keys.xid == 79;
    if (e.kind == "xid" && e.keys.xid == 48) dbe = &e;
  }
  CHECK(xid79 == 1);
  CHECK(b.duplicates_removed == 1);
  REQUIRE(dbe);
  CHECK(format_time(dbe->time_us) == "2025-03-10T12:06:00.000000Z");
  CHECK(dbe->time_confidence_s <= 1);
  CHECK_THROWS_WITH(load_bundle(dir / "missing"), Catch::Contains("missing"));
}

TEST_CASE("Bundle: one zone for the bundle from the file times") {
  TempDir dir;
  // Written at 10:00 local (+08:00) = 02:00 UTC.
  dir.write("a/kern.log", "Jun  1 10:00:00 a kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  dir.write("b/kern.log", "Jun  1 09:59:00 b kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n");
  for (const char* f : {"a/kern.log", "b/kern.log"}) {
    struct timespec t[2];
    t[0].tv_sec = t[1].tv_sec = *parse_rfc3339("2025-06-01T02:00:01Z") / 1000000;
    t[0].tv_nsec = t[1].tv_nsec = 0;
    utimensat(AT_FDCWD, (dir / f).c_str(), t, 0);
  }
  Bundle b = load_bundle(dir.path());
  REQUIRE(b.events.size() == 2);
  CHECK(format_time(b.events[0].time_us) == "2025-06-01T01:59:00.000000Z");
  CHECK(format_time(b.events[1].time_us) == "2025-06-01T02:00:00.000000Z");
}

TEST_CASE("Timeline: Perfetto JSON with hosts, stuck collectives and root causes") {
  Bundle b;
  Diagnosis d = diagnose_fixture("roce-nic-down", &b);
  auto t = timeline_json(b, &d);
  REQUIRE(t["traceEvents"].is_array());
  bool host_track = false, stuck = false, cause = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "host gpu-a") host_track = true;
    if (e["ph"] == "X" && e["cat"] == "collective" && e["dur"].get<double>() > 5e8) stuck = true;
    if (e["ph"] == "X" && e["cat"] == "diagnosis") cause = true;
    if (e["ph"] != "M") CHECK(e.contains("ts"));
  }
  CHECK(host_track);
  CHECK(stuck);
  CHECK(cause);
}
