// Parsers against the verbatim lines of log-formats.md (tests/fixtures/astral/monitor/verbatim).
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "astral/monitor/parse.hpp"
#include "test_paths.hpp"

using namespace astral::monitor;

namespace {

ParseResult parse_fixture(const std::string& name, const std::string& host = "node01") {
  ParseOptions options;
  options.default_host = host;
  options.file_name = name;
  options.time.year = 2024;
  options.time.tz_known = true;  // UTC
  return parse_file(astral::test::fixture("astral/monitor/verbatim/" + name), options);
}

std::vector<const Event*> of_kind(const ParseResult& r, const std::string& kind) {
  std::vector<const Event*> out;
  for (const auto& e : r.events)
    if (e.kind == kind) out.push_back(&e);
  return out;
}

}  // namespace

TEST_CASE("NCCL: init lines map rank to GPU and give the commHash") {
  auto r = parse_fixture("nccl.log");
  auto init = of_kind(r, "nccl_init");
  REQUIRE(init.size() == 2);
  CHECK(init[0]->host == "hostname-test");
  CHECK(init[0]->keys.rank == 36);
  CHECK(init[0]->keys.comm_hash == 0x5ae77eb5ea4ec1eeULL);
  CHECK(init[0]->component.device == "0000:9b:00");
  CHECK(init[0]->attr("pid") == "984");
  CHECK(init[1]->component.device == "0000:c8:00");
  auto start = of_kind(r, "nccl_init_start");
  REQUIRE(start.size() == 1);
  CHECK(start[0]->keys.comm_hash == 0x996ee6f117cb8e1eULL);
  auto channels = of_kind(r, "nccl_channel");
  REQUIRE(channels.size() == 2);  // the P2P/IPC channel carries no NIC
  CHECK(channels[0]->keys.rank == 0);
  CHECK(channels[0]->keys.peer == 2);
  CHECK(channels[0]->attr("net_dev") == "5");
  CHECK(channels[1]->attr("transport") == "Socket");
}

TEST_CASE("NCCL: all wordings of IB completion status 12 are one event kind") {
  auto r = parse_fixture("nccl.log");
  auto retry = of_kind(r, "retry_exceeded");
  // wording 1 (<=2.19), wording 2 (2.20-2.28, twice), vendor NET/IBP, wording 3 wrapped over 5 lines
  REQUIRE(retry.size() == 5);
  CHECK(retry[0]->attr("peer_ip") == "172.17.127.143");
  CHECK(retry[0]->host == "task-646--1-mhpnk");
  CHECK(retry[1]->attr("peer_ip") == "10.216.210.236");
  CHECK(retry[1]->attr("req_type") == "Recv");
  CHECK(retry[1]->attr("vendor_err") == "129");
  CHECK(retry[2]->attr("local_ip") == "29.87.88.182");
  CHECK(retry[3]->attr("peer_ip") == "7.6.13.83");
  CHECK(retry[4]->attr("peer_ip") == "10.0.0.2");
  CHECK(retry[4]->component.device == "mlx5_2");
  CHECK(retry[4]->attr("status") == "12");
  CHECK(retry[4]->attr("req_type") == "Recv");
  auto other = of_kind(r, "ib_completion_error");
  REQUIRE(other.size() == 1);  // status 4 on H100-2
  CHECK(other[0]->attr("peer_ip") == "fe80::966d:ae03:8b:df78");
  CHECK(of_kind(r, "ib_flush_error").size() == 1);
}

TEST_CASE("NCCL: async port events, resiliency, socket and proxy errors") {
  auto r = parse_fixture("nccl.log");
  CHECK(of_kind(r, "ib_port_error").size() == 1);
  auto failed = of_kind(r, "ib_device_failed");
  REQUIRE(failed.size() == 1);
  CHECK(failed[0]->host == "GPU-606");
  CHECK(failed[0]->time_us != kUnknownTime);
  CHECK(format_time(failed[0]->time_us) == "2026-05-04T19:55:27.000000Z");
  CHECK(of_kind(r, "nccl_socket_error").size() == 2);
  auto proxy = of_kind(r, "nccl_proxy_error");
  REQUIRE(proxy.size() == 1);
  CHECK(proxy[0]->keys.peer == 9);
  CHECK(r.stats.damaged == 0);
}

TEST_CASE("PyTorch: watchdog lines of every release") {
  auto r = parse_fixture("pytorch.log");
  auto timeouts = of_kind(r, "watchdog_timeout");
  // 1.x, 2023 one-liner, 2.4, nccl#1409 x2, 2.6, 2.7 heartbeat issue, blocking wait, hard-wrapped, GB200
  REQUIRE(timeouts.size() == 10);
  CHECK(timeouts[0]->keys.seq == 469508);
  CHECK(timeouts[0]->attr("op_type") == "ALLREDUCE");
  CHECK(timeouts[0]->keys.rank == 1);
  const Event* broadcast = nullptr;
  for (auto* e : timeouts)
    if (e->keys.rank == 7 && e->keys.seq == 80078) broadcast = e;
  REQUIRE(broadcast);
  CHECK(broadcast->attr("op_type") == "BROADCAST");
  CHECK(format_time(broadcast->time_us) == "2024-08-16T01:45:40.183009Z");
  const Event* wrapped = nullptr;
  for (auto* e : timeouts)
    if (e->keys.seq == 4) wrapped = e;
  REQUIRE(wrapped);
  CHECK(wrapped->attr("timeout_ms") == "1800000");
  auto status = of_kind(r, "watchdog_status");
  REQUIRE(status.size() >= 5);
  const Event* s2_7 = nullptr;
  for (auto* e : status)
    if (e->keys.seq == 120049) s2_7 = e;
  REQUIRE(s2_7);
  CHECK(s2_7->attr("last_enqueued") == "120051");
  CHECK(s2_7->attr("last_completed") == "120048");
  CHECK(s2_7->keys.rank == 5);
  CHECK(s2_7->keys.process_group == "0(default_pg)");
  // 2.4's two wordings: "detected by watchdog at work: S" and "Timeout at NCCL work: S".
  int s2_4 = 0;
  for (auto* e : status)
    if (e->keys.seq == 7753 && e->attr("last_enqueued") == "7755" && e->attr("last_completed") == "7752") ++s2_4;
  CHECK(s2_4 == 2);
  auto dumps = of_kind(r, "dump_signal");
  REQUIRE(dumps.size() == 2);
  CHECK(dumps[1]->attr("signal_from") == "7");
  CHECK(of_kind(r, "watchdog_stuck").size() == 2);
  auto created = of_kind(r, "pg_comm_created");
  REQUIRE(created.size() == 1);
  CHECK(created[0]->attr("comm") == "0x555b8d27b370");
  CHECK(created[0]->keys.rank == 5);
  // The one-line PyTorch + NCCL paste carries the IB error as well.
  CHECK(of_kind(r, "retry_exceeded").size() == 1);
}

TEST_CASE("Kernel: Xid, fallen off the bus, SXid, AER and mlx5") {
  auto r = parse_fixture("kernel.log");
  auto xids = of_kind(r, "xid");
  std::vector<int> codes;
  for (auto* e : xids) codes.push_back(e->keys.xid);
  for (int code : {13, 109, 31, 45, 48, 63, 74, 79, 94, 95, 119, 149, 145, 144, 137})
    CHECK(std::count(codes.begin(), codes.end(), code) >= 1);
  const Event* x79 = nullptr;
  for (auto* e : xids)
    if (e->keys.xid == 79 && !x79) x79 = e;
  REQUIRE(x79);
  CHECK(x79->component.device == "0000:02:00");
  CHECK(x79->severity == Severity::critical);
  const Event* x45 = nullptr;
  for (auto* e : xids)
    if (e->keys.xid == 45 && !x45) x45 = e;
  REQUIRE(x45);
  CHECK(x45->attr("caused_by_xid") == "149");
  CHECK(of_kind(r, "gpu_fallen_off_bus").size() == 1);
  CHECK(of_kind(r, "sxid").size() == 2);
  auto aer = of_kind(r, "pcie_aer");
  REQUIRE(aer.size() == 5);  // the detail line of a report joins its event
  CHECK(aer[0]->severity == Severity::critical);
  CHECK(aer[0]->attr("source") == "0000:00:02");
  CHECK(aer[0]->attr("bits").find("Surprise Down Error") != std::string_view::npos);
  CHECK(of_kind(r, "nic_power").size() == 1);
  auto module = of_kind(r, "optic_event");
  REQUIRE(module.size() == 2);
  CHECK(module[0]->severity == Severity::error);
  CHECK(module[0]->attr("module") == "0");
  CHECK(module[1]->severity == Severity::info);
  auto down = of_kind(r, "nic_link_down");
  REQUIRE(down.size() == 1);
  CHECK(down[0]->component.device == "ens9f0v5");
  CHECK(of_kind(r, "nic_link_up").size() == 2);
  CHECK(of_kind(r, "process_crash").size() == 1);
}

TEST_CASE("Switch: SONiC port, transceiver and sairedis lines") {
  ParseOptions options;
  options.default_host = "leaf01";
  options.switch_context = true;
  options.file_name = "sonic.log";
  options.time.year = 2025;
  options.time.tz_known = true;
  auto r = parse_file(astral::test::fixture("astral/monitor/verbatim/sonic.log"), options);
  auto optic = of_kind(r, "optic_alarm");
  REQUIRE(optic.size() == 3);
  CHECK(optic[0]->component.switch_name == "qual-7060DX5-64S");
  CHECK(optic[0]->component.port == "Ethernet112");
  CHECK(optic[0]->severity == Severity::error);
  CHECK(optic[1]->severity == Severity::warning);  // "... to temperature high warning"
  auto down = of_kind(r, "port_down");
  REQUIRE(down.size() >= 1);
  CHECK(down[0]->component.port == "Ethernet32");
  CHECK(of_kind(r, "port_admin_down").size() == 1);
  CHECK(of_kind(r, "port_up").size() == 1);  // sairedis record
}

TEST_CASE("BMC SEL elist and OpenBMC rows") {
  auto r = parse_fixture("sel.txt");
  auto sel = of_kind(r, "sel_event");
  REQUIRE(sel.size() == 5);
  CHECK(sel[0]->severity == Severity::critical);  // IERR
  CHECK(sel[1]->time_us == kUnknownTime);        // Pre-Init
  CHECK(format_time(sel[2]->time_us) == "2022-12-14T22:09:44.000000Z");  // CET -> UTC
  CHECK(sel[2]->severity == Severity::warning);  // correctable ECC
  CHECK(r.stats.damaged == 0);
}

TEST_CASE("NCCL RAS text and JSON") {
  auto r = parse_fixture("ras.txt");
  auto dead = of_kind(r, "ras_peer_dead");
  REQUIRE(dead.size() == 2);
  CHECK(dead[0]->host == "172.16.64.213");
  CHECK(dead[0]->attr("cuda_dev") == "5");
  auto lag = of_kind(r, "ras_lagging_rank");
  REQUIRE(lag.size() == 2);
  CHECK(lag[0]->keys.comm_hash == 0x27a079b828ff1a75ULL);
  auto missing = of_kind(r, "ras_missing_rank");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0]->keys.rank == 21);
  auto j = parse_fixture("ras.json");
  CHECK(j.stats.kind == FileKind::nccl_ras);
  auto m = of_kind(j, "ras_missing_rank");
  REQUIRE(m.size() == 1);
  CHECK(m[0]->keys.rank == 1);
  CHECK(m[0]->keys.comm_hash == 0xae94423cfbb2ef4aULL);
}

TEST_CASE("Flight Recorder: the tutorial's Python-repr dump") {
  auto r = parse_fixture("fr_tutorial_rank_0");
  CHECK(r.stats.kind == FileKind::flight_recorder);
  auto status = of_kind(r, "fr_pg_status");
  REQUIRE(status.size() == 1);
  CHECK(status[0]->keys.rank == 0);
  CHECK(status[0]->keys.process_group == "0(default_pg)");
  CHECK(status[0]->attr("last_completed") == "2");
  auto entries = of_kind(r, "fr_entry");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0]->keys.seq == 1);
  CHECK(entries[0]->attr("state") == "completed");
}

TEST_CASE("NCCL Inspector records become timing samples") {
  auto r = parse_fixture("inspector.json");
  CHECK(r.stats.kind == FileKind::nccl_inspector);
  REQUIRE(r.samples.size() == 1);
  CHECK(r.samples[0].comm_hash == 0xe62dedaa97644aULL);
  CHECK(r.samples[0].seq == 1231);
  CHECK(r.samples[0].rank == 4);
  CHECK(r.samples[0].duration_us == 41057);
  CHECK(r.samples[0].host == "example-hostname");
}
