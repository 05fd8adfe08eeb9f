// Facility benchmark: poll N simulated BMCs over loopback with bounded concurrency, then serve a
// Prometheus scrape of everything they report. Baselines in the same run, on a subset: the same
// poll with one level of $expand (a request per resource below the collections), the thread-pool
// poller (the poller before issue 15: a thread per endpoint in flight, one level); the same number of
// bare HTTP GETs through libcurl multi (what the transport alone costs), and polling on scrape.
// Targets: issue 8, 500 BMCs in <= 2 s and a scrape in <= 50 ms; issue 15, 12,500 BMCs in
// <= 10 s wall with bounded memory.
//
// The BMCs are virtual and live in a child process, so that the poller's CPU is measured apart
// from theirs (both are printed; on this 2-core machine they share the cores). A few listeners
// serve the same DMTF mockup to every host name bmc<i>.localhost (libcurl resolves *.localhost to
// loopback itself), each answer held back by the simulated delay without holding a thread, as a
// BMC's latency costs its poller nothing; --hung K of them never answer, to show per-request
// timeouts at work.
//
//   bench_facility_poll [--endpoints 500] [--concurrency 64] [--latency-ms 1] [--baseline 500]
//                       [--ports 4] [--hung 0] [--timeout-ms 5000] [--mockup DIR] [--scrapes 20]
//                       [--bare 1] [--levels 6]
//   --bare 0 skips the bare-GET baseline (for profiling the poll); --levels caps $expand.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>

#include "astral/facility/config.hpp"
#include "astral/facility/exporter.hpp"
#include "astral/facility/http_server.hpp"
#include "astral/facility/mockup.hpp"
#include "astral/facility/redfish.hpp"

using namespace astral::facility;
using Steady = std::chrono::steady_clock;

namespace {

double seconds_since(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

// CPU time of the whole process (client and simulated BMCs): what the run costs on an idle machine.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

long max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

std::size_t on_body(char* d, std::size_t s, std::size_t n, void* u) {
  static_cast<std::string*>(u)->append(d, s * n);
  return s * n;
}

std::size_t discard(char*, std::size_t s, std::size_t n, void*) { return s * n; }

struct Args {
  std::size_t endpoints = 500, concurrency = 64, baseline = 500, scrapes = 20, ports = 4, hung = 0, bare = 1;
  int levels = 6;  // $expand levels the poll asks for (bounded by the mockup's MaxLevels)
  double latency_ms = 1, timeout_ms = 5000;
  std::string mockup = std::string(ASTRAL_FIXTURES_DIR) + "/redfish/public-liquid-cooled-server";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--endpoints") a.endpoints = std::stoul(v);
    else if (k == "--concurrency") a.concurrency = std::stoul(v);
    else if (k == "--latency-ms") a.latency_ms = std::stod(v);
    else if (k == "--baseline") a.baseline = std::stoul(v);
    else if (k == "--ports") a.ports = std::max<std::size_t>(1, std::stoul(v));
    else if (k == "--hung") a.hung = std::stoul(v);
    else if (k == "--timeout-ms") a.timeout_ms = std::stod(v);
    else if (k == "--mockup") a.mockup = v;
    else if (k == "--scrapes") a.scrapes = std::stoul(v);
    else if (k == "--bare") a.bare = std::stoul(v);
    else if (k == "--levels") a.levels = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "option %s needs a value\n", argv[argc - 1]);
    std::exit(2);
  }
  return a;
}

// The simulated BMCs: every host name gets the mockup after `latency`; hung ones ("hung<i>.")
// are held until the run ends. A few epoll threads serve every connection.
class VirtualBmcs {
 public:
  VirtualBmcs(const Args& a)
      : service_(MockupOptions{a.mockup, {}, true, true, false}),
        latency_(std::chrono::microseconds(static_cast<long long>(a.latency_ms * 1000))) {
    HttpServerOptions so;
    so.listen.assign(a.ports, "127.0.0.1:0");
    so.max_connections = 4 * a.concurrency + 64;
    so.threads = 1;  // per listener
    server_ = std::make_unique<HttpServer>(so, [this](const HttpRequest& r) { return handle(r); });
  }
  const std::vector<std::uint16_t>& ports() const { return server_->ports(); }

 private:
  HttpResponse handle(const HttpRequest& r) {
    if (r.header("host").rfind("hung", 0) == 0) {
      HttpResponse never{503, "text/plain", {}, "ending\n"};
      never.delay = std::chrono::hours(1);  // until the server stops
      return never;
    }
    HttpResponse answer = service_.handle(r);
    answer.delay = latency_;  // a BMC takes its time; the poller must not wait in line
    return answer;
  }
  MockupService service_;
  std::chrono::microseconds latency_;
  std::unique_ptr<HttpServer> server_;
};

// The BMCs in a child process: started before the parent has any thread, ended when the parent
// closes the pipe. cpu_seconds() reads its CPU time so far.
class BmcProcess {
 public:
  explicit BmcProcess(const Args& a) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) fail("pipe");
    pid_ = fork();
    if (pid_ < 0) fail("fork");
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);  // or the child would never see the parent's end of the pipe
      serve(a, up[1], down[0]);
    }
    ::close(up[1]);
    ::close(down[0]);
    control_ = down[1];
    std::uint16_t port = 0;
    for (std::size_t i = 0; i < a.ports; ++i) {
      if (::read(up[0], &port, sizeof port) != sizeof port) fail("the BMC process did not start");
      ports_.push_back(port);
    }
    ::close(up[0]);
  }
  ~BmcProcess() {
    ::close(control_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  std::string url(std::size_t i, bool hung) const {
    return "http://" + std::string(hung ? "hung" : "bmc") + std::to_string(i) + ".localhost:" +
           std::to_string(ports_[i % ports_.size()]);
  }
  double cpu_seconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto after = text.rfind(')');  // the command name may hold spaces
    if (after == std::string::npos) return 0;
    std::istringstream fields(text.substr(after + 2));
    std::string skip;
    for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt: fields 3 to 13
    double utime = 0, stime = 0;
    fields >> utime >> stime;
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "bench_facility_poll: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
  }
  [[noreturn]] static void serve(const Args& a, int up, int down) {
    try {
      VirtualBmcs bmcs(a);
      for (std::uint16_t port : bmcs.ports())
        if (::write(up, &port, sizeof port) != sizeof port) _exit(1);
      ::close(up);
      char byte;
      while (::read(down, &byte, 1) > 0) {
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "simulated BMCs: %s\n", e.what());
      _exit(1);
    }
    _exit(0);
  }
  pid_t pid_ = -1;
  int control_ = -1;
  std::vector<std::uint16_t> ports_;
};

struct PollResult {
  double seconds = 0, cpu = 0, bmc_cpu = 0;  // cpu: the poller's process; bmc_cpu: the BMCs'
  long rss_mib = 0;
  std::size_t ok = 0, failed = 0, requests = 0, samples = 0;
  std::string first_error;
};

// The same BMCs read with at most `levels` of $expand (1: each collection's members, as before).
std::vector<RedfishEndpoint> with_levels(std::vector<RedfishEndpoint> endpoints, int levels) {
  for (auto& e : endpoints) e.expand_levels = levels;
  return endpoints;
}

PollResult poll(const std::vector<RedfishEndpoint>& endpoints, PollEngine engine, const Args& a, const BmcProcess& bmcs) {
  PollOptions o;
  o.concurrency = a.concurrency;
  o.engine = engine;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_ms));
  o.retries = a.hung ? 0 : o.retries;  // a hung BMC costs one timeout per request, not three
  auto t0 = Steady::now();
  double c0 = cpu_seconds(), b0 = bmcs.cpu_seconds();
  Snapshot s = poll_redfish(endpoints, o);
  PollResult r;
  r.seconds = seconds_since(t0);
  r.cpu = cpu_seconds() - c0;
  r.bmc_cpu = bmcs.cpu_seconds() - b0;
  r.rss_mib = max_rss_mib();
  for (const auto& src : s.sources) {
    r.ok += src.ok && !src.partial;
    r.failed += !src.ok;
    if (!src.ok && r.first_error.empty()) r.first_error = src.error;
    r.requests += src.requests;
  }
  r.samples = s.samples.size();
  return r;
}

// The transport alone: `total` GETs of the service root spread over the BMCs, `concurrency` at a
// time, through one libcurl multi handle (keep-alive per host).
PollResult bare_gets(const std::vector<RedfishEndpoint>& endpoints, std::size_t total, std::size_t concurrency) {
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(concurrency));
  std::vector<CURL*> idle;
  std::vector<std::string> urls(endpoints.size());
  for (std::size_t i = 0; i < endpoints.size(); ++i) urls[i] = endpoints[i].url + "/redfish/v1";
  std::size_t started = 0, done = 0, ok = 0;
  auto t0 = Steady::now();
  double c0 = cpu_seconds();
  auto start_one = [&](CURL* c) {
    curl_easy_setopt(c, CURLOPT_URL, urls[(started * endpoints.size() / std::max<std::size_t>(1, total)) % urls.size()].c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_DNS_CACHE_TIMEOUT, -1L);  // no prune walk over every BMC's entry per lookup
    curl_multi_add_handle(multi, c);
    ++started;
  };
  for (std::size_t i = 0; i < std::min(total, concurrency); ++i) start_one(curl_easy_init());
  while (done < total) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      ok += m->data.result == CURLE_OK;
      ++done;
      CURL* c = m->easy_handle;
      curl_multi_remove_handle(multi, c);
      if (started < total) start_one(c);
      else idle.push_back(c);
    }
    curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  }
  PollResult r;
  r.seconds = seconds_since(t0);
  r.cpu = cpu_seconds() - c0;
  r.requests = total;
  r.ok = ok;
  for (CURL* c : idle) curl_easy_cleanup(c);
  curl_multi_cleanup(multi);
  return r;
}

void scrape_report(const std::vector<RedfishEndpoint>& endpoints, const Args& args);

std::string fmt_scaled(double seconds, std::size_t count) {
  char text[96];
  std::snprintf(text, sizeof text, " (%zu endpoints took %.3f s, scaled linearly)", count, seconds);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;  // a connection per BMC in flight, on both sides
  setrlimit(RLIMIT_NOFILE, &rl);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  BmcProcess bmcs(args);  // before any thread exists here
  curl_global_init(CURL_GLOBAL_DEFAULT);

  std::vector<RedfishEndpoint> endpoints;
  for (std::size_t i = 0; i < args.endpoints; ++i) {
    RedfishEndpoint e;
    bool hung = i < args.hung;
    e.url = bmcs.url(i, hung);
    e.name = (hung ? "hung" : "bmc") + std::to_string(i);
    e.expand_levels = args.levels;
    endpoints.push_back(std::move(e));
  }
  std::printf("facility poll: %zu simulated BMCs on loopback in a child process (%zu listeners, %s, %.1f ms per request%s), concurrency %zu\n",
              args.endpoints, args.ports, args.mockup.substr(args.mockup.find_last_of('/') + 1).c_str(), args.latency_ms,
              args.hung ? (", " + std::to_string(args.hung) + " hung").c_str() : "", args.concurrency);
  std::size_t hung = std::min(args.hung, endpoints.size());
  std::size_t healthy = endpoints.size() - hung;
  std::vector<RedfishEndpoint> live(endpoints.begin() + static_cast<long>(hung), endpoints.end());
  poll(std::vector<RedfishEndpoint>(live.begin(), live.begin() + static_cast<long>(std::min<std::size_t>(8, healthy))),
       PollEngine::event_loop, args, bmcs);  // warm-up: the mockup's expanded collections are cached

  PollResult loop = poll(endpoints, PollEngine::event_loop, args, bmcs);
  double n = static_cast<double>(endpoints.size());
  double target = args.endpoints > 1000 ? 10.0 : 2.0;
  std::printf("  event-loop poll               %7.3f s  %zu/%zu endpoints complete, %zu requests (%.0f/s), %zu samples; "
              "poller %.2f s CPU (%.3f ms per BMC), simulated BMCs %.2f s CPU, poller max RSS %ld MiB  [target <= %.0f s: %s]\n",
              loop.seconds, loop.ok, endpoints.size(), loop.requests, loop.requests / loop.seconds, loop.samples, loop.cpu,
              1000 * loop.cpu / n, loop.bmc_cpu, loop.rss_mib, target, loop.seconds <= target && loop.ok == healthy ? "met" : "MISSED");
  if (args.hung)
    std::printf("  hung BMCs: %zu of %zu reported failed (\"%s\"), every other BMC complete: %s\n", loop.failed, args.hung,
                loop.first_error.c_str(), loop.ok == healthy ? "yes" : "NO");

  // Baselines on the last --baseline BMCs, scaled to all of them per BMC: the event loop asking
  // for one level of $expand (a request per resource below the collections, as before), and the
  // poller before issue 15 (a thread per endpoint, one level).
  std::size_t n_base = std::min(args.baseline, healthy);
  if (n_base > 0) {
    std::vector<RedfishEndpoint> subset = with_levels({endpoints.end() - static_cast<long>(n_base), endpoints.end()}, 1);
    double scale = n / static_cast<double>(n_base);
    auto report = [&](const char* label, const PollResult& base) {
      std::printf("  %-29s %7.3f s  %zu/%zu endpoints complete, %zu requests; poller %.2f s CPU (%.3f ms per BMC), simulated BMCs %.2f s CPU%s\n",
                  label, base.seconds * scale, base.ok, n_base, base.requests, base.cpu, 1000 * base.cpu / static_cast<double>(n_base),
                  base.bmc_cpu, n_base < endpoints.size() ? fmt_scaled(base.seconds, n_base).c_str() : "");
      std::printf("    ratio to the event-loop poll: poller CPU per BMC %.2fx, wall %.2fx (above 1: the event-loop poll is cheaper)\n",
                  (base.cpu / static_cast<double>(n_base)) / std::max(1e-9, loop.cpu / n), base.seconds * scale / loop.seconds);
    };
    report("event loop, $levels=1", poll(subset, PollEngine::event_loop, args, bmcs));
    report("thread pool, $levels=1", poll(subset, PollEngine::threads, args, bmcs));
  }
  PollResult bare = args.bare ? bare_gets(live, loop.requests, args.concurrency) : PollResult{};
  if (args.bare)
    std::printf("  bare HTTP GETs (curl multi)   %7.3f s  %zu/%zu answered, poller %.2f s CPU: the reader costs %.1fx the transport's CPU\n",
              bare.seconds, bare.ok, bare.requests, bare.cpu, loop.cpu / std::max(1e-9, bare.cpu));
  scrape_report(live, args);
  return 0;
}

namespace {

// The exporter over the same BMCs: one poll, then scrapes over HTTP.
void scrape_report(const std::vector<RedfishEndpoint>& endpoints, const Args& args) {
  if (args.scrapes == 0) return;  // --scrapes 0: the poll alone (at 12,500 BMCs a scrape is ~300 MB)
  FacilityConfig cfg;
  cfg.redfish = endpoints;
  cfg.poll.concurrency = args.concurrency;
  Exporter exporter(cfg);
  auto t0 = Steady::now();
  exporter.poll_once();
  double poll_s = seconds_since(t0);
  HttpServerOptions so;
  so.threads = 2;
  HttpServer metrics(so, [&](const HttpRequest& r) { return exporter.handle(r); });
  std::string url = metrics.url() + "/metrics";
  CURL* c = curl_easy_init();
  std::vector<double> times, cpu_times;
  std::string body;
  for (std::size_t i = 0; i < args.scrapes; ++i) {
    body.clear();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    auto s0 = Steady::now();
    double c0 = cpu_seconds();
    CURLcode rc = curl_easy_perform(c);
    times.push_back(seconds_since(s0));
    cpu_times.push_back(cpu_seconds() - c0);
    if (rc != CURLE_OK) {
      std::fprintf(stderr, "scrape failed: %s\n", curl_easy_strerror(rc));
      std::exit(1);
    }
  }
  curl_easy_cleanup(c);
  if (times.empty()) return;
  std::sort(times.begin(), times.end());
  std::sort(cpu_times.begin(), cpu_times.end());
  std::size_t series = 0;
  for (std::size_t at = 0; at < body.size(); at = body.find('\n', at) + 1) {
    if (body[at] != '#') ++series;
    if (body.find('\n', at) == std::string::npos) break;
  }
  double median = times[times.size() / 2], worst = times.back();
  std::printf("scrape: %zu series, %.1f MB per scrape; GET /metrics median %.1f ms (%.1f ms CPU), max %.1f ms over %zu scrapes  [target <= 50 ms: %s]\n",
              series, body.size() / 1e6, median * 1000, cpu_times[cpu_times.size() / 2] * 1000, worst * 1000, times.size(),
              median <= 0.05 ? "met" : "MISSED");
  std::printf("  poll-on-scrape baseline   %7.3f s  (a scrape that polls every BMC first)\n", poll_s + median);
  std::printf("  ratio: serving from the last poll is %.0fx faster than polling on scrape\n", (poll_s + median) / median);
}

}  // namespace
