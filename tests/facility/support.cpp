#include "support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "run_process.hpp"
#include "test_paths.hpp"

extern char** environ;

namespace astral::facility::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  char tmpl[] = "/tmp/astral-facility-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string TempDir::file(const std::string& name, const std::string& content) const {
  std::string p = path + "/" + name;
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

namespace {

void openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = astral::test::run_process(argv, 30);
  if (r.exit_code != 0) throw std::runtime_error("openssl " + args.at(0) + " failed: " + r.err);
}

void make_leaf(const std::string& dir, const std::string& name, const std::string& san) {
  std::string key = dir + "/" + name + ".key", csr = dir + "/" + name + ".csr", ext = dir + "/" + name + ".ext";
  std::ofstream(ext) << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n";
  openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
           "-out", csr, "-subj", "/CN=" + name});
  openssl({"x509", "-req", "-in", csr, "-CA", dir + "/ca.crt", "-CAkey", dir + "/ca.key", "-CAcreateserial",
           "-out", dir + "/" + name + ".crt", "-days", "2", "-extfile", ext});
}

}  // namespace

const TestPki& test_pki() {
  static TempDir dir;
  static TestPki pki;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& d = dir.path;
    openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=Astral test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
    make_leaf(d, "localhost", "DNS:localhost,IP:127.0.0.1");
    make_leaf(d, "elsewhere", "DNS:bmc.elsewhere.invalid");
    pki = TestPki{d + "/ca.crt", d + "/localhost.crt", d + "/localhost.key", d + "/elsewhere.crt", d + "/elsewhere.key"};
  });
  return pki;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool has_finding(const Snapshot& s, const std::string& check, const std::string& text) {
  return std::any_of(s.findings.begin(), s.findings.end(), [&](const Finding& f) {
    return f.check == check && f.message.find(text) != std::string::npos;
  });
}

bool has_alarm(const Snapshot& s, const std::string& type, const std::string& entity,
               std::optional<Severity> severity) {
  return std::any_of(s.alarms.begin(), s.alarms.end(), [&](const Alarm& a) {
    return a.type == type && a.entity == entity && (!severity || a.severity == *severity);
  });
}

std::string mockup_dir(const std::string& name) { return astral::test::fixture("redfish/" + name); }
std::string quirky_dir() { return astral::test::fixture("astral/facility/quirky-bmc"); }

MockBmc::MockBmc(const std::string& dir, MockupOptions options, Tls tls, std::size_t listeners)
    : options_(options) {
  options.dir = dir;
  service_ = std::make_unique<MockupService>(options);
  HttpServerOptions so;
  so.listen.assign(listeners, "127.0.0.1:0");
  so.io_timeout = std::chrono::milliseconds(3000);
  so.idle_timeout = std::chrono::milliseconds(3000);
  if (tls == Tls::valid) {
    so.tls_cert_file = test_pki().server_cert;
    so.tls_key_file = test_pki().server_key;
  } else if (tls == Tls::wrong_host) {
    so.tls_cert_file = test_pki().wrong_host_cert;
    so.tls_key_file = test_pki().wrong_host_key;
  }
  server_ = std::make_unique<HttpServer>(so, [this](const HttpRequest& r) { return handle(r); });
}

void MockBmc::fault(const std::string& path, Fault f) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_[path] = std::move(f);
}

int MockBmc::hits(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = hits_.find(path);
  return it == hits_.end() ? 0 : it->second;
}

void MockBmc::expire_sessions() { service_->expire_sessions(); }

std::size_t MockBmc::connections(std::size_t listener) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(server_->ports().at(listener));
  return it == peers_.end() ? 0 : it->second.size();
}

namespace {

// Established TCP connections whose remote port is one of `ports`: the client ends of connections
// to those listeners (the server ends have them as local ports).
std::size_t open_client_connections(const std::vector<std::uint16_t>& ports) {
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  std::size_t open = 0;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    auto colon = remote.rfind(':');
    if (colon == std::string::npos || state != "01") continue;  // 01: ESTABLISHED
    auto port = static_cast<std::uint16_t>(std::stoul(remote.substr(colon + 1), nullptr, 16));
    open += std::find(ports.begin(), ports.end(), port) != ports.end();
  }
  return open;
}

}  // namespace

std::size_t MockBmc::open_connections() const { return open_client_connections(server_->ports()); }

std::vector<std::string> MockBmc::auth_headers_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return auth_seen_;
}

HttpResponse MockBmc::handle(const HttpRequest& r) {
  ++total_;
  std::size_t now = ++in_flight_;
  for (std::size_t prev = max_in_flight_; now > prev && !max_in_flight_.compare_exchange_weak(prev, now);) {}
  std::string path = r.path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  Fault f;
  bool faulty = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++hits_[path];
    peers_[r.local_port].insert(r.peer);
    if (path == "/redfish/v1") max_open_ = std::max(max_open_, open_client_connections(server_->ports()));
    if (!r.header("authorization").empty()) auth_seen_.push_back(r.header("authorization"));
    if (!r.header("x-auth-token").empty()) auth_seen_.push_back("X-Auth-Token " + r.header("x-auth-token"));
    auto it = faults_.find(path);
    if (it != faults_.end() && it->second.times != 0) {
      f = it->second;
      faulty = true;
      if (it->second.times > 0) --it->second.times;
    }
  }
  HttpResponse resp;
  if (faulty && f.delay.count() > 0) std::this_thread::sleep_for(f.delay);
  if (faulty && f.expire_sessions) service_->expire_sessions();
  if (faulty && f.status != 0) resp = redfish_error(f.status, "injected fault");
  else if (faulty && !f.body.empty()) resp = HttpResponse{200, "application/json", {}, f.body};
  else resp = service_->handle(r);
  --in_flight_;
  return resp;
}

void extract_ttar(const std::string& archive, const std::string& dest) {
  std::ifstream in(archive);
  if (!in) throw std::runtime_error("cannot open " + archive);
  std::string line;
  auto value = [](const std::string& l, const std::string& key) { return l.substr(key.size()); };
  while (std::getline(in, line)) {
    if (line.rfind("Directory: ", 0) == 0) {
      fs::create_directories(dest + "/" + value(line, "Directory: "));
    } else if (line.rfind("Path: ", 0) == 0) {
      std::string path = dest + "/" + value(line, "Path: ");
      fs::create_directories(fs::path(path).parent_path());
      std::string next;
      if (!std::getline(in, next)) break;
      if (next.rfind("SymlinkTo: ", 0) == 0) {
        std::error_code ec;
        fs::create_symlink(value(next, "SymlinkTo: "), path, ec);
        continue;
      }
      std::string content;
      if (next.rfind("Lines: ", 0) == 0) {
        int n = std::stoi(value(next, "Lines: "));
        for (int i = 0; i < n && std::getline(in, next); ++i) {
          if (i == n - 1 && next.size() >= 3 && next.compare(next.size() - 3, 3, "EOF") == 0) {
            content += next.substr(0, next.size() - 3);  // "EOF" marks a file without a final newline
          } else {
            content += next + "\n";
          }
        }
      }
      std::ofstream(path, std::ios::binary) << content;
    }
  }
}

ServerProcess::ServerProcess(std::vector<std::string> argv, const std::string& port_file, const std::string& stderr_path) {
  argv.push_back("--port-file");
  argv.push_back(port_file);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(port_file) && std::chrono::steady_clock::now() < deadline && running())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::istringstream in(slurp(port_file));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) urls_.push_back(line);
  REQUIRE(!urls_.empty());
  REQUIRE(urls_[0].find("://127.0.0.1:") != std::string::npos);
  port_ = static_cast<std::uint16_t>(std::stoi(urls_[0].substr(urls_[0].rfind(':') + 1)));
}

ServerProcess::~ServerProcess() { stop(); }

bool ServerProcess::running() const {
  if (status_ != -2) return false;
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

int ServerProcess::stop() {
  if (status_ != -2) return status_;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return status_;
}

long ServerProcess::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace astral::facility::test
