#pragma once
// Facility test helpers: temporary directories, a test PKI made with the openssl CLI at test time,
// a mock BMC (the real HTTP(S) server serving a DMTF mockup, with injected faults), and a ttar
// extractor for node_exporter's fake sysfs archive.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "astral/facility/http_server.hpp"
#include "astral/facility/mockup.hpp"
#include "astral/facility/sample.hpp"

namespace astral::facility::test {

struct TempDir {
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
  std::string file(const std::string& name, const std::string& content) const;  // writes, returns path
};

// CA, a server certificate for localhost/127.0.0.1 and one for another host name; made once per
// test process.
struct TestPki {
  std::string ca_cert;
  std::string server_cert, server_key;
  std::string wrong_host_cert, wrong_host_key;
};
const TestPki& test_pki();

// The whole file (empty when it cannot be read: the assertion that follows says what was expected).
std::string slurp(const std::string& path);
// Whether the snapshot has a finding of `check` whose message contains `text`.
bool has_finding(const Snapshot& s, const std::string& check, const std::string& text = "");
// Whether the snapshot has an alarm of `type` on `entity` (of `severity` when given).
bool has_alarm(const Snapshot& s, const std::string& type, const std::string& entity,
               std::optional<Severity> severity = std::nullopt);

std::string mockup_dir(const std::string& name);  // tests/fixtures/redfish/<name>
std::string quirky_dir();                          // tests/fixtures/astral/facility/quirky-bmc

// What a resource does instead of (or before) answering normally.
struct Fault {
  int status = 0;                        // answer this status instead of the resource
  std::string body;                      // answer 200 with this body instead (malformed JSON)
  std::chrono::milliseconds delay{0};    // wait first (slow BMC)
  int times = -1;                        // how many requests it applies to; -1 = always
  bool expire_sessions = false;          // forget every session first (a BMC restart)
};

class MockBmc {
 public:
  enum class Tls { none, valid, wrong_host };
  explicit MockBmc(const std::string& dir, MockupOptions options = {}, Tls tls = Tls::none,
                   std::size_t listeners = 1);
  std::string url(std::size_t i = 0) const { return server_->url(i); }
  void fault(const std::string& path, Fault f);
  int hits(const std::string& path) const;
  int total_hits() const { return total_; }
  std::size_t max_in_flight() const { return max_in_flight_; }
  // Connections (client addresses) that requests came over, on the i-th listener.
  std::size_t connections(std::size_t listener) const;
  // The most client connections to this BMC's listeners that were open at once, sampled from
  // /proc/self/net/tcp whenever a service root was asked for (the start of a crawl).
  std::size_t max_open_connections() const { return max_open_; }
  std::size_t open_connections() const;  // now
  MockupService& service() { return *service_; }
  // Drop every session (a BMC reboot): clients must log in again.
  void expire_sessions();
  std::vector<std::string> auth_headers_seen() const;

 private:
  HttpResponse handle(const HttpRequest& r);
  std::unique_ptr<MockupService> service_;
  MockupOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Fault> faults_;
  std::map<std::string, int> hits_;
  std::map<std::uint16_t, std::set<std::string>> peers_;  // listener port -> client addresses
  std::size_t max_open_ = 0;
  std::vector<std::string> auth_seen_;
  std::atomic<int> total_{0};
  std::atomic<std::size_t> in_flight_{0}, max_in_flight_{0};
  std::unique_ptr<HttpServer> server_;  // last: stops before the rest is destroyed
};

// A child process that serves HTTP(S) and writes its URL(s) to --port-file (appended to argv);
// SIGTERM and reaped on destruction. stderr goes to `stderr_path` when given.
class ServerProcess {
 public:
  ServerProcess(std::vector<std::string> argv, const std::string& port_file, const std::string& stderr_path = "");
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  std::uint16_t port() const { return port_; }
  const std::string& url(std::size_t i = 0) const { return urls_.at(i); }
  bool running() const;
  int stop();     // SIGTERM, wait; the exit status (-1 when it died from a signal)
  long rss_kib() const;  // resident memory (/proc/<pid>/status VmRSS)

 private:
  int pid_ = 0;
  std::vector<std::string> urls_;
  std::uint16_t port_ = 0;
  int status_ = -2;
};

// Unpacks a ttar archive (node_exporter's text archive format) under dest.
void extract_ttar(const std::string& archive, const std::string& dest);

}  // namespace astral::facility::test
