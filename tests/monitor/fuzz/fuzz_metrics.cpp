// libFuzzer target: the hardware metrics the monitor reads. The bytes are a Prometheus text
// exposition (node_exporter textfile output, a saved scrape) and the body of a Prometheus
// /api/v1/query_range reply; whatever series they give are compared around an onset, as
// `astral monitor diagnose --prometheus` does. Nothing may crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "astral/monitor/metrics.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::monitor;
  const std::string text(reinterpret_cast<const char*>(data), size);
  MetricWindow window;
  window.onset_us = 1764456060LL * 1000000;  // 2025-11-29T22:41:00Z, as in the seeds
  size_t bad_lines = 0;
  std::vector<MetricSeries> series = parse_exposition(text, window.onset_us, "node01", &bad_lines);
  std::vector<MetricSeries> fetched;
  const std::string error = read_query_range_reply(text, fetched);
  if (!error.empty() && error.find('\n') != std::string::npos) __builtin_trap();  // one line
  series.insert(series.end(), fetched.begin(), fetched.end());
  const Bundle bundle{};
  (void)metric_changes(series, window, bundle, "fuzz");
  return 0;
}
