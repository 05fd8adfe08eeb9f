// The site's stores as sources: syslog tree layouts, journal files read through sd-journal
// (written by the real systemd-journal-remote from export streams), metric changes from
// exposition text, and the Prometheus client's failures against canned servers.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/metrics.hpp"
#include "astral/monitor/sources.hpp"
#include "monitor_test_util.hpp"
#include "run_process.hpp"
#include "site_servers.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

namespace {

const char* kCabling =
    "host,nic,port,switch,switch_port\n"
    "node01,mlx5_0,1,leaf01,Ethernet0\n"
    "node02,mlx5_0,1,leaf01,Ethernet4\n";

bool has_event(const Bundle& b, const std::string& kind, const std::string& host) {
  return std::any_of(b.events.begin(), b.events.end(),
                     [&](const Event& e) { return e.kind == kind && e.host == host; });
}

// One journal export-format entry (binary-safe form for the message).
std::string export_entry(int64_t realtime_us, const std::string& host, const std::string& message) {
  std::string e = "__REALTIME_TIMESTAMP=" + std::to_string(realtime_us) + "\n";
  e += "__MONOTONIC_TIMESTAMP=" + std::to_string(realtime_us % 1000000000) + "\n";
  e += "_BOOT_ID=0123456789abcdef0123456789abcdef\n_HOSTNAME=" + host + "\nSYSLOG_IDENTIFIER=kernel\n";
  e += "MESSAGE\n";
  uint64_t n = message.size();
  char le[8];
  for (int i = 0; i < 8; ++i) le[i] = char((n >> (8 * i)) & 0xff);
  e.append(le, 8);
  e += message + "\n\n";
  return e;
}

}  // namespace

TEST_CASE("Syslog tree: per-host folders and dated files, switches from the fabric, BMCs join their host") {
  TempDir dir;
  dir.write("cabling.csv", kCabling);
  dir.write("tree/node01/syslog.log",
            "2025-11-29T22:41:00.100000+00:00 node01 kernel: mlx5_core 0000:17:00.0 ens1f0np0: Link down\n");
  dir.write("tree/leaf01-2025-11-29.log",
            "2025-11-29T22:40:59.900000+00:00 leaf01 swss#portsyncd: :- linkDown: Port Ethernet0 oper state set from up to down\n");
  dir.write("tree/node02-bmc/messages.log",
            "2025-11-29T22:30:00+00:00 node02-bmc ipmisel:    5 | 11/29/2025 | 22:30:00 | Power Supply #0x51 | "
            "Failure detected | Asserted\n");
  dir.write("tree/syslog", "2025-11-29T22:41:01+00:00 node02 kernel: mlx5_core 0000:17:00.0: Port module event: "
                           "module 0, Cable unplugged\n");
  BundleOptions o;
  o.fabric_path = dir / "cabling.csv";
  o.jobs = 2;
  SyslogSourceOptions s;
  s.dir = dir / "tree";
  o.sources.push_back(syslog_source(s));
  Bundle b = load_bundle("", o);
  CHECK(std::count(b.hosts.begin(), b.hosts.end(), "node01") == 1);
  CHECK(std::count(b.hosts.begin(), b.hosts.end(), "node02") == 1);
  CHECK(std::count(b.hosts.begin(), b.hosts.end(), "node02-bmc") == 0);
  CHECK(std::count(b.switches.begin(), b.switches.end(), "leaf01") == 1);
  bool switch_line = false, bmc_on_host = false;
  for (const Event& e : b.events) {
    switch_line = switch_line || (e.layer == Layer::switch_ && e.component.switch_name == "leaf01");
    bmc_on_host = bmc_on_host || (e.layer == Layer::bmc && e.host == "node02");
  }
  CHECK(switch_line);
  CHECK(bmc_on_host);
  CHECK(has_event(b, "nic_link_down", "node01"));

  SECTION("a window drops what is outside it") {
    SyslogSourceOptions w = s;
    w.window.from_us = *parse_rfc3339("2025-11-29T22:40:00Z");
    BundleOptions ow;
    ow.fabric_path = o.fabric_path;
    ow.sources.push_back(syslog_source(w));
    Bundle bw = load_bundle("", ow);
    CHECK(std::none_of(bw.events.begin(), bw.events.end(), [](const Event& e) { return e.layer == Layer::bmc; }));
    CHECK(has_event(bw, "nic_link_down", "node01"));
  }
  SECTION("the budget of lines bounds what is read") {
    SyslogSourceOptions w = s;
    w.max_lines = 1;
    w.jobs = 1;
    BundleOptions ow;
    ow.sources.push_back(syslog_source(w));
    Bundle bw = load_bundle("", ow);
    uint64_t lines = 0;
    for (const auto& f : bw.files) lines += f.lines;
    CHECK(lines == 1);
  }
}

TEST_CASE("Syslog tree: the collector's template names the host, other files are not read") {
  TempDir dir;
  dir.write("t/node01/2025-11-29.log",
            "Nov 29 22:41:00 node01 kernel: [ 130.456250] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus.\n");
  dir.write("t/rsyslog-stats.txt", "not a host file\n");
  SyslogSourceOptions s;
  s.dir = dir / "t";
  s.path_template = dir / "t" + "/%HOSTNAME%/%$YEAR%-%$MONTH%-%$DAY%.log";
  BundleOptions o;
  o.year = 2025;
  o.sources.push_back(syslog_source(s));
  Bundle b = load_bundle("", o);
  REQUIRE(b.files.size() == 1);
  CHECK(b.hosts == std::vector<std::string>{"node01"});
  CHECK(has_event(b, "xid", "node01"));
  SyslogSourceOptions bad = s;
  bad.path_template = "%$YEAR%.log";
  BundleOptions ob;
  ob.sources.push_back(syslog_source(bad));
  CHECK_THROWS_WITH(load_bundle("", ob), Catch::Contains("%HOSTNAME%"));
  SyslogSourceOptions missing;
  missing.dir = dir / "nowhere";
  BundleOptions om;
  om.sources.push_back(syslog_source(missing));
  CHECK_THROWS_WITH(load_bundle("", om), Catch::Contains("nowhere"));
}

TEST_CASE("Journal files: sd-journal reads journal-remote's output by _HOSTNAME, window and budget, damage is counted") {
  TempDir dir;
  const int64_t t0 = *parse_rfc3339("2025-11-29T22:41:00Z");
  std::string stream;
  stream += export_entry(t0, "node01", "mlx5_core 0000:17:00.0 ens1f0np0: Link down");
  stream += export_entry(t0 + 1000000, "node02.cluster.local",
                         "NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus.");
  for (int i = 0; i < 400; ++i)
    stream += export_entry(t0 + 2000000 + i * 1000, "node01", "systemd[1]: Started session " + std::to_string(i) + ".");
  stream += export_entry(t0 + 3600000000LL, "node01", "mlx5_core 0000:17:00.0 ens1f0np0: Link up");
  dir.write("in.export", stream);
  std::filesystem::create_directories(dir / "remote");
  auto r = astral::test::run_process({"/lib/systemd/systemd-journal-remote", "--split-mode=none",
                                      "--output=" + dir / "remote/remote-node.journal", dir / "in.export"},
                                     60);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  BundleOptions o;
  JournalSourceOptions j;
  j.dir = dir / "remote";
  o.sources.push_back(journal_source(j));
  Bundle b = load_bundle("", o);
  CHECK(std::count(b.hosts.begin(), b.hosts.end(), "node01") == 1);
  CHECK(std::count(b.hosts.begin(), b.hosts.end(), "node02") == 1);
  const auto down = std::find_if(b.events.begin(), b.events.end(), [](const Event& e) { return e.kind == "nic_link_down"; });
  REQUIRE(down != b.events.end());
  CHECK(down->time_us == t0);  // the entry's time: the message carries none
  CHECK(down->time_confidence_s <= 1);
  CHECK(has_event(b, "xid", "node02"));

  SECTION("window and entry budget") {
    JournalSourceOptions w = j;
    w.window.to_us = t0 + 10000000;
    BundleOptions ow;
    ow.sources.push_back(journal_source(w));
    Bundle bw = load_bundle("", ow);
    CHECK(!has_event(bw, "nic_link_up", "node01"));
    CHECK(has_event(bw, "nic_link_down", "node01"));
    JournalSourceOptions few = j;
    few.max_entries = 2;
    BundleOptions of;
    of.sources.push_back(journal_source(few));
    Bundle bf = load_bundle("", of);
    uint64_t lines = 0;
    for (const auto& f : bf.files) lines += f.lines;
    CHECK(lines == 2);
  }
  SECTION("a truncated file is read up to the damage") {
    const std::string whole = dir / "remote/remote-node.journal";
    std::filesystem::create_directories(dir / "cut");
    const std::string cut = dir / "cut/remote-node.journal";
    std::filesystem::copy_file(whole, cut);
    // Journal files are allocated in large steps: cut inside the entries, not the free tail.
    std::string data = astral::test::slurp(whole);
    size_t last = data.rfind("Link up");
    REQUIRE(last != std::string::npos);
    std::filesystem::resize_file(cut, data.rfind("Started session 200") + 4);
    JournalSourceOptions c;
    c.dir = dir / "cut";
    BundleOptions oc;
    oc.sources.push_back(journal_source(c));
    Bundle bc = load_bundle("", oc);
    CHECK(has_event(bc, "nic_link_down", "node01"));  // before the damage
    uint64_t damaged = 0, lines = 0;
    for (const auto& f : bc.files) damaged += f.damaged, lines += f.lines;
    CHECK(lines < 402);
    CHECK(damaged >= 1);
  }
  SECTION("a truncated file whose header offsets are damaged is refused, not read outside the file") {
    // Found by review (with the monitor_journal fuzz target): the repair read the object
    // at header_size without checking it against the file (header_size near 2^64 wrapped
    // `at + 16` and read far out of bounds), and `at + size` could wrap the same way.
    const std::string whole = dir / "remote/remote-node.journal";
    std::string data = astral::test::slurp(whole);
    data.resize(data.rfind("Started session 200") + 4);
    const uint64_t header = uint64_t(uint8_t(data[88])) | uint64_t(uint8_t(data[89])) << 8;
    // header_size near 2^64 and past the end; the first object's size near 2^64.
    const std::vector<std::pair<size_t, uint64_t>> damage{
        {88, ~uint64_t(7)}, {88, uint64_t(1) << 40}, {size_t(header) + 8, ~uint64_t(7)}};
    for (const auto& [at, value] : damage) {
      std::string bad = data;
      for (int i = 0; i < 8; ++i) bad[at + size_t(i)] = char((value >> (8 * i)) & 0xff);
      std::filesystem::create_directories(dir / "bad");
      dir.write("bad/remote-node.journal", bad);
      JournalSourceOptions c;
      c.dir = dir / "bad";
      BundleOptions ob;
      ob.sources.push_back(journal_source(c));
      Bundle bb = load_bundle("", ob);
      uint64_t damaged = 0;
      for (const auto& f : bb.files) damaged += f.damaged;
      CHECK(damaged >= 1);
    }
  }
  SECTION("a folder without journal files is an error naming it") {
    JournalSourceOptions none;
    none.dir = dir.path();
    std::filesystem::remove_all(dir / "remote");
    BundleOptions on;
    on.sources.push_back(journal_source(none));
    CHECK_THROWS_WITH(load_bundle("", on), Catch::Contains(dir.path()));
  }
}

TEST_CASE("Metric changes: counters that climb, gauges that move, bits that appear, the rest ignored") {
  TempDir dir;
  dir.write("cabling.csv", kCabling);
  Bundle b;
  b.fabric = load_fabric(dir / "cabling.csv");
  b.hosts = {"node01", "node02"};
  MetricWindow w;
  w.onset_us = *parse_rfc3339("2025-11-29T22:41:00Z");
  const int64_t start = w.start_us();
  std::string text;
  for (int64_t t = start; t <= w.end_us(); t += w.step_us) {
    const int64_t ms = t / 1000;
    const double after = t >= w.onset_us - 40000000 ? double(t - (w.onset_us - 40000000)) / 1e6 * 200 : 0;
    text += "node_infiniband_symbol_error_total{device=\"mlx5_0\",port=\"1\",instance=\"node01:9100\"} " +
            std::to_string(after) + " " + std::to_string(ms) + "\n";
    text += "node_infiniband_symbol_error_total{device=\"mlx5_0\",port=\"1\",instance=\"node02:9100\"} 7 " +
            std::to_string(ms) + "\n";
    text += "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"3\",pci_bus_id=\"00000000:9B:00.0\",Hostname=\"node02\"} " +
            std::string(t >= w.onset_us ? "64" : "1") + " " + std::to_string(ms) + "\n";
    text += "DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",pci_bus_id=\"00000000:9B:00.0\",Hostname=\"node02\"} " +
            std::string(t >= w.onset_us ? "91" : "62") + " " + std::to_string(ms) + "\n";
    text += "node_infiniband_symbol_error_total{device=\"mlx5_0\",port=\"1\",instance=\"elsewhere:9100\"} " +
            std::to_string(after) + " " + std::to_string(ms) + "\n";
    text += "some_unknown_metric_total{device=\"mlx5_0\",instance=\"node01:9100\"} " + std::to_string(after) + " " +
            std::to_string(ms) + "\n";
  }
  text += "this is { not a sample\n";
  size_t bad = 0;
  const auto series = parse_exposition(text, kUnknownTime, "", &bad);
  CHECK(bad == 1);
  CHECK(series.size() == 5);  // the unknown metric is not kept
  const auto events = metric_changes(series, w, b, "test");
  REQUIRE(events.size() == 3);
  const Event* symbol = nullptr;
  for (const Event& e : events)
    if (e.attr("rule") == "ib_symbol_errors") symbol = &e;
  REQUIRE(symbol);
  CHECK(symbol->kind == "metric_change");
  CHECK(symbol->component.kind == ComponentKind::nic);
  CHECK(symbol->component.host == "node01");
  CHECK(symbol->component.device == "mlx5_0");
  CHECK(symbol->attr("before") == "0");
  CHECK(symbol->attr("after") == "1.2e4");
  CHECK(symbol->attr("unit") == "/min");
  CHECK(symbol->attr_int("onset_offset_s", 0) <= -25);
  CHECK_THAT(symbol->message, Catch::Contains("symbol errors on mlx5_0 port 1 on node01 rose from 0 to 1.2e4/min") &&
                                  Catch::Contains("before onset"));
  bool bits = false, temp = false;
  for (const Event& e : events) {
    if (e.attr("rule") == "gpu_clock_events") {
      bits = true;
      CHECK(e.component.kind == ComponentKind::gpu);
      CHECK(e.component.device == "0000:9b:00");
      CHECK(e.attr("after") == "0x41");
    }
    temp = temp || (e.attr("rule") == "gpu_temperature" && e.attr("before") == "62" && e.attr("after") == "91");
  }
  CHECK(bits);
  CHECK(temp);
  MetricWindow none = w;
  none.onset_us = kUnknownTime;
  CHECK(metric_changes(series, none, b, "test").empty());
}

TEST_CASE("Metric changes: a switch's port counters are about the switch port") {
  TempDir dir;
  dir.write("cabling.csv", kCabling);
  Bundle b;
  b.fabric = load_fabric(dir / "cabling.csv");
  MetricWindow w;
  w.onset_us = *parse_rfc3339("2025-11-29T22:41:00Z");
  MetricSeries s;
  s.metric = "node_network_receive_errs_total";
  s.labels = {{"instance", "leaf01:9100"}, {"device", "Ethernet4"}};
  for (int64_t t = w.start_us(), v = 0; t <= w.end_us(); t += w.step_us) {
    if (t > w.onset_us - 20000000) v += 500;
    s.samples.push_back({t, double(v)});
  }
  const auto events = metric_changes({s}, w, b, "test");
  REQUIRE(events.size() == 1);
  CHECK(events[0].layer == Layer::switch_);
  CHECK(events[0].component.kind == ComponentKind::switch_port);
  CHECK(events[0].component.switch_name == "leaf01");
  CHECK(events[0].component.port == "Ethernet4");
  CHECK_THAT(events[0].message, Catch::StartsWith("receive errors on leaf01 Ethernet4 rose from 0 to 2000/min"));
}

TEST_CASE("Prometheus failures: unreachable, 401, 5xx, malformed JSON, no answer -> one line naming the URL") {
  MetricWindow w;
  w.onset_us = *parse_rfc3339("2025-11-29T22:41:00Z");
  PrometheusOptions o;
  o.timeout = std::chrono::milliseconds(800);
  o.connect_timeout = std::chrono::milliseconds(500);
  auto expect_failure = [&](const std::string& url, const std::string& why) {
    o.url = url;
    const MetricFetch f = fetch_prometheus(o, w);
    INFO(f.error);
    CHECK(!f.ok);
    CHECK(f.queries == 1);  // the first failure ends the fetch
    CHECK_THAT(f.error, Catch::Contains(url) && Catch::Contains(why));
    CHECK(f.error.find('\n') == std::string::npos);
  };
  expect_failure("http://127.0.0.1:" + std::to_string(free_port()), "unreachable");
  {
    CannedHttp s(CannedHttp::reply(401, "Unauthorized\n", "text/plain"));
    expect_failure(s.url(), "HTTP 401");
  }
  {
    CannedHttp s(CannedHttp::reply(503, R"({"status":"error","errorType":"unavailable","error":"tsdb not ready"})"));
    expect_failure(s.url(), "HTTP 503: tsdb not ready");
  }
  {
    CannedHttp s(CannedHttp::reply(200, R"({"status":"success","data":{"resultType":"matrix","result":[{"metr)"));
    expect_failure(s.url(), "malformed JSON");
  }
  {
    CannedHttp s("");  // accepts, never answers
    expect_failure(s.url(), "unreachable");
  }
  {
    CannedHttp s(CannedHttp::reply(200, R"({"status":"success","data":{"resultType":"matrix","result":[]}})"));
    o.url = s.url();
    const MetricFetch f = fetch_prometheus(o, w);
    CHECK(f.ok);
    CHECK(f.series.empty());
    // Every exporter is reported missing, by name.
    CHECK(std::any_of(f.notes.begin(), f.notes.end(), [](const std::string& n) {
      return n.find("dcgm-exporter") != std::string::npos && n.find("missing") != std::string::npos;
    }));
  }
  o.url = "http://user:secret@127.0.0.1:" + std::to_string(free_port());
  CHECK(fetch_prometheus(o, w).error.find("secret") == std::string::npos);
  CHECK(redacted_url("https://u:p@prom:9090/x") == "https://***@prom:9090/x");
  CHECK(redacted_url("http://prom:9090/a@b") == "http://prom:9090/a@b");
  o.url = "ftp://127.0.0.1/";
  CHECK_THAT(fetch_prometheus(o, w).error, Catch::Contains("not an http(s) URL"));
}

TEST_CASE("Source time arguments: durations and times") {
  CHECK(parse_duration_us("90s") == 90000000);
  CHECK(parse_duration_us("1h30m") == 5400000000LL);
  CHECK(parse_duration_us("250ms") == 250000);
  CHECK(parse_duration_us("15") == 15000000);
  CHECK(!parse_duration_us("soon"));
  CHECK(!parse_duration_us(""));
  CHECK(parse_time_arg("2025-11-29T22:41:00Z") == parse_rfc3339("2025-11-29T22:41:00Z"));
  CHECK(parse_time_arg("1764456060") == 1764456060000000LL);
  CHECK(!parse_time_arg("yesterday"));
  // Beyond int64_t microseconds (std::llround's result is unspecified there): not a time.
  CHECK(!parse_duration_us("1e300s"));
  CHECK(!parse_duration_us("9300000000000d"));
  CHECK(!parse_time_arg("1e300"));
  CHECK(parse_duration_us("100000d") == 100000LL * 86400 * 1000000);
}
