#include "astral/facility/exporter.hpp"

#include <fstream>

#include <fmt/format.h>

namespace astral::facility {

Exporter::Exporter(FacilityConfig config, ExporterOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      rapl_(config_.rapl_root.value_or("/")),
      state_(std::make_shared<State>()) {}

Exporter::~Exporter() { stop(); }

void Exporter::start() {
  if (options_.event_streams && !config_.redfish.empty()) {
    subscriber_ = std::make_unique<EventSubscriber>(config_.redfish, options_.stream_options,
                                                    [this](std::vector<Alarm> alarms) { ingest(std::move(alarms)); });
    subscriber_->start();
  }
  poller_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(poll_mu_);
    while (!stopping_) {
      lock.unlock();
      try {
        poll_once();
      } catch (const std::exception& e) {  // never let a poll end the exporter
        std::lock_guard<std::mutex> g(mu_);
        last_error_ = fmt::format("poll failed: {}", e.what());
      }
      lock.lock();
      wake_.wait_for(lock, config_.interval, [this] { return stopping_; });
    }
  });
}

void Exporter::stop() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (subscriber_) subscriber_->stop();
}

void Exporter::poll_once() {
  auto t0 = std::chrono::steady_clock::now();
  auto state = std::make_shared<State>();
  state->snapshot = poll_sources(config_, &rapl_);
  state->derived = derive(state->snapshot, config_.derive);
  std::optional<double> pue;
  bool have_pue_meters = !config_.derive.pue_it.empty();
  if (have_pue_meters && previous_) pue = pue_between(*previous_, state->snapshot, config_.derive).pue;
  if (have_pue_meters) previous_ = state->snapshot;
  std::vector<Alarm> changes;
  {
    std::lock_guard<std::mutex> lock(tracker_mu_);
    changes = tracker_.update(state->snapshot.alarms);
    for (auto& a : tracker_.held()) state->snapshot.add_alarm(std::move(a));  // pushed, not yet polled
  }
  // Readings change once per poll; rendering them here keeps a scrape to a copy.
  state->readings = render_prometheus_readings(state->snapshot, &state->derived, false);
  record_events(changes);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.polls;
  counters_.last_poll_seconds = took;
  counters_.last_poll_timestamp = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  for (const auto& [q, n] : state->snapshot.quirks) counters_.quirks[q] += n;
  for (const auto& s : state->snapshot.sources) {
    counters_.source_requests[s.name] += s.requests;
    if (!s.ok) ++counters_.source_failures[s.name];
    else counters_.source_failures.emplace(s.name, 0);
  }
  if (pue) counters_.pue_last_interval = pue;
  state_ = std::move(state);
}

void Exporter::ingest(std::vector<Alarm> alarms) {
  std::vector<Alarm> fresh;
  {
    std::lock_guard<std::mutex> lock(tracker_mu_);
    for (auto& a : alarms)
      if (tracker_.raise(a)) fresh.push_back(std::move(a));
  }
  if (fresh.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto state = std::make_shared<State>(*state_);
    for (const auto& a : fresh) state->snapshot.add_alarm(a);
    state->readings = render_prometheus_readings(state->snapshot, &state->derived, false);
    counters_.pushed_alarms += fresh.size();
    state_ = std::move(state);
  }
  record_events(fresh);
}

void Exporter::record_events(const std::vector<Alarm>& alarms) {
  if (alarms.empty() || options_.events_path.empty()) return;
  std::ofstream out(options_.events_path, std::ios::app);
  if (out) write_events(out, alarms, &config_.site);
  if (!out) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = fmt::format("cannot append to {}: alarms are still served at /metrics", options_.events_path);
  }
}

std::string Exporter::scrape() {
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const State> state;
  ExporterCounters counters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = state_;
    ++counters_.scrapes;
  }
  counters = this->counters();
  std::string text = state->readings + render_prometheus_counters(counters);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  counters_.last_scrape_seconds = took;
  return text;
}

HttpResponse Exporter::handle(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD")
    return HttpResponse{405, "text/plain", {{"Allow", "GET, HEAD"}}, "only GET\n"};
  if (request.path == "/healthz") {
    bool polled = counters().polls > 0;
    return HttpResponse{polled ? 200 : 503, "text/plain", {}, polled ? "ok\n" : "no poll has finished yet\n"};
  }
  if (options_.scrape_credentials && !basic_auth_matches(request, *options_.scrape_credentials))
    return HttpResponse{401, "text/plain", {{"WWW-Authenticate", "Basic realm=\"astral facility\""}}, "authentication required\n"};
  if (request.path == "/metrics")
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, scrape()};
  if (request.path == "/")
    return HttpResponse{200, "text/html; charset=utf-8", {},
                        "<html><head><title>astral facility</title></head><body><h1>astral facility</h1>"
                        "<p><a href=\"/metrics\">/metrics</a> &middot; <a href=\"/healthz\">/healthz</a></p></body></html>\n"};
  return HttpResponse{404, "text/plain", {}, "not found: try /metrics\n"};
}

ExporterCounters Exporter::counters() const {
  ExporterCounters c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = counters_;
  }
  if (subscriber_)
    for (const auto& st : subscriber_->status())
      c.event_streams.push_back({st.source, st.mode, st.connected, st.connects, st.failures, st.events, st.duplicates, st.rejected});
  return c;
}

std::string Exporter::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace astral::facility
