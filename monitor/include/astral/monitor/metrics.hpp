#pragma once
// Hardware metrics before and after the fault. The counters a site already keeps in Prometheus
// (node_exporter's infiniband, netdev and ethtool collectors, dcgm-exporter, Astral's facility
// exporter), or exposition files in the bundle, are read over the incident window; for each
// component a baseline before the onset is compared with the window around and after it, and a
// significant change becomes an ordinary event of kind `metric_change`:
//   "symbol errors on leaf-r3-02 Ethernet32 rose from 0 to 1.2e4/min 40 s before onset"
// with attrs metric, before, after, unit, onset_offset_s, change and source. Metrics that no
// rule knows are ignored; an exporter with no series at all is reported missing.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/event.hpp"

namespace astral::monitor {

struct MetricSample {
  int64_t time_us = 0;
  double value = 0;
};

// One series as the source gave it (counters as raw counts).
struct MetricSeries {
  std::string metric;  // exported name
  std::map<std::string, std::string> labels;
  std::vector<MetricSample> samples;  // by time
};

struct MetricWindow {
  int64_t onset_us = kUnknownTime;
  int64_t baseline_us = 10LL * 60 * 1000000;  // compared span before onset - lead
  int64_t lead_us = 2LL * 60 * 1000000;       // a fault may show this long before the symptoms
  int64_t after_us = 5LL * 60 * 1000000;
  int64_t step_us = 15LL * 1000000;
  int64_t start_us() const { return onset_us - lead_us - baseline_us; }
  int64_t end_us() const { return onset_us + after_us; }
};

struct PrometheusOptions {
  std::string url;                          // http(s)://host:9090 (a path prefix is kept)
  std::string bearer_token_file;            // sent as Authorization: Bearer (never logged)
  std::chrono::milliseconds timeout{8000};  // per request
  std::chrono::milliseconds connect_timeout{2000};
  bool verify_tls = true;
};

struct MetricFetch {
  bool ok = false;
  std::string error;  // one line naming the URL: unreachable, HTTP 401, HTTP 503, malformed JSON
  std::vector<MetricSeries> series;
  std::vector<std::string> notes;  // exporters with no series ("dcgm-exporter: no series")
  size_t queries = 0;
};

// The URL with any user:password@ replaced by ***@, for messages.
std::string redacted_url(const std::string& url);

// Fills `out` from the body of a /api/v1/query_range reply (resultType matrix); returns "" or one
// line saying what is wrong with it. NaN and infinite samples are skipped.
std::string read_query_range_reply(const std::string& body, std::vector<MetricSeries>& out);

// Range queries over the window for every rule; stops at the first failing request.
MetricFetch fetch_prometheus(const PrometheusOptions&, const MetricWindow&);

// Prometheus text exposition (node_exporter textfile, saved scrapes): samples carry their own
// timestamp (ms) or `default_time_us`. Counters of known rules become rates between samples.
// Unknown metrics and malformed lines are skipped (counted in *bad_lines when given).
std::vector<MetricSeries> parse_exposition(std::string_view text, int64_t default_time_us, const std::string& host,
                                           size_t* bad_lines = nullptr);
// Exposition files of a bundle (*.prom, or files that open with # HELP / # TYPE).
std::vector<MetricSeries> bundle_exposition_series(const Bundle&);

// Significant changes, as events about the components the bundle knows (its hosts, switches and
// fabric); series of other machines are ignored when the bundle knows any.
std::vector<Event> metric_changes(const std::vector<MetricSeries>&, const MetricWindow&, const Bundle&,
                                  const std::string& source);

// Appends the events (with a file entry named `source`) and keeps the bundle sorted by time.
void add_metric_events(Bundle&, std::vector<Event> events, const std::string& source, size_t series);

// Everything above in one step for a loaded bundle: Prometheus (when a URL is given) and the
// bundle's exposition files, compared around the onset, the changes added as events. `onset`
// is asked only when there is something to compare (it may diagnose a copy of the bundle);
// kUnknownTime: nothing is compared, and the report says so.
struct MetricSourceOptions {
  PrometheusOptions prometheus;  // url "" = none
  bool exposition_files = true;
  MetricWindow window;           // onset_us is filled by add_metrics
};
struct MetricReport {
  bool prometheus_skipped = false;
  std::vector<std::string> lines;  // for stderr: failures (one line naming the URL), missing exporters
  size_t series = 0;
  size_t changes = 0;
};
MetricReport add_metrics(Bundle&, MetricSourceOptions options, const std::function<int64_t()>& onset);

}  // namespace astral::monitor
