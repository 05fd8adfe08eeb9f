#pragma once
// The Prometheus exporter behind `astral facility serve`: polls every source on its own schedule
// (never on a scrape, so a slow BMC cannot stall Prometheus), keeps the latest snapshot and its
// derived figures, renders /metrics from them, and appends alarm changes to an events file.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "astral/facility/config.hpp"
#include "astral/facility/eventservice.hpp"
#include "astral/facility/events.hpp"
#include "astral/facility/http_server.hpp"
#include "astral/facility/prometheus.hpp"

namespace astral::facility {

struct ExporterOptions {
  std::optional<Credentials> scrape_credentials;  // require HTTP Basic auth on every path but /healthz
  std::string events_path;                        // append alarm changes as *.events.jsonl lines
  bool event_streams = false;  // start(): hold each Redfish source's SSE stream open (where offered)
  EventStreamOptions stream_options;
};

class Exporter {
 public:
  explicit Exporter(FacilityConfig config, ExporterOptions options = {});
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  void start();      // polls now, then every config interval, on a background thread
  void stop();       // idempotent
  void poll_once();  // one synchronous poll (what the background thread does)
  // Alarms pushed by a Redfish EventService (SSE or a push subscription): served at /metrics and
  // appended to the events file at once, without waiting for the next poll.
  void ingest(std::vector<Alarm> alarms);

  std::string scrape();
  HttpResponse handle(const HttpRequest& request);
  ExporterCounters counters() const;
  // Problems writing the events file, for the caller to report once.
  std::string last_error() const;

 private:
  struct State {
    Snapshot snapshot;
    Derived derived;
    std::string readings;  // the exposition of the readings, rendered once per poll
  };
  void record_events(const std::vector<Alarm>& alarms);

  FacilityConfig config_;
  ExporterOptions options_;
  RaplMeter rapl_;
  std::mutex tracker_mu_;  // the poller and the event streams both report alarms
  AlarmTracker tracker_;
  mutable std::mutex mu_;
  std::shared_ptr<const State> state_;
  std::optional<Snapshot> previous_;  // for PUE over the last interval
  ExporterCounters counters_;
  std::string last_error_;
  std::mutex poll_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread poller_;
  std::unique_ptr<EventSubscriber> subscriber_;
};

}  // namespace astral::facility
