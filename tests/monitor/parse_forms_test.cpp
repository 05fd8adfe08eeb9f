// Collector prefixes, clocks, damaged input and the event model's JSON form.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/monitor/parse.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Prefixes: syslog, journal, CRI, dmesg forms and launcher tags") {
  auto r = parse_text(
      "Mar 10 12:00:01 node7 kernel: [ 5.100000] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
      "2025-03-10T12:00:02.500000+08:00 node7 kernel: NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, DBE\n"
      "2025-03-10T04:00:03.123456789Z stderr F [rank3]:[E310 12:00:03.000000001 ProcessGroupNCCL.cpp:607] [Rank 3] "
      "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
      "Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
      "[Mon Mar 10 12:00:04 2025] NVRM: Xid (PCI:0000:3a:00): 94, pid=7, Contained: CE User Channel (0x9). RST: No\n"
      "(WorkerDict pid=3490362) [rank5]:[E310 12:00:05.100000000 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 1 milliseconds "
      "before timing out.\n");
  auto xids = kind_of(r, "xid");
  REQUIRE(xids.size() == 3);
  CHECK(xids[0]->host == "node7");
  CHECK(format_time(xids[0]->time_us) == "2025-03-10T12:00:01.000000Z");
  CHECK(format_time(xids[1]->time_us) == "2025-03-10T04:00:02.500000Z");  // zoned ISO -> UTC
  CHECK(format_time(xids[2]->time_us) == "2025-03-10T12:00:04.000000Z");
  auto wd = kind_of(r, "watchdog_timeout");
  REQUIRE(wd.size() == 2);
  CHECK(wd[0]->keys.rank == 3);
  // The CRI runtime's UTC time wins over glog's local, year-less one.
  CHECK(format_time(wd[0]->time_us) == "2025-03-10T04:00:03.123456Z");
  CHECK(wd[1]->keys.rank == 5);
  CHECK(r.stats.unknown == 0);
}

TEST_CASE("Unknown and damaged lines are counted, never fatal") {
  auto r = parse_text(
      "hello world\n"
      "[E1206 18:44:12 ProcessGroupNCCL.cpp:607\n"                       // glog cut short
      "node:1:2 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 172.17.127.143<4957\n"
      "NVRM: Xid (PCI:0000:1\n"
      "\x01\x02\xff binary junk\n"
      "  89 | 08/31/2016 | 06:20:30 | Processor #0xc9 | IERR | Asserted\n");
  CHECK(r.stats.lines == 6);
  CHECK(r.stats.damaged >= 3);
  CHECK(r.stats.unknown >= 2);
  CHECK(r.stats.unknown + r.stats.damaged + r.stats.recognised == r.stats.lines);
  CHECK(kind_of(r, "sel_event").size() == 1);
}

TEST_CASE("Exact duplicate lines count once, wrapped lines are joined") {
  auto r = parse_text(
      "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
      "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
      "NET/IB: Got completion from peer 10.0.0.2<0000000000000000000000000000000000000000>\n"
      "  with status=IBV_WC_RETRY_EXC_ERR(12)\n"
      "  opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=129\n"
      "  req_type=Recv localGid ::ffff:10.0.0.1\n"
      "  remoteGids::ffff:10.0.0.2 hca mlx5_2\n"
      "next line\n");
  CHECK(kind_of(r, "xid").size() == 1);
  CHECK(r.stats.duplicates == 1);
  auto retry = kind_of(r, "retry_exceeded");
  REQUIRE(retry.size() == 1);
  CHECK(retry[0]->attr("hca") == "mlx5_2");
  CHECK(retry[0]->line == 3);
  CHECK(r.stats.lines == 8);
}

TEST_CASE("Year-less dates: the file time picks the year, a later date is last year's") {
  ParseOptions o;
  o.default_host = "n";
  o.time.tz_known = true;
  o.time.reference_us = *parse_rfc3339("2026-01-02T00:10:00Z");
  auto r = parse_buffer("Dec 31 23:59:58 n kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
                        "Jan  2 00:09:59 n kernel: NVRM: Xid (PCI:0000:2a:00): 79, GPU has fallen off the bus.\n",
                        FileKind::text_log, o);
  REQUIRE(r.events.size() == 2);
  CHECK(format_time(r.events[0].time_us) == "2025-12-31T23:59:58.000000Z");
  CHECK(format_time(r.events[1].time_us) == "2026-01-02T00:09:59.000000Z");
}

TEST_CASE("Zone of local times inferred from the file time") {
  ParseOptions o;
  o.default_host = "n";
  o.time.reference_us = *parse_rfc3339("2025-06-01T02:00:03Z");  // written 10:00:03 at +08:00
  auto r = parse_buffer("Jun  1 10:00:01 n kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n",
                        FileKind::text_log, o);
  REQUIRE(r.events.size() == 1);
  CHECK(format_time(r.events[0].time_us) == "2025-06-01T02:00:01.000000Z");
  o.defer_zone = true;  // the bundle decides: the guess is reported, times stay local
  auto d = parse_buffer("Jun  1 10:00:01 n kernel: NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n",
                        FileKind::text_log, o);
  REQUIRE(d.zone_guess_s);
  CHECK(*d.zone_guess_s == 8 * 3600);
  CHECK(format_time(d.events[0].time_us) == "2025-06-01T10:00:01.000000Z");
}

TEST_CASE("Lines without a time are dated between their dated neighbours") {
  auto r = parse_text(
      "[rank0]:[E310 10:00:00.000000000 ProcessGroupNCCL.cpp:1] start\n"
      "h:1:2 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 12, opcode 0, len 0, vendor err 129\n"
      "[rank0]:[E310 10:10:00.000000000 ProcessGroupNCCL.cpp:1] later\n");
  auto retry = kind_of(r, "retry_exceeded");
  REQUIRE(retry.size() == 1);
  CHECK(format_time(retry[0]->time_us) == "2025-03-10T10:05:00.000000Z");
  CHECK(retry[0]->time_confidence_s == Approx(301));
}

TEST_CASE("NCCL INFO lines: bare ones with nothing to join are skipped, prefixed ones still date") {
  // The first three are read by the shortcut (no event); the journal-prefixed INFO line must
  // still go through the prefix reader, because its time dates the WARN line before it.
  auto r = parse_text(
      "2025-03-10T10:00:00Z node7 python[1]: [rank5]:[E310 10:00:00.000000000 ProcessGroupNCCL.cpp:1] "
      "Heartbeat monitor timed out!\n"
      "node7:1955302:1955306 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/IPC/read\n"
      "node7:1955302:1955306 [1] NCCL INFO Connected all rings\n"
      "node7:1955302:1955306 [1] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.\n"
      "h:1:2 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 12, "
      "opcode 0, len 0, vendor err 129\n"
      "2025-03-10T10:10:00Z node7 python[1]: node7:1955302:1955306 [1] NCCL INFO Connected all trees\n"
      "node7:1955302:1955306 [1] NCCL INFO Channel 00/0 : 1[2a000] -> 9[2a000] [send] via NET/IB/1\n"
      "node7:1955302:1955306 [1] NCCL INFO comm 0x55 rank 1 nranks 16 cudaDev 1 nvmlDev 1 busId 2a000 "
      "commId 0xacffea21b8eb6451 - Init COMPLETE\n");
  CHECK(r.stats.recognised == r.stats.lines);
  auto retry = kind_of(r, "retry_exceeded");
  REQUIRE(retry.size() == 1);
  CHECK(format_time(retry[0]->time_us) == "2025-03-10T10:05:00.000000Z");
  auto channel = kind_of(r, "nccl_channel");
  REQUIRE(channel.size() == 1);
  CHECK(channel[0]->keys.rank == 1);
  CHECK(channel[0]->keys.peer == 9);
  CHECK(channel[0]->attr("net_dev") == "1");
  auto init = kind_of(r, "nccl_init");
  REQUIRE(init.size() == 1);
  CHECK(init[0]->component.device == "0000:2a:00");
  CHECK(init[0]->keys.comm_hash == 0xacffea21b8eb6451ULL);
  CHECK(init[0]->attr("nranks") == "16");
  CHECK(init[0]->attr("cuda_dev") == "1");
  CHECK(r.events.size() == 4);  // heartbeat, retry, channel, init: nothing from the quiet lines
  // The launcher tag is read after a syslog header too.
  auto stuck = kind_of(r, "watchdog_stuck");
  REQUIRE(stuck.size() == 1);
  CHECK(stuck[0]->keys.rank == 5);
}

TEST_CASE("dmesg uptimes dated from syslog lines of the same file") {
  auto r = parse_text(
      "Mar 10 12:00:00 n kernel: [ 1000.000000] mlx5_core 0000:0c:00.0 ibp12s0: Link up\n"
      "[ 1060.500000] mlx5_core 0000:0c:00.0 ibp12s0: Link down\n");
  auto down = kind_of(r, "nic_link_down");
  REQUIRE(down.size() == 1);
  CHECK(format_time(down[0]->time_us) == "2025-03-10T12:01:00.500000Z");
  REQUIRE(r.uptime_anchors.size() == 1);
}

TEST_CASE("Switch styles: Cumulus ip monitor, Onyx, Arista, reboot") {
  auto r = parse_text(
      "2025-03-10T12:00:00.000000+00:00 leaf3 switchd[1001]: swp12: link down\n"
      "Mar 10 12:00:01 leaf3 pmd[3000]: [pmd.NOTICE]: Interface Eth1/12 changed state to DOWN\n"
      "Mar 10 12:00:02 leaf3 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet28, changed state to up\n"
      "3: swp3: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9216 qdisc pfifo_fast state DOWN mode DEFAULT\n"
      "Mar 10 12:00:03 leaf3 health[1]: [health.WARNING]: Eth1/12 transceiver RX power is below the low alarm threshold\n"
      "Mar 10 12:00:04 leaf3 switchd[1]: swp12: pre-FEC BER 3.1e-05 above threshold 1e-06\n"
      "Mar 10 12:05:00 leaf3 kernel: [    0.000000] Linux version 5.10.0\n",
      "leaf3", true);
  auto down = kind_of(r, "port_down");
  REQUIRE(down.size() == 3);
  CHECK(down[0]->component.port == "swp12");
  CHECK(down[1]->component.port == "Eth1/12");
  CHECK(down[2]->component.port == "swp3");
  CHECK(kind_of(r, "port_up").size() == 1);
  auto optic = kind_of(r, "optic_alarm");
  REQUIRE(optic.size() == 1);
  CHECK(optic[0]->severity == Severity::error);
  CHECK(kind_of(r, "port_ber").size() == 1);
  CHECK(kind_of(r, "switch_reboot").size() == 1);
}

TEST_CASE("JSON lines: a truncated record does not hide the ones after it") {
  std::string a = R"({"time":"2026-01-01T00:00:00Z","host":"pdu1","layer":"facility","component":{"kind":"pdu"},"severity":"warning","kind":"overcurrent","message":"x"})";
  auto r = parse_text(a + "\n" + a.substr(0, 40) + "\n" + a + "\n");
  CHECK(r.stats.kind == FileKind::events_jsonl);
  CHECK(r.events.size() == 2);
  CHECK(r.stats.damaged == 1);
  CHECK(r.events[1].line == 3);
}

TEST_CASE("Event model JSON round trip") {
  Event e;
  e.time_us = *parse_rfc3339("2026-11-29T22:42:00.123456Z");
  e.time_confidence_s = 2.5;
  e.host = "node017";
  e.layer = Layer::kernel;
  e.component = {ComponentKind::gpu, "node017", "0000:9b:00", "", "", 3};
  e.severity = Severity::critical;
  e.kind = "xid";
  e.message = "NVRM: Xid";
  e.keys.xid = 79;
  e.keys.comm_hash = 0x5ae77eb5ea4ec1eeULL;
  e.keys.seq = 41;
  e.set_attr("pid", "12");
  auto j = to_json(e, "node017/kern.log");
  CHECK(j["time"] == "2026-11-29T22:42:00.123456Z");
  CHECK(j["keys"]["comm_hash"] == "0x5ae77eb5ea4ec1ee");
  CHECK(j["source"]["file"] == "node017/kern.log");
  Event back = event_from_json(j);
  CHECK(back.time_us == e.time_us);
  CHECK(back.component == e.component);
  CHECK(back.keys.comm_hash == e.keys.comm_hash);
  CHECK(back.keys.seq == 41);
  CHECK(back.attr("pid") == "12");
  nlohmann::json bad = j;
  bad["layer"] = "nowhere";
  CHECK_THROWS_WITH(event_from_json(bad), Catch::Contains("layer"));
}

TEST_CASE("Flight Recorder: each entry keeps its own process group") {
  // Entries repeat their process group (the reader reuses the last one read); an entry without
  // one, or with another, must not take its neighbour's.
  std::string dump = R"({"version":"2.7","entries":[
  {"pg_id":0,"process_group":["0","default_pg"],"collective_seq_id":11,"profiling_name":"nccl:all_reduce","state":"scheduled"},
  {"pg_id":1,"collective_seq_id":12,"profiling_name":"nccl:all_reduce","state":"scheduled"},
  {"pg_id":0,"process_group":["0","default_pg"],"collective_seq_id":13,"profiling_name":"nccl:all_reduce","state":"scheduled"},
  {"pg_id":2,"process_group":["2","tp"],"collective_seq_id":14,"profiling_name":"nccl:all_gather","state":"scheduled"}]})";
  ParseOptions o;
  o.file_name = "fr/nccl_trace_rank_0.json";
  auto r = parse_buffer(dump, detect_file_kind(dump, o.file_name), o);
  auto entries = kind_of(r, "fr_entry");
  REQUIRE(entries.size() == 4);
  CHECK(entries[0]->keys.process_group == "0(default_pg)");
  CHECK(entries[1]->keys.process_group.empty());
  CHECK(entries[2]->keys.process_group == "0(default_pg)");
  CHECK(entries[3]->keys.process_group == "2(tp)");
}

TEST_CASE("Flight Recorder JSON dump (strict form) and rank from the file name") {
  std::string dump = R"({"version":"2.7","pg_config":{"0":{"name":"0","desc":"default_pg","ranks":"[0, 1]"}},
  "pg_status":{"0":{"last_enqueued_collective":12,"last_started_collective":-1,"last_completed_collective":10}},
  "entries":[{"record_id":1,"pg_id":0,"process_group":["0","default_pg"],"collective_seq_id":11,"profiling_name":"nccl:all_reduce",
  "time_created_ns":1724779239936775119,"state":"scheduled","duration_ms":3.5,"retired":false,"is_p2p":false}]})";
  ParseOptions o;
  o.default_host = "n";
  o.file_name = "n/fr/nccl_trace_rank_5.json";
  auto r = parse_buffer(dump, detect_file_kind(dump, o.file_name), o);
  CHECK(r.stats.kind == FileKind::flight_recorder);
  auto status = kind_of(r, "fr_pg_status");
  REQUIRE(status.size() == 1);
  CHECK(status[0]->keys.rank == 5);
  CHECK(status[0]->attr("last_completed") == "10");
  auto pending = kind_of(r, "fr_entry");
  REQUIRE(pending.size() == 1);
  CHECK(pending[0]->keys.seq == 11);
  CHECK(pending[0]->attr("state") == "scheduled");
  REQUIRE(r.samples.size() == 1);
  CHECK(r.samples[0].duration_us == 3500);
}
