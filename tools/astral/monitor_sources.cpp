#include "monitor_sources.hpp"

#include <cstdio>
#include <filesystem>

#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/metrics.hpp"
#include "astral/monitor/paths.hpp"
#include "astral/monitor/sources.hpp"
#include "command.hpp"

namespace astral::cli {

using namespace astral::monitor;

void add_source_flags(CLI::App* cmd, MonitorSourceFlags& f) {
  cmd->add_option("--journal", f.journal, "Journal files of a systemd-journal-remote collector (folder or file)");
  cmd->add_option("--syslog-dir", f.syslog_dir, "Central syslog tree (rsyslog: HOST/*.log, HOST-DATE.log)");
  cmd->add_option("--syslog-template", f.syslog_template,
                  "Path layout of the syslog tree as in rsyslog.conf, e.g. %HOSTNAME%/%$YEAR%-%$MONTH%-%$DAY%.log");
  cmd->add_option("--from", f.from, "Read the sources from this time (RFC 3339 or Unix seconds)");
  cmd->add_option("--to", f.to, "Read the sources up to this time");
  cmd->add_option("--around", f.around, "Incident time: read the sources within --window of it");
  cmd->add_option("--window", f.window, "Width of the window around --around (default 30m: 15m each side)");
  cmd->add_option("--max-lines", f.max_lines, "Read at most this many journal entries / syslog lines per source");
  cmd->add_option("--prometheus", f.prometheus, "Prometheus URL: hardware counters before and after the onset");
  cmd->add_option("--prometheus-token-file", f.prometheus_token_file, "File with a bearer token for Prometheus");
  cmd->add_option("--prometheus-timeout", f.prometheus_timeout_s, "Seconds per Prometheus request (default 8)");
  cmd->add_flag("--insecure", f.insecure_tls, "Do not verify Prometheus's TLS certificate");
}

bool has_log_sources(const MonitorSourceFlags& f) { return !f.journal.empty() || !f.syslog_dir.empty(); }

namespace {

int64_t source_time_flag(const std::string& name, const std::string& value) {
  auto t = parse_time_arg(value);
  if (!t) throw UsageError(name + " " + value + ": not a time (use 2025-11-29T22:42:00Z or Unix seconds)");
  return *t;
}

TimeWindow source_window_of(const MonitorSourceFlags& f) {
  TimeWindow w;
  if (!f.around.empty()) {
    if (!f.from.empty() || !f.to.empty()) throw UsageError("--around: give either --around/--window or --from/--to");
    const int64_t at = source_time_flag("--around", f.around);
    auto width = parse_duration_us(f.window);
    if (!width || *width <= 0) throw UsageError("--window " + f.window + ": not a duration (use 90s, 30m, 2h)");
    w.from_us = at - *width / 2;
    w.to_us = at + *width / 2;
    return w;
  }
  if (!f.from.empty()) w.from_us = source_time_flag("--from", f.from);
  if (!f.to.empty()) w.to_us = source_time_flag("--to", f.to);
  if (w.from_us != kUnknownTime && w.to_us != kUnknownTime && w.to_us < w.from_us)
    throw UsageError("--to " + f.to + ": before --from " + f.from);
  return w;
}

}  // namespace

void apply_source_flags(BundleOptions& o, const MonitorSourceFlags& f) {
  const TimeWindow window = source_window_of(f);
  if (!f.journal.empty()) {
    if (!std::filesystem::exists(f.journal)) throw UsageError("--journal " + f.journal + ": no such folder or file");
    JournalSourceOptions j;
    j.dir = f.journal;
    j.window = window;
    j.max_entries = f.max_lines;
    j.jobs = o.jobs;
    o.sources.push_back(journal_source(j));
  }
  if (!f.syslog_dir.empty()) {
    if (!std::filesystem::is_directory(f.syslog_dir)) throw UsageError("--syslog-dir " + f.syslog_dir + ": no such folder");
    SyslogSourceOptions s;
    s.dir = f.syslog_dir;
    s.path_template = f.syslog_template;
    s.window = window;
    s.max_lines = f.max_lines;
    s.jobs = o.jobs;
    o.sources.push_back(syslog_source(s));
  } else if (!f.syslog_template.empty()) {
    throw UsageError("--syslog-template: needs --syslog-dir");
  }
}

std::vector<MonitorSourceNote> add_source_metrics(Bundle& b, const MonitorSourceFlags& f) {
  MetricSourceOptions o;
  o.prometheus.url = f.prometheus;
  o.prometheus.bearer_token_file = f.prometheus_token_file;
  o.prometheus.timeout = std::chrono::milliseconds(int64_t(std::max(0.1, f.prometheus_timeout_s) * 1000));
  o.prometheus.verify_tls = !f.insecure_tls;
  // The onset: the incident a first reading of the logs finds (on a copy: diagnosis aligns the
  // clocks in place), else the time the operator gave.
  auto onset = [&]() -> int64_t {
    Bundle probe = b;
    const Diagnosis d = diagnose(probe);
    if (d.incident.present && d.incident.onset_us != kUnknownTime) return d.incident.onset_us;
    return f.around.empty() ? kUnknownTime : source_time_flag("--around", f.around);
  };
  const MetricReport report = add_metrics(b, o, onset);
  if (const size_t slow = add_connection_evidence(b))
    std::fprintf(stderr, "astral monitor: %zu links carried most of the slow transfers of the trace files\n", slow);
  std::vector<MonitorSourceNote> notes;
  for (const std::string& line : report.lines) {
    const bool failed = report.prometheus_skipped && line.rfind("prometheus ", 0) == 0 &&
                        line.find("source skipped") != std::string::npos;
    notes.push_back({failed ? "prometheus" : "metrics", failed ? "skipped" : "note", line});
    std::fprintf(stderr, "astral monitor: %s\n", line.c_str());
  }
  if (!f.prometheus.empty() && !report.prometheus_skipped)
    notes.push_back({"prometheus", "ok", redacted_url(f.prometheus)});
  if (report.series)
    std::fprintf(stderr, "astral monitor: %zu metric series compared, %zu changes\n", report.series, report.changes);
  return notes;
}

}  // namespace astral::cli
