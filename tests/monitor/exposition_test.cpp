// Prometheus exposition files in a bundle (saved scrapes of node_exporter): read per host, dated
// by their timestamps or the time in the file name, compared around the onset.
#include <algorithm>

#include <catch2/catch.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/metrics.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("Exposition files in a bundle: periodic scrapes of a host become a metric change") {
  TempDir dir;
  const int64_t onset = *parse_rfc3339("2025-11-29T22:41:00Z");
  // One scrape every 30 s, the time in the file name (as `curl ... > metrics-$(date +%s).prom`).
  for (int i = 0; i < 40; ++i) {
    const int64_t t = onset / 1000000 - 900 + i * 30;
    const double errors = t < onset / 1000000 - 40 ? 5 : 5 + double(t - (onset / 1000000 - 40)) * 100;
    dir.write("node01/metrics-" + std::to_string(t) + ".prom",
              "# HELP node_infiniband_symbol_error_total Symbol errors\n"
              "# TYPE node_infiniband_symbol_error_total counter\n"
              "node_infiniband_symbol_error_total{device=\"mlx5_1\",port=\"1\"} " + std::to_string(errors) + "\n"
              "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 12345\n");
  }
  dir.write("node01/kern.log", "2025-11-29T22:41:00+00:00 node01 kernel: mlx5_core 0000:17:00.0 ens1f1np1: Link down\n");
  BundleOptions o;
  o.jobs = 1;
  Bundle b = load_bundle(dir.path(), o);
  const auto series = bundle_exposition_series(b);
  REQUIRE(series.size() == 1);  // the CPU counter is not a metric the monitor knows
  CHECK(series[0].samples.size() == 40);
  CHECK(series[0].labels.at("host") == "node01");
  MetricSourceOptions mo;
  const MetricReport report = add_metrics(b, mo, [&] { return onset; });
  CHECK(report.changes == 1);
  const auto it = std::find_if(b.events.begin(), b.events.end(), [](const Event& e) { return e.kind == "metric_change"; });
  REQUIRE(it != b.events.end());
  CHECK(it->component.host == "node01");
  CHECK(it->component.device == "mlx5_1");
  CHECK_THAT(it->message, Catch::Contains("symbol errors on mlx5_1 port 1 on node01 rose from 0 to"));
  // Without an onset nothing is compared, and the report says so.
  Bundle again = load_bundle(dir.path(), o);
  const MetricReport none = add_metrics(again, mo, [] { return kUnknownTime; });
  CHECK(none.changes == 0);
  REQUIRE(none.lines.size() == 1);
  CHECK_THAT(none.lines[0], Catch::Contains("--around"));
}
