#pragma once
// The site's stores as sources of `astral monitor diagnose|events|timeline`: journal files,
// a central syslog tree, Prometheus; their flags and how they join a bundle.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "astral/monitor/bundle.hpp"

namespace astral::cli {

struct MonitorSourceFlags {
  std::string journal, syslog_dir, syslog_template;
  std::string from, to, around, window = "30m";
  uint64_t max_lines = 20'000'000;
  std::string prometheus, prometheus_token_file;
  double prometheus_timeout_s = 8;
  bool insecure_tls = false;
};

// What became of each source, for stderr and the JSON report.
struct MonitorSourceNote {
  std::string source;
  std::string status;  // ok, skipped, note
  std::string detail;
};

void add_source_flags(CLI::App* cmd, MonitorSourceFlags& f);
bool has_log_sources(const MonitorSourceFlags& f);
// Adds the journal and syslog sources; UsageError for a bad flag (naming it).
void apply_source_flags(monitor::BundleOptions& o, const MonitorSourceFlags& f);
// Metrics (Prometheus, exposition files in the bundle) compared around the incident onset.
std::vector<MonitorSourceNote> add_source_metrics(monitor::Bundle& b, const MonitorSourceFlags& f);

}  // namespace astral::cli
