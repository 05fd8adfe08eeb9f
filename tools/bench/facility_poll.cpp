// Facility benchmark: poll N simulated BMCs on loopback with bounded concurrency, against a
// sequential baseline in the same run; then serve a Prometheus scrape of everything they report,
// against the poll-on-scrape baseline many exporters use. Targets (issue 8): 500 BMCs in <= 2 s,
// a scrape in <= 50 ms.
//
//   bench_facility_poll [--endpoints 500] [--concurrency 64] [--latency-ms 1] [--baseline 100]
//                       [--mockup DIR] [--scrapes 20]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

std::size_t on_body(char* d, std::size_t s, std::size_t n, void* u) {
  static_cast<std::string*>(u)->append(d, s * n);
  return s * n;
}

struct Args {
  std::size_t endpoints = 500, concurrency = 64, baseline = 100, scrapes = 20;
  double latency_ms = 1;
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
    else if (k == "--mockup") a.mockup = v;
    else if (k == "--scrapes") a.scrapes = std::stoul(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct PollResult {
  double seconds = 0, cpu = 0;
  std::size_t ok = 0, requests = 0, samples = 0;
};

PollResult poll(const std::vector<RedfishEndpoint>& endpoints, std::size_t concurrency) {
  PollOptions o;
  o.concurrency = concurrency;
  o.timeout = std::chrono::milliseconds(5000);
  auto t0 = Steady::now();
  double c0 = cpu_seconds();
  Snapshot s = poll_redfish(endpoints, o);
  PollResult r;
  r.seconds = seconds_since(t0);
  r.cpu = cpu_seconds() - c0;
  for (const auto& src : s.sources) {
    r.ok += src.ok && !src.partial;
    r.requests += src.requests;
  }
  r.samples = s.samples.size();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;  // one listening socket per simulated BMC
  setrlimit(RLIMIT_NOFILE, &rl);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  MockupService service(MockupOptions{args.mockup, {}, true, true, false});
  auto latency = std::chrono::microseconds(static_cast<long long>(args.latency_ms * 1000));
  HttpServerOptions so;
  so.listen.assign(args.endpoints, "127.0.0.1:0");
  so.max_connections = 4 * args.concurrency + 16;
  HttpServer bmcs(so, [&](const HttpRequest& r) {
    std::this_thread::sleep_for(latency);  // a BMC takes its time; the poller must not wait in line
    return service.handle(r);
  });
  std::vector<RedfishEndpoint> endpoints;
  for (std::size_t i = 0; i < args.endpoints; ++i) {
    RedfishEndpoint e;
    e.url = bmcs.url(i);
    e.name = "bmc" + std::to_string(i);
    endpoints.push_back(std::move(e));
  }
  std::printf("facility poll: %zu simulated BMCs on loopback (%s, %.1f ms per request), concurrency %zu\n",
              args.endpoints, args.mockup.substr(args.mockup.find_last_of('/') + 1).c_str(), args.latency_ms, args.concurrency);

  poll(std::vector<RedfishEndpoint>(endpoints.begin(), endpoints.begin() + std::min<std::size_t>(8, endpoints.size())),
       args.concurrency);  // warm-up
  PollResult bounded = poll(endpoints, args.concurrency);
  std::size_t n_base = std::min(args.baseline, endpoints.size());
  PollResult seq = poll(std::vector<RedfishEndpoint>(endpoints.begin(), endpoints.begin() + n_base), 1);
  double seq_all = seq.seconds * static_cast<double>(endpoints.size()) / static_cast<double>(n_base);
  std::printf("  bounded-concurrency poll  %7.3f s  %zu/%zu endpoints complete, %zu requests (%.0f/s), %zu samples, %.2f s CPU  [target <= 2 s: %s]\n",
              bounded.seconds, bounded.ok, endpoints.size(), bounded.requests, bounded.requests / bounded.seconds,
              bounded.samples, bounded.cpu, bounded.seconds <= 2.0 && bounded.ok == endpoints.size() ? "met" : "MISSED");
  std::printf("  sequential baseline       %7.3f s  (%zu endpoints took %.3f s%s)\n", seq_all, n_base, seq.seconds,
              n_base < endpoints.size() ? ", scaled linearly" : "");
  std::printf("  ratio: bounded concurrency is %.1fx faster than sequential polling\n", seq_all / bounded.seconds);

  // The exporter over the same BMCs: one poll, then scrapes over HTTP.
  FacilityConfig cfg;
  cfg.redfish = endpoints;
  cfg.poll.concurrency = args.concurrency;
  Exporter exporter(cfg);
  auto t0 = Steady::now();
  exporter.poll_once();
  double poll_s = seconds_since(t0);
  HttpServer metrics(HttpServerOptions{}, [&](const HttpRequest& r) { return exporter.handle(r); });
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
      return 1;
    }
  }
  curl_easy_cleanup(c);
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
  return 0;
}
