#pragma once
// Prometheus text exposition (format 0.0.4) following Prometheus naming: one `astral_facility_`
// prefix, base units in names (watts, joules, celsius, pascals, volts, amperes, ratio; liters per
// minute as the one documented exception), `_total` for counters after the unit. Every sample
// carries {host, source, kind, entity, name} so the measurement boundary is always visible.
// docs/facility.md lists every family.
#include <cstdint>
#include <map>
#include <string>

#include "astral/facility/derived.hpp"
#include "astral/facility/sample.hpp"

namespace astral::facility {

// Running totals a long-lived exporter keeps across polls.
struct ExporterCounters {
  std::uint64_t polls = 0;
  std::uint64_t scrapes = 0;
  double last_poll_seconds = 0;
  double last_poll_timestamp = 0;  // Unix seconds
  double last_scrape_seconds = 0;
  std::map<std::string, std::uint64_t> quirks;           // by quirk name
  std::map<std::string, std::uint64_t> source_requests;  // by source name
  std::map<std::string, std::uint64_t> source_failures;  // polls in which a source failed
  std::optional<double> pue_last_interval;  // PUE from energy over the last poll interval
  std::uint64_t pushed_alarms = 0;          // new alarms that arrived from event streams
  struct Stream {
    std::string source, mode;
    bool connected = false;
    std::uint64_t connects = 0, failures = 0, events = 0, duplicates = 0, rejected = 0;
  };
  std::vector<Stream> event_streams;        // filled by the caller that runs the subscriber
};

// "astral_facility_<quantity>_<unit>[_total]".
std::string metric_name(const Sample& sample);
// Escapes a label value (backslash, double quote, newline).
std::string escape_label_value(const std::string& value);

std::string render_prometheus(const Snapshot& snapshot, const Derived* derived = nullptr,
                              const ExporterCounters* counters = nullptr);
// The two halves of the above: the readings (rendered once per poll by the exporter; `with_quirks`
// adds the snapshot's quirk counts) and the exporter's running counters (rendered per scrape).
std::string render_prometheus_readings(const Snapshot& snapshot, const Derived* derived, bool with_quirks);
std::string render_prometheus_counters(const ExporterCounters& counters);

}  // namespace astral::facility
