// Facility benchmark: poll N simulated BMCs over loopback with bounded concurrency, then serve a
// Prometheus scrape of everything they report. Baselines in the same run: sequential polling (the
// reader one BMC at a time, scaled from a subset), the same number of bare HTTP GETs through
// libcurl multi (what the transport alone costs), and polling on scrape. Targets: issue 8, 500
// BMCs in <= 2 s and a scrape in <= 50 ms; issue 15, 12,500 BMCs in <= 10 s.
//
// The BMCs are virtual: a few listeners serve the same DMTF mockup to every host name
// bmc<i>.localhost (libcurl resolves *.localhost to loopback itself), each request after a
// simulated delay; --hung K of them never answer, to show per-request timeouts at work.
//
//   bench_facility_poll [--endpoints 500] [--concurrency 64] [--latency-ms 1] [--baseline 100]
//                       [--ports 4] [--hung 0] [--timeout-ms 5000] [--mockup DIR] [--scrapes 20]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  std::size_t endpoints = 500, concurrency = 64, baseline = 100, scrapes = 20, ports = 4, hung = 0;
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
// answer nothing until the run ends.
class VirtualBmcs {
 public:
  VirtualBmcs(const Args& a)
      : service_(MockupOptions{a.mockup, {}, true, true, false}),
        latency_(std::chrono::microseconds(static_cast<long long>(a.latency_ms * 1000))) {
    HttpServerOptions so;
    so.listen.assign(a.ports, "127.0.0.1:0");
    so.max_connections = 4 * a.concurrency + 64;
    so.threads = 0;  // a thread per connection: the simulated delay blocks, as a slow BMC does
    server_ = std::make_unique<HttpServer>(so, [this](const HttpRequest& r) { return handle(r); });
  }
  ~VirtualBmcs() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending_ = true;
    }
    cv_.notify_all();
    server_->stop();
  }
  std::string url(std::size_t i, bool hung) const {
    const auto& ports = server_->ports();
    return "http://" + std::string(hung ? "hung" : "bmc") + std::to_string(i) + ".localhost:" +
           std::to_string(ports[i % ports.size()]);
  }
  std::size_t requests() const { return service_.requests(); }

 private:
  HttpResponse handle(const HttpRequest& r) {
    if (r.header("host").rfind("hung", 0) == 0) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return ending_; });
      return HttpResponse{503, "text/plain", {}, "ending\n"};
    }
    std::this_thread::sleep_for(latency_);  // a BMC takes its time; the poller must not wait in line
    return service_.handle(r);
  }
  MockupService service_;
  std::chrono::microseconds latency_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool ending_ = false;
  std::unique_ptr<HttpServer> server_;
};

struct PollResult {
  double seconds = 0, cpu = 0;
  std::size_t ok = 0, failed = 0, requests = 0, samples = 0;
  std::string first_error;
};

PollResult poll(const std::vector<RedfishEndpoint>& endpoints, std::size_t concurrency, const Args& a) {
  PollOptions o;
  o.concurrency = concurrency;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_ms));
  o.retries = a.hung ? 0 : o.retries;  // a hung BMC costs one timeout per request, not three
  auto t0 = Steady::now();
  double c0 = cpu_seconds();
  Snapshot s = poll_redfish(endpoints, o);
  PollResult r;
  r.seconds = seconds_since(t0);
  r.cpu = cpu_seconds() - c0;
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

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;  // a connection (and a server thread) per BMC in flight
  setrlimit(RLIMIT_NOFILE, &rl);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  VirtualBmcs bmcs(args);
  std::vector<RedfishEndpoint> endpoints;
  for (std::size_t i = 0; i < args.endpoints; ++i) {
    RedfishEndpoint e;
    bool hung = i < args.hung;
    e.url = bmcs.url(i, hung);
    e.name = (hung ? "hung" : "bmc") + std::to_string(i);
    endpoints.push_back(std::move(e));
  }
  std::printf("facility poll: %zu simulated BMCs on loopback (%zu listeners, %s, %.1f ms per request%s), concurrency %zu\n",
              args.endpoints, args.ports, args.mockup.substr(args.mockup.find_last_of('/') + 1).c_str(), args.latency_ms,
              args.hung ? (", " + std::to_string(args.hung) + " hung").c_str() : "", args.concurrency);

  poll(std::vector<RedfishEndpoint>(endpoints.begin() + std::min(args.hung, endpoints.size()),
                                    endpoints.begin() + std::min(args.hung + 8, endpoints.size())),
       args.concurrency, args);  // warm-up
  PollResult bounded = poll(endpoints, args.concurrency, args);
  std::size_t healthy = endpoints.size() - std::min(args.hung, endpoints.size());
  double target = args.endpoints > 1000 ? 10.0 : 2.0;
  std::printf("  bounded-concurrency poll  %7.3f s  %zu/%zu endpoints complete, %zu requests (%.0f/s), %zu samples, "
              "%.2f s CPU (%.2f ms per BMC), max RSS %ld MiB  [target <= %.0f s: %s]\n",
              bounded.seconds, bounded.ok, endpoints.size(), bounded.requests, bounded.requests / bounded.seconds, bounded.samples,
              bounded.cpu, 1000 * bounded.cpu / static_cast<double>(endpoints.size()), max_rss_mib(), target,
              bounded.seconds <= target && bounded.ok == healthy ? "met" : "MISSED");
  if (args.hung)
    std::printf("  hung BMCs: %zu of %zu reported failed (\"%s\"), every other BMC complete: %s\n", bounded.failed, args.hung,
                bounded.first_error.c_str(), bounded.ok == healthy ? "yes" : "NO");
  std::size_t n_base = std::min(args.baseline, healthy);
  std::vector<RedfishEndpoint> subset(endpoints.end() - static_cast<long>(n_base), endpoints.end());
  PollResult seq = poll(subset, 1, args);
  double seq_all = seq.seconds * static_cast<double>(endpoints.size()) / static_cast<double>(std::max<std::size_t>(1, n_base));
  std::printf("  sequential baseline       %7.3f s  (%zu endpoints took %.3f s%s)\n", seq_all, n_base, seq.seconds,
              n_base < endpoints.size() ? ", scaled linearly" : "");
  std::printf("  ratio: bounded concurrency is %.1fx faster than sequential polling\n", seq_all / bounded.seconds);
  std::vector<RedfishEndpoint> live(endpoints.begin() + static_cast<long>(endpoints.size() - healthy), endpoints.end());
  PollResult bare = bare_gets(live, bounded.requests, args.concurrency);
  std::printf("  bare HTTP GETs (curl multi) %5.3f s  %zu/%zu answered, %.2f s CPU: the reader costs %.1fx the transport's CPU\n",
              bare.seconds, bare.ok, bare.requests, bare.cpu, bounded.cpu / std::max(1e-9, bare.cpu));
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
