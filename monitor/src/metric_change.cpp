// Before and after: a baseline window before the onset against the window around and after
// it, per series, by the rule of its metric; a significant change becomes a `metric_change`
// event about the component the series' labels name.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "astral/common/checked.hpp"
#include "astral/monitor/metrics.hpp"
#include "metric_rules.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

// A bit-mask metric's sample as its bits; a value that is no mask (negative, fractional beyond
// rounding, 2^64 or more: a damaged or hostile sample) has none. std::llround is unspecified there.
uint64_t mask_of(double v) { return checked_round<uint64_t>(v).value_or(0); }

struct Change {
  int64_t at_us = 0;
  double before = 0, after = 0;
  const char* verb = "rose";
};

// Counter increments per minute between samples (a reset counts from zero).
std::vector<MetricSample> per_minute(const std::vector<MetricSample>& s) {
  std::vector<MetricSample> out;
  for (size_t i = 1; i < s.size(); ++i) {
    const std::optional<int64_t> gap = checked_sub(s[i].time_us, s[i - 1].time_us);  // damaged times
    if (!gap || *gap <= 0) continue;
    const int64_t dt = *gap;
    double d = s[i].value - s[i - 1].value;
    if (d < 0) d = s[i].value;
    out.push_back({s[i].time_us, d * 60e6 / double(dt)});
  }
  return out;
}

double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::optional<Change> detect(const MetricRule& rule, const std::vector<MetricSample>& values, const MetricWindow& w) {
  const int64_t split = w.onset_us - w.lead_us;
  std::vector<double> base;
  std::vector<MetricSample> after;
  for (const MetricSample& s : values) {
    if (s.time_us >= w.start_us() && s.time_us < split) base.push_back(s.value);
    else if (s.time_us >= split && s.time_us <= w.end_us()) after.push_back(s);
  }
  if (after.empty()) return std::nullopt;
  Change c;
  switch (rule.rule) {
    case ChangeRule::rise: {
      double mean = 0;
      for (double v : base) mean += v / double(base.size());
      const double threshold = std::max(rule.floor, 3 * mean + rule.floor / 2);
      for (const MetricSample& s : after)
        if (s.value > threshold) {
          c.at_us = s.time_us;
          c.before = mean;
          for (const MetricSample& a : after) c.after = std::max(c.after, a.value);
          return c;
        }
      return std::nullopt;
    }
    case ChangeRule::level: {
      if (base.empty()) return std::nullopt;
      const double b = median_of(base);
      for (const MetricSample& s : after) {
        const double d = s.value - b;
        if ((rule.direction > 0 && d <= 0) || (rule.direction < 0 && d >= 0)) continue;
        if (std::abs(d) < rule.abs_delta || std::abs(d) < rule.rel_delta * std::max(std::abs(b), 1e-9)) continue;
        c.at_us = s.time_us;
        c.before = b;
        c.after = s.value;
        for (const MetricSample& a : after) c.after = d > 0 ? std::max(c.after, a.value) : std::min(c.after, a.value);
        c.verb = d > 0 ? "rose" : "fell";
        return c;
      }
      return std::nullopt;
    }
    case ChangeRule::bits: {
      uint64_t before_bits = 0, after_bits = 0;
      for (double v : base) before_bits |= mask_of(v);
      for (const MetricSample& s : after) after_bits |= mask_of(s.value);
      const uint64_t fresh = after_bits & ~before_bits & ~rule.ignore_bits;
      if (!fresh) return std::nullopt;
      for (const MetricSample& s : after)
        if (mask_of(s.value) & fresh) {
          c.at_us = s.time_us;
          break;
        }
      c.before = double(before_bits);
      c.after = double(after_bits);
      c.verb = "gained";
      return c;
    }
    case ChangeRule::nonzero: {
      const double last = base.empty() ? 0 : base.back();
      for (const MetricSample& s : after)
        if (s.value != 0 && s.value != last) {
          c.at_us = s.time_us;
          c.before = last;
          c.after = s.value;
          c.verb = "became";
          return c;
        }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// 0, 17, 3.5, 1.2e4: short enough for a sentence, exact where it matters.
std::string format_value(double v) {
  char buf[32];
  if (std::abs(v) >= 1e4) {
    int exp = int(std::floor(std::log10(std::abs(v))));
    std::snprintf(buf, sizeof buf, "%.2ge%d", v / std::pow(10.0, exp), exp);
  } else if (v == std::round(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

std::string format_bits(double v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(mask_of(v)));
  return buf;
}

std::string label(const std::map<std::string, std::string>& labels, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto it = labels.find(k); it != labels.end() && !it->second.empty()) return it->second;
  return {};
}

// The machine a series is about: the exporter's host label, else its scrape target.
std::string host_of(const MetricSeries& s, const Bundle& b) {
  std::string h = label(s.labels, {"Hostname", "hostname", "host", "node", "nodename"});
  if (h.empty()) {
    h = label(s.labels, {"instance"});
    if (h.starts_with("[")) h = h.substr(1, h.find(']') - 1);  // [v6]:port
    else if (std::count(h.begin(), h.end(), ':') == 1) h = h.substr(0, h.find(':'));
  }
  return h.empty() ? h : b.canonical_host(h);
}

struct Subject {
  Component component;
  Layer layer = Layer::kernel;
  std::string name;  // for the sentence
};

Subject subject_of(const MetricRule& rule, const MetricSeries& s, const std::string& host, const Bundle& b) {
  Subject out;
  Component& c = out.component;
  const std::string device = label(s.labels, {"device", "interface", "ifname"});
  const bool on_switch = b.fabric.has_switch(host) ||
                         std::find(b.switches.begin(), b.switches.end(), host) != b.switches.end();
  if (rule.exporter == "astral-facility") {
    c.kind = parse_component_kind(label(s.labels, {"kind"})).value_or(ComponentKind::host);
    c.host = host;
    c.device = label(s.labels, {"entity", "name"});
    out.layer = Layer::facility;
    out.name = (c.device.empty() ? "" : c.device + " on ") + (host.empty() ? label(s.labels, {"rack"}) : host);
  } else if (rule.component == ComponentKind::gpu) {
    c.kind = ComponentKind::gpu;
    c.host = host;
    std::string bus = label(s.labels, {"pci_bus_id", "PCI_BUS_ID"});
    if (bus.size() > 13 && bus[8] == ':') bus = bus.substr(4);  // NVML's 8-digit domain
    std::string pci = names::canonical_pci(bus);
    c.device = pci.empty() ? "GPU" + label(s.labels, {"gpu"}) : pci;
    out.name = "GPU " + (pci.empty() ? label(s.labels, {"gpu"}) : pci) + " on " + host;
  } else if (on_switch) {
    c.kind = ComponentKind::switch_port;
    c.switch_name = host;
    c.port = device;
    out.layer = Layer::switch_;
    out.name = host + " " + device;
  } else {
    c.kind = ComponentKind::nic;
    c.host = host;
    c.device = device;
    c.port = label(s.labels, {"port"});
    out.name = device + (c.port.empty() ? "" : " port " + c.port) + " on " + host;
  }
  return out;
}

std::string onset_phrase(int64_t offset_us) {
  const double s = double(offset_us) / 1e6;
  if (std::abs(s) < 1) return "at onset";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f s %s onset", std::abs(s), s < 0 ? "before" : "after");
  return buf;
}

}  // namespace

std::vector<Event> metric_changes(const std::vector<MetricSeries>& series, const MetricWindow& w, const Bundle& b,
                                  const std::string& source) {
  std::vector<Event> out;
  if (w.onset_us == kUnknownTime) return out;
  const bool knows_machines = !b.hosts.empty() || !b.switches.empty() || !b.fabric.empty();
  for (const MetricSeries& s : series) {
    const MetricRule* rule = rule_for_metric(s.metric);
    if (!rule) continue;  // unknown metrics are ignored
    const std::string host = host_of(s, b);
    const bool known = std::find(b.hosts.begin(), b.hosts.end(), host) != b.hosts.end() ||
                       std::find(b.switches.begin(), b.switches.end(), host) != b.switches.end() ||
                       b.fabric.has_host(host) || b.fabric.has_switch(host);
    if (knows_machines && !known) continue;
    const std::vector<MetricSample> values = rule->rule == ChangeRule::rise ? per_minute(s.samples) : s.samples;
    const std::optional<Change> change = detect(*rule, values, w);
    if (!change) continue;
    const Subject subject = subject_of(*rule, s, host, b);
    const bool bits = rule->rule == ChangeRule::bits;
    const std::string before = bits ? format_bits(change->before) : format_value(change->before);
    const std::string after = bits ? format_bits(change->after) : format_value(change->after);
    const std::string unit = bits ? "" : std::string(rule->unit);
    Event& e = out.emplace_back();
    e.time_us = change->at_us;
    e.time_confidence_s = double(w.step_us) / 2e6;
    e.host = subject.component.kind == ComponentKind::switch_port ? subject.component.switch_name : host;
    e.layer = subject.layer;
    e.component = subject.component;
    e.severity = rule->severity;
    e.kind = "metric_change";
    const std::string from_to = rule->rule == ChangeRule::nonzero ? after : "from " + before + " to " + after + unit;
    e.message = std::string(rule->what) + " on " + subject.name + " " + change->verb + " " + from_to + " " +
                onset_phrase(change->at_us - w.onset_us);
    e.set_attr("metric", s.metric);
    e.set_attr("rule", std::string(rule->name));
    e.set_attr("before", before);
    e.set_attr("after", after);
    e.set_attr("unit", unit);
    e.set_attr("onset_offset_s", std::to_string(std::llround(double(change->at_us - w.onset_us) / 1e6)));
    e.set_attr("change", change->verb);
    e.set_attr("source", source);
  }
  std::sort(out.begin(), out.end(), [](const Event& x, const Event& y) { return x.time_us < y.time_us; });
  return out;
}

void add_metric_events(Bundle& b, std::vector<Event> events, const std::string& source, size_t series) {
  FileStats f;
  f.path = source;
  f.kind = FileKind::text_log;
  f.lines = series;
  f.recognised = series;
  f.events = events.size();
  f.notes.push_back(std::to_string(series) + " series compared before and after the onset");
  const uint32_t index = uint32_t(b.files.size());
  b.files.push_back(std::move(f));
  for (Event& e : events) {
    e.file = index;
    b.events.push_back(std::move(e));
  }
  std::stable_sort(b.events.begin(), b.events.end(), [](const Event& x, const Event& y) {
    if (x.has_time() != y.has_time()) return x.has_time();
    return x.time_us < y.time_us;
  });
}

}  // namespace astral::monitor
