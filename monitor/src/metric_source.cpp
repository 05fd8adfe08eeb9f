// Metrics as a source of a bundle: fetch (Prometheus), read (exposition files), compare, add.
#include "astral/monitor/metrics.hpp"

namespace astral::monitor {

MetricReport add_metrics(Bundle& b, MetricSourceOptions options, const std::function<int64_t()>& onset) {
  MetricReport report;
  std::vector<MetricSeries> files = options.exposition_files ? bundle_exposition_series(b) : std::vector<MetricSeries>{};
  if (options.prometheus.url.empty() && files.empty()) return report;
  options.window.onset_us = onset ? onset() : kUnknownTime;
  if (options.window.onset_us == kUnknownTime) {
    report.lines.push_back("metrics: no incident onset to compare around (give --around T); metrics not compared");
    return report;
  }
  if (!options.prometheus.url.empty()) {
    MetricFetch fetch = fetch_prometheus(options.prometheus, options.window);
    if (!fetch.ok) {
      report.prometheus_skipped = true;
      report.lines.push_back(fetch.error + "; source skipped");
    } else {
      for (auto& n : fetch.notes) report.lines.push_back(n);
      const std::string source = "prometheus:" + redacted_url(options.prometheus.url);
      std::vector<Event> events = metric_changes(fetch.series, options.window, b, source);
      report.series += fetch.series.size();
      report.changes += events.size();
      add_metric_events(b, std::move(events), source, fetch.series.size());
    }
  }
  if (!files.empty()) {
    const std::string source = "exposition:" + b.root;
    std::vector<Event> events = metric_changes(files, options.window, b, source);
    report.series += files.size();
    report.changes += events.size();
    add_metric_events(b, std::move(events), source, files.size());
  }
  return report;
}

}  // namespace astral::monitor
