// Prometheus text exposition in a bundle: node_exporter textfile output or scrapes saved
// periodically (curl host:9100/metrics > node03/metrics-1764456120.prom). Samples carry their
// own millisecond timestamp, or the time in the file name, or the file's time.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "astral/common/checked.hpp"
#include "astral/monitor/metrics.hpp"
#include "metric_rules.hpp"

namespace astral::monitor {

namespace {

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (!first && c >= '0' && c <= '9');
}

// name{labels} value [timestamp]; false when the line is not a sample.
bool read_sample(std::string_view line, std::string& name, std::map<std::string, std::string>& labels, double& value,
                 std::optional<int64_t>& time_ms) {
  size_t i = 0;
  while (i < line.size() && is_name_char(line[i], i == 0)) ++i;
  if (i == 0) return false;
  name.assign(line.substr(0, i));
  labels.clear();
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      size_t k = i;
      while (i < line.size() && is_name_char(line[i], i == k)) ++i;
      std::string key(line.substr(k, i - k));
      if (key.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') return false;
      i += 2;
      std::string v;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          v += line[i] == 'n' ? '\n' : line[i];
        } else {
          v += line[i];
        }
      }
      if (i >= line.size()) return false;
      labels[key] = v;
      ++i;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return false;
    ++i;
  }
  std::istringstream rest{std::string(line.substr(i))};
  std::string v, t;
  if (!(rest >> v)) return false;
  char* end = nullptr;
  value = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end) return false;
  time_ms.reset();
  if (rest >> t) {
    long long ms = std::strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() || *end) return false;
    time_ms = ms;
  }
  return true;
}

std::string series_key(const std::string& name, const std::map<std::string, std::string>& labels) {
  std::string k = name;
  for (const auto& [a, v] : labels) k += '\x1f' + a + '=' + v;
  return k;
}

void merge_into(std::map<std::string, MetricSeries>& all, std::vector<MetricSeries> more) {
  for (MetricSeries& s : more) {
    MetricSeries& into = all[series_key(s.metric, s.labels)];
    if (into.metric.empty()) {
      into.metric = s.metric;
      into.labels = s.labels;
    }
    into.samples.insert(into.samples.end(), s.samples.begin(), s.samples.end());
  }
}

int64_t file_time_us(const std::string& path) {
  // A Unix time in the file name (saved periodic scrapes) is when the scrape was taken.
  static const std::regex stamp(R"((1[5-9]\d{8})(?:\.\d+)?)");
  std::smatch m;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if (std::regex_search(name, m, stamp)) return std::stoll(m[1]) * 1000000;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return kUnknownTime;
  return int64_t(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

bool looks_like_exposition(const std::string& path) {
  if (path.ends_with(".prom")) return true;
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  return first.starts_with("# HELP ") || first.starts_with("# TYPE ");
}

}  // namespace

std::vector<MetricSeries> parse_exposition(std::string_view text, int64_t default_time_us, const std::string& host,
                                           size_t* bad_lines) {
  std::map<std::string, MetricSeries> by_key;
  std::string name;
  std::map<std::string, std::string> labels;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    double value = 0;
    std::optional<int64_t> ms;
    if (!read_sample(line, name, labels, value, ms)) {
      if (bad_lines) ++*bad_lines;
      continue;
    }
    if (!rule_for_metric(name) || !std::isfinite(value)) continue;
    // A timestamp beyond int64_t microseconds is no time: the line is bad, not an overflow.
    const std::optional<int64_t> time_us = ms ? checked_mul<int64_t>(*ms, 1000) : default_time_us;
    if (!time_us) {
      if (bad_lines) ++*bad_lines;
      continue;
    }
    const int64_t t = *time_us;
    if (t == kUnknownTime) continue;
    if (!host.empty() && !labels.count("Hostname") && !labels.count("hostname") && !labels.count("host") &&
        !labels.count("instance"))
      labels["host"] = host;
    MetricSeries& s = by_key[series_key(name, labels)];
    if (s.metric.empty()) {
      s.metric = name;
      s.labels = labels;
    }
    s.samples.push_back({t, value});
  }
  std::vector<MetricSeries> out;
  for (auto& [k, s] : by_key) {
    std::stable_sort(s.samples.begin(), s.samples.end(),
                     [](const MetricSample& a, const MetricSample& b) { return a.time_us < b.time_us; });
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<MetricSeries> bundle_exposition_series(const Bundle& b) {
  std::map<std::string, MetricSeries> all;
  for (const FileStats& f : b.files) {
    // Exposition lines are unknown to the log parsers: only files that gave no event qualify.
    if (f.kind != FileKind::text_log || b.root.empty() || (!f.path.ends_with(".prom") && (f.events || !f.unknown)))
      continue;
    const std::string path = f.path == b.root || b.root.ends_with(f.path) ? b.root : b.root + "/" + f.path;
    if (!looks_like_exposition(path)) continue;
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    merge_into(all, parse_exposition(text.str(), file_time_us(path), f.host));
  }
  std::vector<MetricSeries> out;
  for (auto& [k, s] : all) {
    std::stable_sort(s.samples.begin(), s.samples.end(),
                     [](const MetricSample& a, const MetricSample& b) { return a.time_us < b.time_us; });
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace astral::monitor
