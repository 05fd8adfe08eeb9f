// End to end against the real collectors: a simulated incident's host lines go to
// systemd-journal-remote as journal export format over HTTP, its switch and BMC lines to an
// rsyslogd over TCP (RFC 5424 and RFC 3164), and counters of the faulty link and of a throttling
// GPU into Prometheus (backfilled by promtool). `astral monitor diagnose` over the job's own
// files, the journal folder, the syslog tree and Prometheus must name the root cause it names
// from the bundle, with the metric change among the evidence. Everything runs on loopback in a
// temporary folder and is stopped and removed at the end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <tuple>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/simulate.hpp"
#include "monitor_test_util.hpp"
#include "run_process.hpp"
#include "site_servers.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;
namespace fs = std::filesystem;

namespace {

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

void append_entry(std::string& out, int64_t time_us, const std::string& host, const std::string& line) {
  out += "__REALTIME_TIMESTAMP=" + std::to_string(time_us) + "\n__MONOTONIC_TIMESTAMP=" +
         std::to_string(time_us % 100000000000LL) + "\n_BOOT_ID=00112233445566778899aabbccddeeff\n";
  out += "_HOSTNAME=" + host + "\n_TRANSPORT=stdout\nMESSAGE\n" + le64(line.size()) + line + "\n\n";
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string rfc3339(int64_t us) { return format_time(us); }

// The switch's message as its syslog daemon would send it: what follows the host name in the
// line (its own collector header is the receiver's business), split into tag and text.
std::pair<std::string, std::string> tag_and_text(const std::string& line, const std::string& host) {
  std::string rest = line;
  if (size_t at = line.find(" " + host + " "); at != std::string::npos) rest = line.substr(at + host.size() + 2);
  for (const char* sev : {"NOTICE ", "INFO ", "WARNING ", "ERR ", "ERROR ", "CRIT ", "DEBUG "})
    if (rest.rfind(sev, 0) == 0) rest = rest.substr(std::strlen(sev));
  const size_t colon = rest.find(": ");
  if (colon != std::string::npos && colon < 48 && rest.substr(0, colon).find(' ') == std::string::npos) {
    std::string tag = rest.substr(0, colon);
    if (size_t b = tag.find('['); b != std::string::npos) tag.resize(b);
    return {tag, rest.substr(colon + 2)};
  }
  return {"syslog", rest};
}

void send_tcp(int port, const std::string& data) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    sent += size_t(n);
  }
  ::close(fd);
}

// A loopback UDP port free at the time of asking.
int free_udp_port() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// One datagram per message, as a switch sends them. Paced so that a loaded machine's receiver
// keeps up (loopback UDP drops what overflows the socket buffer, like any UDP).
void send_udp(int port, const std::vector<std::string>& messages) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (size_t i = 0; i < messages.size(); ++i) {
    REQUIRE(::sendto(fd, messages[i].data(), messages[i].size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a) ==
            ssize_t(messages[i].size()));
    if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(fd);
}

const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

std::string rfc3164_time(int64_t us) {
  const std::string iso = format_time(us);  // 2025-11-29T22:42:00.123456Z
  const int month = std::stoi(iso.substr(5, 2)), day = std::stoi(iso.substr(8, 2));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s %2d %s", kMonths[month - 1], day, iso.substr(11, 8).c_str());
  return buf;
}

std::string openmetrics_series(const std::string& name_and_labels, int64_t from_us, int64_t to_us,
                               const std::function<double(int64_t)>& value) {
  std::string out;
  for (int64_t t = from_us; t <= to_us; t += 15000000) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.17g %.3f\n", value(t), double(t) / 1e6);
    out += name_and_labels + buf;
  }
  return out;
}

// The bundle's lines as a site holds them. Job files (traces, fabric, dumps) stay a bundle in
// `job`; switch and BMC lines become syslog messages as their daemons send them (RFC 5424 from a
// switch, RFC 3164 from a BMC's forwarder), one message per string without the newline; host
// lines go to the journal (`hosts_to_journal`) or stay files of the job's bundle.
struct SiteSplit {
  std::vector<std::string> syslog_messages;
  std::vector<std::tuple<int64_t, std::string, std::string>> host_lines;  // time, host, line; in time order
};

SiteSplit split_for_site(const Bundle& full, const std::string& bundle_dir, const std::string& job,
                         bool hosts_to_journal) {
  std::map<std::pair<uint32_t, uint32_t>, int64_t> time_of_line;
  for (const Event& e : full.events)
    if (e.has_time() && e.line) time_of_line.emplace(std::make_pair(e.file, e.line), e.time_us);
  auto copy_to_job = [&](const std::string& rel) {
    fs::create_directories(fs::path(job + "/" + rel).parent_path());
    fs::copy_file(bundle_dir + "/" + rel, job + "/" + rel);
  };
  SiteSplit out;
  for (uint32_t k = 0; k < full.files.size(); ++k) {
    const FileStats& f = full.files[k];
    const bool on_switch = f.path.rfind("switches/", 0) == 0;
    const bool bmc = f.path.ends_with("sel.txt");
    if (f.kind != FileKind::text_log || (!hosts_to_journal && !on_switch && !bmc)) {
      copy_to_job(f.path);
      continue;
    }
    int64_t t = kUnknownTime;
    for (const Event& e : full.events)
      if (e.file == k && e.has_time()) {
        t = e.time_us;
        break;
      }
    const std::vector<std::string> lines = lines_of(bundle_dir + "/" + f.path);
    for (uint32_t i = 0; i < lines.size(); ++i) {
      if (auto it = time_of_line.find({k, i + 1}); it != time_of_line.end()) t = it->second;
      if (t == kUnknownTime || lines[i].empty()) continue;
      if (on_switch) {
        auto [tag, text] = tag_and_text(lines[i], f.host);
        out.syslog_messages.push_back("<187>1 " + rfc3339(t) + " " + f.host + " " + tag + " - - - " + text);
      } else if (bmc) {
        out.syslog_messages.push_back("<13>" + rfc3164_time(t) + " " + f.host + "-bmc ipmisel: " + lines[i]);
      } else {
        out.host_lines.emplace_back(t, f.host, lines[i]);
      }
    }
  }
  for (const std::string& src : full.fabric_sources) copy_to_job(src);
  // A collector receives lines as they happen.
  std::stable_sort(out.host_lines.begin(), out.host_lines.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  return out;
}

size_t lines_in_tree(const std::string& tree) {
  size_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(tree, ec), end; it != end; it.increment(ec))
    if (it->is_regular_file()) n += lines_of(it->path().string()).size();
  return n;
}

}  // namespace

TEST_CASE("Site sources: journal-remote, rsyslog and Prometheus give the bundle's root cause, with metric evidence") {
  TempDir dir;
  const FabricGraph fabric = make_rail_fabric(4, 8, 4, 1);
  SimulateOptions so;
  so.fault = FaultKind::optic_ber;
  so.ranks = 16;
  so.seed = 5;
  const std::string bundle_dir = dir / "bundle";
  const GroundTruth truth = simulate(fabric, so, bundle_dir);

  // From the bundle: the reference answer.
  BundleOptions bo;
  bo.jobs = 2;
  Bundle full = load_bundle(bundle_dir, bo);
  Bundle reference = full;
  const Diagnosis expected = diagnose(reference);
  REQUIRE(!expected.root_causes.empty());
  REQUIRE(matches(expected.root_causes[0], truth));
  REQUIRE(expected.incident.onset_us != kUnknownTime);

  // Split the bundle as a site holds it: job files stay a bundle; host lines go to the journal,
  // switch and BMC lines to syslog.
  const std::string job = dir / "job";
  SiteSplit split = split_for_site(full, bundle_dir, job, /*hosts_to_journal=*/true);
  const auto& host_lines = split.host_lines;
  std::string syslog_stream;
  for (const std::string& m : split.syslog_messages) syslog_stream += m + "\n";
  const size_t syslog_lines = split.syslog_messages.size();
  std::string journal_stream;
  for (const auto& [t, host, line] : host_lines) append_entry(journal_stream, t, host, line);
  const size_t journal_lines = host_lines.size();
  REQUIRE(journal_lines > 100);
  REQUIRE(syslog_lines > 0);

  // systemd-journal-remote receives the host lines over HTTP.
  const std::string journal_dir = dir / "journal/";
  fs::create_directories(journal_dir);
  {
    const int port = free_port();
    ServerProcess jr({"/lib/systemd/systemd-journal-remote", "--listen-http=127.0.0.1:" + std::to_string(port),
                      "--output=" + journal_dir},
                     dir / "journal-remote.log");
    REQUIRE(jr.wait_until([&] { return port_open(port); }));
    dir.write("upload.export", journal_stream);
    auto up = astral::test::run_process({"curl", "-sS", "-m", "60", "-H", "Content-Type: application/vnd.fdo.journal",
                                         "--data-binary", "@" + dir / "upload.export",
                                         "http://127.0.0.1:" + std::to_string(port) + "/upload"},
                                        90);
    INFO(up.err);
    REQUIRE(up.exit_code == 0);
    const std::string log = jr.stop();
    INFO(log);
    CHECK(log.find("Finishing after writing " + std::to_string(journal_lines) + " entries") != std::string::npos);
  }

  // rsyslogd receives the switch and BMC lines over TCP and writes a file per host.
  const std::string tree = dir / "syslog";
  fs::create_directories(tree);
  fs::create_directories(dir / "rsyslog-work");
  dir.write("rsyslog.conf", "global(workDirectory=\"" + dir / "rsyslog-work" + "\")\n" +
                                "module(load=\"imtcp\")\n"
                                "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"0\" listenPortFileName=\"" +
                                dir / "rsyslog.port" + "\")\n" + "template(name=\"perhost\" type=\"string\" string=\"" +
                                tree + "/%HOSTNAME%/syslog.log\")\n" +
                                "action(type=\"omfile\" dynaFile=\"perhost\" template=\"RSYSLOG_FileFormat\")\n");
  {
    ServerProcess rs({"rsyslogd", "-n", "-f", dir / "rsyslog.conf", "-i", dir / "rsyslog.pid"}, dir / "rsyslog.log");
    REQUIRE(rs.wait_until([&] { return fs::exists(dir / "rsyslog.port") && fs::file_size(dir / "rsyslog.port") > 0; }));
    const int port = std::stoi(astral::test::slurp(dir / "rsyslog.port"));
    send_tcp(port, syslog_stream);
    // rsyslog writes asynchronously: wait until every line is on disk, then stop it.
    CHECK(rs.wait_until([&] { return lines_in_tree(tree) >= syslog_lines; }, 30));
    rs.stop();
  }

  // Prometheus, backfilled: the symbol errors of the NIC across the faulty optic climb 40 s
  // before the onset; a GPU elsewhere starts thermal throttling after it.
  const int64_t onset = expected.incident.onset_us;
  const int64_t from = onset - 20LL * 60 * 1000000, to = onset + 10LL * 60 * 1000000;
  const Cable* cable = fabric.cable_at(truth.component.switch_name, truth.component.port);
  REQUIRE(cable);
  std::string other_host;
  for (const std::string& h : truth.hosts)
    if (h != cable->nic.host) other_host = h;
  REQUIRE(!other_host.empty());
  std::string om = "# TYPE node_infiniband_symbol_error counter\n";
  om += openmetrics_series("node_infiniband_symbol_error_total{instance=\"" + cable->nic.host + ":9100\",device=\"" +
                               cable->nic.nic + "\",port=\"1\"}",
                           from, to, [&](int64_t t) { return t < onset - 40000000 ? 0.0 : double(t - onset + 40000000) / 1e6 * 200; });
  om += openmetrics_series("node_infiniband_symbol_error_total{instance=\"" + other_host + ":9100\",device=\"mlx5_0\",port=\"1\"}",
                           from, to, [](int64_t) { return 3.0; });
  om += "# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge\n";
  om += openmetrics_series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS{Hostname=\"" + other_host +
                               "\",gpu=\"2\",pci_bus_id=\"00000000:2A:00.0\"}",
                           from, to, [&](int64_t t) { return t < onset + 30000000 ? 0.0 : 64.0; });
  om += "# EOF\n";
  dir.write("series.om", om);
  auto blocks = astral::test::run_process({"promtool", "tsdb", "create-blocks-from", "openmetrics", dir / "series.om",
                                           dir / "tsdb"},
                                          120);
  INFO(blocks.out + blocks.err);
  REQUIRE(blocks.exit_code == 0);
  dir.write("prometheus.yml", "global:\n  scrape_interval: 15s\n");
  const int prom_port = free_port();
  const std::string prom_url = "http://127.0.0.1:" + std::to_string(prom_port);
  ServerProcess prom({"prometheus", "--config.file=" + dir / "prometheus.yml", "--storage.tsdb.path=" + dir / "tsdb",
                      "--storage.tsdb.retention.time=100y", "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                     dir / "prometheus.log");
  REQUIRE(prom.wait_until([&] {
    return port_open(prom_port) &&
           astral::test::run_process({"curl", "-sf", "-m", "2", prom_url + "/-/ready"}, 5).exit_code == 0;
  }, 60));

  auto r = astral::test::run_process({ASTRAL_CLI, "monitor", "diagnose", job, "--journal", journal_dir, "--syslog-dir",
                                      tree, "--prometheus", prom_url, "--json"},
                                     240);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(!j["root_causes"].empty());
  const auto& top = j["root_causes"][0];
  const RootCause& want = expected.root_causes[0];
  CHECK(top["fault"] == want.fault);
  CHECK(top["component"]["kind"] == std::string(to_string(want.component.kind)));
  CHECK(top["component"].value("switch", "") == want.component.switch_name);
  CHECK(top["component"].value("port", "") == want.component.port);
  bool metric = false;
  for (const auto& e : top["evidence"])
    if (e.value("kind", "") == "metric_change") {
      metric = true;
      CHECK_THAT(e.value("message", ""), Catch::Contains("symbol errors on " + cable->nic.nic) &&
                                             Catch::Contains("before onset"));
    }
  CHECK(metric);
  bool prometheus_ok = false;
  for (const auto& s : j["sources"]) prometheus_ok = prometheus_ok || (s["source"] == "prometheus" && s["status"] == "ok");
  CHECK(prometheus_ok);

  // The throttling GPU is there as an event, and does not take the blame.
  auto ev = astral::test::run_process({ASTRAL_CLI, "monitor", "events", job, "--journal", journal_dir, "--prometheus",
                                       prom_url, "--kind", "metric_change"},
                                      240);
  REQUIRE(ev.exit_code == 0);
  CHECK(ev.out.find("clock-event reasons on GPU 0000:2a:00 on " + other_host + " gained") != std::string::npos);
  CHECK(top["component"].value("host", "") != other_host);

  // The same Prometheus gone: one line naming it, the source skipped, the diagnosis still made.
  prom.stop();
  auto gone = astral::test::run_process({ASTRAL_CLI, "monitor", "diagnose", job, "--journal", journal_dir,
                                         "--syslog-dir", tree, "--prometheus", prom_url, "--prometheus-timeout", "2"},
                                        120);
  CHECK(gone.exit_code == 0);
  CHECK(gone.err.find(prom_url) != std::string::npos);
  CHECK(gone.err.find("source skipped") != std::string::npos);
  CHECK(gone.out.find(want.component.switch_name) != std::string::npos);
}

// A site's switches and BMCs forward over UDP (the default of most switch OSes and BMCs) or over
// RELP (rsyslog's acknowledged transport, typically from a relay). One receiving rsyslogd takes
// both, each input with its own tree; the RELP sender is a second rsyslogd (omrelp) that relays
// what it gets over TCP, as a rack's relay would. Host lines stay files of the job's bundle, so
// the switch-side evidence arrives only through syslog.
TEST_CASE("Site sources: switch and BMC syslog over UDP and over RELP give the bundle's root cause") {
  TempDir dir;
  const FabricGraph fabric = make_rail_fabric(4, 8, 4, 1);
  SimulateOptions so;
  so.fault = FaultKind::optic_ber;
  so.ranks = 16;
  so.seed = 7;
  const std::string bundle_dir = dir / "bundle";
  const GroundTruth truth = simulate(fabric, so, bundle_dir);
  BundleOptions bo;
  bo.jobs = 2;
  const Bundle full = load_bundle(bundle_dir, bo);
  Bundle reference = full;
  const Diagnosis expected = diagnose(reference);
  REQUIRE(!expected.root_causes.empty());
  REQUIRE(matches(expected.root_causes[0], truth));
  const std::string job = dir / "job";
  const SiteSplit split = split_for_site(full, bundle_dir, job, /*hosts_to_journal=*/false);
  const size_t messages = split.syslog_messages.size();
  REQUIRE(messages > 0);

  const std::string udp_tree = dir / "syslog-udp", relp_tree = dir / "syslog-relp";
  fs::create_directories(dir / "receiver-work");
  fs::create_directories(dir / "relay-work");
  const int udp_port = free_udp_port(), relp_port = free_port();
  dir.write("receiver.conf",
            "global(workDirectory=\"" + dir / "receiver-work" + "\")\n"
            "module(load=\"imudp\")\nmodule(load=\"imrelp\")\n"
            "template(name=\"udptree\" type=\"string\" string=\"" + udp_tree + "/%HOSTNAME%/syslog.log\")\n"
            "template(name=\"relptree\" type=\"string\" string=\"" + relp_tree + "/%HOSTNAME%/syslog.log\")\n"
            "ruleset(name=\"fromudp\") { action(type=\"omfile\" dynaFile=\"udptree\" template=\"RSYSLOG_FileFormat\") }\n"
            "ruleset(name=\"fromrelp\") { action(type=\"omfile\" dynaFile=\"relptree\" template=\"RSYSLOG_FileFormat\") }\n"
            "input(type=\"imudp\" address=\"127.0.0.1\" port=\"" + std::to_string(udp_port) +
                "\" ruleset=\"fromudp\" rcvbufSize=\"4m\")\n"
            "input(type=\"imrelp\" address=\"127.0.0.1\" port=\"" + std::to_string(relp_port) +
                "\" ruleset=\"fromrelp\")\n");
  dir.write("relay.conf", "global(workDirectory=\"" + dir / "relay-work" + "\")\n"
                          "module(load=\"imtcp\")\nmodule(load=\"omrelp\")\n"
                          "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"0\" listenPortFileName=\"" +
                              dir / "relay.port" + "\")\n"
                          "action(type=\"omrelp\" target=\"127.0.0.1\" port=\"" + std::to_string(relp_port) + "\")\n");
  {
    ServerProcess receiver({"rsyslogd", "-n", "-f", dir / "receiver.conf", "-i", dir / "receiver.pid"},
                           dir / "receiver.log");
    REQUIRE(receiver.wait_until([&] { return port_open(relp_port); }));
    ServerProcess relay({"rsyslogd", "-n", "-f", dir / "relay.conf", "-i", dir / "relay.pid"}, dir / "relay.log");
    REQUIRE(relay.wait_until([&] { return fs::exists(dir / "relay.port") && fs::file_size(dir / "relay.port") > 0; }));
    send_udp(udp_port, split.syslog_messages);
    std::string stream;
    for (const std::string& m : split.syslog_messages) stream += m + "\n";
    send_tcp(std::stoi(astral::test::slurp(dir / "relay.port")), stream);
    const bool all_written =
        receiver.wait_until([&] { return lines_in_tree(udp_tree) >= messages && lines_in_tree(relp_tree) >= messages; }, 30);
    relay.stop();
    INFO(receiver.stop());
    REQUIRE(all_written);
  }
  CHECK(lines_in_tree(udp_tree) == messages);
  CHECK(lines_in_tree(relp_tree) == messages);

  const RootCause& want = expected.root_causes[0];
  for (const std::string& tree : {udp_tree, relp_tree}) {
    INFO(tree);
    auto r = astral::test::run_process({ASTRAL_CLI, "monitor", "diagnose", job, "--syslog-dir", tree, "--json"}, 240);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(!j["root_causes"].empty());
    const auto& top = j["root_causes"][0];
    CHECK(top["fault"] == want.fault);
    CHECK(top["component"].value("switch", "") == want.component.switch_name);
    CHECK(top["component"].value("port", "") == want.component.port);
    bool switch_evidence = false;  // the switch's own lines, read back from the tree
    for (const auto& e : top["evidence"])
      switch_evidence = switch_evidence || e.value("host", "") == want.component.switch_name;
    CHECK(switch_evidence);
  }
}

TEST_CASE("CLI sources: bad flags exit 2 with one line naming them") {
  TempDir dir;
  auto none = astral::test::run_process({ASTRAL_CLI, "monitor", "diagnose"});
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("--journal") != std::string::npos);
  auto missing = astral::test::run_process({ASTRAL_CLI, "monitor", "diagnose", "--journal", dir / "nothing"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find(dir / "nothing") != std::string::npos);
  fs::create_directories(dir / "empty");
  auto empty = astral::test::run_process({ASTRAL_CLI, "monitor", "timeline", "-o", dir / "t.json", "--journal", dir / "empty"});
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("no journal files") != std::string::npos);
  auto window = astral::test::run_process({ASTRAL_CLI, "monitor", "events", "--syslog-dir", dir.path(), "--around",
                                           "2025-11-29T22:41:00Z", "--window", "soon"});
  CHECK(window.exit_code == 2);
  CHECK(window.err.find("--window soon") != std::string::npos);
  CHECK(std::count(window.err.begin(), window.err.end(), '\n') == 1);
}
