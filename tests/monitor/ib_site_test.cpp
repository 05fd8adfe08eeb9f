// InfiniBand sites: NCCL's device index joined to the HCA through NCCL's own init line and to the
// fabric through ibnetdiscover; switch-side counters from perfquery, ibqueryerrors, ibdiagnet and
// UFM naming the switch port's optic rather than the NIC that only saw the consequences; and the
// metric-change evidence slot of the network candidates.
#include <algorithm>

#include <catch2/catch.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "monitor_test_util.hpp"
#include "test_paths.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

namespace {

// leaf01 ports 1-4 cabled to node01/node02 mlx5_0 and mlx5_1 (ibnetdiscover as the SM sees it).
const char* kIbnetdiscover = R"(#
# Topology file: generated on Tue May  5 10:00:00 2026
#
vendid=0x2c9
devid=0xcf08
switchguid=0x248a0703009b1234(248a0703009b1234)
Switch	40 "S-248a0703009b1234"		# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 3 lmc 0
[1]	"H-0c42a10300a1b201"[1](0c42a10300a1b201) 		# "node01 mlx5_0" lid 5 4xHDR
[2]	"H-0c42a10300a1b202"[1](0c42a10300a1b202) 		# "node01 mlx5_1" lid 6 4xHDR
[3]	"H-0c42a10300a1b301"[1](0c42a10300a1b301) 		# "node02 mlx5_0" lid 7 4xHDR
[4]	"H-0c42a10300a1b302"[1](0c42a10300a1b302) 		# "node02 mlx5_1" lid 8 4xHDR
)";

// NCCL on both hosts; its device list puts mlx5_1 first, so index 1 is mlx5_0.
std::string nccl_log(const std::string& host, int pid, int rank, const std::string& ip) {
  const std::string o = host + ":" + std::to_string(pid) + ":" + std::to_string(pid) + " [0] ";
  return o + "NCCL INFO NET/IB : Using [0]mlx5_1:1/IB [1]mlx5_0:1/IB ; OOB ib0:" + ip + "<0>\n" + o +
         "NCCL INFO comm 0x55d0 rank " + std::to_string(rank) + " nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId " +
         "0x7a3c1d2e4f506172 - Init COMPLETE\n" + o + "NCCL INFO Channel 00/0 : " + std::to_string(1 - rank) +
         "[0] -> " + std::to_string(rank) + "[0] [receive] via NET/IB/1\n";
}

void write_job(TempDir& dir) {
  dir.write("ibnetdiscover.txt", kIbnetdiscover);
  dir.write("node01/nccl.log", nccl_log("node01", 4100, 0, "10.0.0.1"));
  dir.write("node02/nccl.log", nccl_log("node02", 4200, 1, "10.0.0.2"));
}

const char* kRetryErrors =
    "[2026-05-05 10:20:01] node01:4100:4180 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.2<51422> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2\n"
    "[2026-05-05 10:20:01] node01:4100:4180 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.2<51422> with status=5 opcode=0 len=0 vendor err 249 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2\n";

Diagnosis load_and_diagnose(const TempDir& dir, Bundle* keep = nullptr) {
  BundleOptions o;
  o.jobs = 1;
  o.tz_offset_s = 0;
  Bundle b = load_bundle(dir.path(), o);
  Diagnosis d = diagnose(b);
  if (keep) *keep = std::move(b);
  return d;
}

}  // namespace

TEST_CASE("IB: an NCCL device index is joined to the HCA through NCCL's init line and to the fabric") {
  TempDir dir;
  write_job(dir);
  dir.write("node01/resiliency.log",
            "[2026-05-05 10:20:00] node01:4100:4190 [0] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: "
            "ncclIbResiliencyHandleDeviceFailure: Device 1 marked as failed. Initiating recovery? No (send "
            "comm=0x7f03e8086000, outstandingRecovery=0)\n");
  Diagnosis d = load_and_diagnose(dir);
  REQUIRE(!d.root_causes.empty());
  const RootCause& top = d.root_causes.front();
  INFO(top.summary);
  // Index 1 of this process's list is mlx5_0 (not mlx5_1, which an ordinal guess would give), on
  // the cable to leaf01 port 1.
  CHECK(top.component.host == "node01");
  CHECK(top.component.device == "mlx5_0");
  CHECK(top.summary.find("leaf01 1") != std::string::npos);
}

TEST_CASE("IB: switch-side counters name the switch port's optic, not the NIC that saw the errors") {
  TempDir dir;
  write_job(dir);
  dir.write("node01/errors.log", kRetryErrors);
  SECTION("perfquery in the switch's folder") {
    dir.write("switches/leaf01/perfquery-p1.txt",
              "# Port counters: Lid 3 port 1 (CapMask: 0x5A00)\n"
              "PortSelect:......................1\n"
              "CounterSelect:...................0x0000\n"
              "SymbolErrorCounter:..............4016\n"
              "LinkErrorRecoveryCounter:........0\n"
              "LinkDownedCounter:...............0\n"
              "PortRcvErrors:...................12\n"
              "PortXmitDiscards:................0\n");
  }
  // The tools' print formats as published (tests/fixtures/astral/monitor/ib-tools/README.md).
  SECTION("ibqueryerrors, a switch with its factory description, named through its GUID") {
    dir.write("switches/ibqueryerrors.txt",
              "Errors for 0x248a0703009b1234 \"Quantum Mellanox Technologies\"\n"
              "   GUID 0x248a0703009b1234 port ALL: [SymbolErrorCounter == 4016 (4.016K)] [PortRcvErrors == 12 (12.000)]\n"
              "   GUID 0x248a0703009b1234 port 1: [SymbolErrorCounter == 4016 (4.016K)] [PortRcvErrors == 12 (12.000)]\n"
              "       Link info:      3   1[  ] ==( 4X      53.125 Gbps Active/  LinkUp)==>  0x0c42a10300a1b201      5    1[  ] "
              "\"node01 mlx5_0\" ( )\n"
              "\n## Summary: 3 nodes checked, 1 bad nodes found\n"
              "##          6 ports checked, 1 ports have errors beyond threshold\n");
  }
  SECTION("ibdiagnet2.log, the port named by system and node GUID") {
    dir.write("switches/ibdiagnet2.log",
              "-E- Ports counters value Check finished with errors\n"
              "-E- lid=0x0003 dev=54000 S248a0703009b1234/N248a0703009b1234/P1\n"
              "        Performance Monitor counter         : Value\n"
              "        symbol_error_counter                : 4016\n");
  }
  SECTION("ibdiagnet2.db_csv, PM_INFO by column name") {
    dir.write("switches/ibdiagnet2.db_csv",
              "START_NODES\n"
              "NodeDesc,NumPorts,NodeType,ClassVersion,BaseVersion,SystemImageGUID,NodeGUID,PortGUID\n"
              "\"MF0;leaf01:MQM8700/U1\",40,2,1,1,0x248a0703009b1234,0x248a0703009b1234,0x248a0703009b1234\n"
              "\"node01 mlx5_0\",1,1,1,1,0x0c42a10300a1b201,0x0c42a10300a1b201,0x0c42a10300a1b201\n"
              "END_NODES\n\n"
              "START_PM_INFO\n"
              "NodeGUID,PortGUID,PortNumber,LinkDownedCounter,LinkErrorRecoveryCounter,SymbolErrorCounter,"
              "PortRcvRemotePhysicalErrors,PortRcvErrors,PortXmitDiscards\n"
              "0x248a0703009b1234,0x248a0703009b1234,1,0,0,4016,0,12,0\n"
              "0x248a0703009b1234,0x248a0703009b1234,2,0,0,0,0,0,N/A\n"
              "0x0c42a10300a1b201,0x0c42a10300a1b201,1,0,0,0,0,0,0\n"
              "END_PM_INFO\n");
  }
  SECTION("UFM event log") {
    dir.write("switches/ufm-event.log",
              "2026-05-05 10:19:40.120 [4411] [110] WARNING [Hardware] IBPort [default(34) / Switch: leaf01 / NA / 1] "
              "[dev_id: 248a0703009b1234]: Symbol error counter rate threshold exceeded. Peer info: Computer: node01 "
              "HCA-1 / 1.\n");
  }
  Bundle b;
  Diagnosis d = load_and_diagnose(dir, &b);
  INFO("incident: " << d.incident.summary << "; findings: " << d.findings.size() << "; events: " << b.events.size());
  std::string events;
  for (const Event& e : b.events)
    events += e.kind + " " + std::string(b.file_name(e.file)) + ":" + std::to_string(e.line) + " " + format_time(e.time_us) + "\n";
  INFO(events);
  REQUIRE(!d.root_causes.empty());
  const RootCause& top = d.root_causes.front();
  INFO(top.summary);
  CHECK(top.component.kind == ComponentKind::optic);
  CHECK(top.component.switch_name == "leaf01");
  CHECK(top.component.port == "1");
  // The NIC at the other end is not named in the optic's place.
  for (const RootCause& rc : d.root_causes) {
    if (rc.component.kind == ComponentKind::nic) CHECK(rc.confidence < top.confidence);
  }
}

TEST_CASE("IB: counters read on the host name the HCA's own port, and zero counters say nothing") {
  ParseResult r = parse_text(
      "# Port counters: Lid 5 port 1 (CapMask: 0x5A00)\n"
      "SymbolErrorCounter:..............0\n"
      "LinkDownedCounter:...............3\n"
      "PortXmitWait:....................120\n",
      "node01");
  auto flaps = kind_of(r, "port_flap");
  REQUIRE(flaps.size() == 1);
  CHECK(flaps[0]->component.kind == ComponentKind::port);
  CHECK(flaps[0]->component.host == "node01");
  CHECK(flaps[0]->attr("value") == "3");
  CHECK(kind_of(r, "port_ber").empty());
  CHECK(kind_of(r, "ib_port_congestion").size() == 1);
}

namespace {

// A bundle made by hand: a cable, the job's retry errors, and metric-change events as a metric
// source (Prometheus range queries) would add them.
Bundle metric_bundle(const std::string& metric, const Component& where, int64_t onset_offset_s) {
  Bundle b;
  b.root = "(test)";
  b.hosts = {"node01", "node02"};
  FileStats f;
  f.path = "node01/nccl.log";
  f.host = "node01";
  b.files.push_back(f);
  f.path = "prometheus";
  f.host = "";
  b.files.push_back(f);
  b.fabric.add_cable({{"node01", "mlx5_0", "1", "10.0.0.1", 0}, {"leaf01", "Ethernet8"}});
  b.fabric.add_cable({{"node02", "mlx5_0", "1", "10.0.0.2", 0}, {"leaf01", "Ethernet12"}});
  const int64_t onset = 1'800'000'000'000'000LL;
  uint32_t line = 0;
  auto nccl = [&](const std::string& host, const std::string& kind, int rank) -> Event& {
    Event& e = b.events.emplace_back();
    e.time_us = onset;
    e.time_confidence_s = 1;
    e.host = host;
    e.layer = Layer::nccl;
    e.severity = Severity::error;
    e.kind = kind;
    e.component = {ComponentKind::nic, host, "mlx5_0", "", "", -1};
    e.keys.rank = rank;
    e.file = 0;
    e.line = ++line;
    e.message = kind + " on " + host;
    return e;
  };
  Event& init0 = nccl("node01", "nccl_init", 0);
  init0.severity = Severity::info;
  init0.time_us = onset - 600'000'000;
  init0.keys.comm_hash = 0x1234;
  init0.set_attr("nranks", "2");
  init0.set_attr("pid", "4100");
  init0.component = {ComponentKind::gpu, "node01", "0000:18:00", "", "", -1};
  Event& retry = nccl("node01", "retry_exceeded", 0);
  retry.set_attr("peer_ip", "10.0.0.2");
  retry.set_attr("pid", "4100");
  Event& m = b.events.emplace_back();
  m.time_us = onset + onset_offset_s * 1'000'000;
  m.time_confidence_s = 15;
  m.layer = Layer::switch_;
  m.severity = Severity::warning;
  m.kind = "metric_change";
  m.component = where;
  m.host = where.host;
  m.set_attr("metric", metric);
  m.set_attr("before", "0");
  m.set_attr("after", "200");
  m.set_attr("onset_offset_s", std::to_string(onset_offset_s));
  m.file = 1;
  m.line = 0;
  m.message = metric + " rose";
  std::stable_sort(b.events.begin(), b.events.end(), [](const Event& x, const Event& y) { return x.time_us < y.time_us; });
  return b;
}

}  // namespace

TEST_CASE("Metric changes are evidence for the component they are about") {
  SECTION("symbol errors climbing on a switch port before onset: that port's optic") {
    Bundle b = metric_bundle("node_infiniband_symbol_error_total", {ComponentKind::switch_port, "", "", "leaf01", "Ethernet8", -1}, -40);
    Diagnosis d = diagnose(b);
    REQUIRE(!d.root_causes.empty());
    const RootCause& top = d.root_causes.front();
    INFO(top.summary);
    CHECK(top.component.kind == ComponentKind::optic);
    CHECK(top.component.switch_name == "leaf01");
    CHECK(top.component.port == "Ethernet8");
    bool cited = false;
    for (const Evidence& e : top.evidence) cited = cited || e.kind == "metric_change";
    CHECK(cited);
  }
  SECTION("link-downed counter on the host NIC: the link") {
    Bundle b = metric_bundle("link_downed", {ComponentKind::nic, "node01", "mlx5_0", "", "1", -1}, -10);
    Diagnosis d = diagnose(b);
    REQUIRE(!d.root_causes.empty());
    INFO(d.root_causes.front().summary);
    CHECK(d.root_causes.front().component.host == "node01");
    CHECK(d.root_causes.front().summary.find("leaf01 Ethernet8") != std::string::npos);
  }
  SECTION("an unknown metric is ignored") {
    Bundle with = metric_bundle("node_cpu_seconds_total", {ComponentKind::switch_port, "", "", "leaf01", "Ethernet8", -1}, -40);
    Diagnosis d = diagnose(with);
    for (const RootCause& rc : d.root_causes)
      for (const Evidence& e : rc.evidence) CHECK(e.kind != "metric_change");
  }
}

namespace {

ParseResult parse_ib_fixture(const std::string& name, bool switch_context = false) {
  ParseOptions o;
  o.default_host = "sm01";
  o.file_name = name;
  o.switch_context = switch_context;
  o.time.year = 2024;
  o.time.tz_known = true;
  return parse_file(astral::test::fixture("astral/monitor/ib-tools/" + name), o);
}

}  // namespace

TEST_CASE("IB tool output as published is recognised (tests/fixtures/astral/monitor/ib-tools)") {
  SECTION("ibqueryerrors: a CA's block names the host's HCA port, reported from the SM host") {
    ParseResult r = parse_ib_fixture("ibqueryerrors-exadata.txt");
    CHECK(r.stats.unknown == 0);
    REQUIRE(r.events.size() == 1);  // PortXmitWait; VL15Dropped is no link evidence
    const Event& e = r.events[0];
    CHECK(e.kind == "ib_port_congestion");
    CHECK(e.host == "exa2dbadm01");
    CHECK(e.component.host == "exa2dbadm01");
    CHECK(e.component.device == "HCA-1");
    CHECK(e.component.port == "1");
    CHECK(e.component.switch_name.empty());
    CHECK(e.attr("value") == "4294967295");
    CHECK(e.attr("reported_by") == "sm01");
  }
  SECTION("ibqueryerrors -D -p: data counters and link info are read, and are no errors") {
    ParseResult r = parse_ib_fixture("ibqueryerrors-data-counters.txt");
    CHECK(r.stats.unknown == 0);
    CHECK(r.events.empty());
  }
  SECTION("ibdiagnet2.log: the port of a switch named by GUID") {
    ParseResult r = parse_ib_fixture("ibdiagnet2-counters.log");
    REQUIRE(r.events.size() == 1);  // port_xmit_discard; switch-relay errors are routing, not the link
    const Event& e = r.events[0];
    CHECK(e.kind == "ib_port_congestion");
    CHECK(e.component.kind == ComponentKind::switch_port);
    CHECK(e.component.switch_name == "0xe468a303005527c0");
    CHECK(e.component.port == "31");
    CHECK(e.attr("guid") == "e468a303005527c0");
    CHECK(e.attr("lid") == "0x0008");
  }
  SECTION("UFM over syslog: link-downed on a switch port, with the peer") {
    ParseResult r = parse_ib_fixture("ufm-eventlog-syslog.log");
    REQUIRE(r.events.size() == 1);
    const Event& e = r.events[0];
    CHECK(e.kind == "port_flap");
    CHECK(e.component.switch_name == "c931ibsw-leaf01");
    CHECK(e.component.port == "16");
    CHECK(e.attr("ufm_event") == "112");
    CHECK(e.attr("guid") == "248a0703006d40f0");
    CHECK(e.attr("peer") == "Computer: c931f03p08 HCA-1 / 1");
    CHECK(e.attr("reported_by") == "c931hsm04");
  }
  SECTION("a db_csv table ends at the first line that is no row: the lines after it are read as usual") {
    ParseResult r = parse_text("START_PM_INFO\nNodeGUID,PortNumber,SymbolErrorCounter\n"
                               "Dec  1 10:00:00 node01 kernel: mlx5_core 0000:0c:00.0 ibp12s0: Link down\n");
    bool link_down = false;
    for (const Event& e : r.events) link_down = link_down || e.kind == "nic_link_down" || e.kind == "link_down";
    std::string kinds;
    for (const Event& e : r.events) kinds += e.kind + " ";
    INFO(kinds);
    CHECK(link_down);
  }
  SECTION("UFM, NDR: the cage label 1/17/1 is IB port 33") {
    ParseResult r = parse_ib_fixture("ufm-event-ndr.log");
    REQUIRE(r.events.size() == 1);
    CHECK(r.events[0].kind == "port_down");
    CHECK(r.events[0].component.switch_name == "T3-E21-N-U47");
    CHECK(r.events[0].component.port == "33");
    CHECK(r.events[0].attr("port_label") == "1/17/1");
  }
}
