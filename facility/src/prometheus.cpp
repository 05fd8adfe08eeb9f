#include "astral/facility/prometheus.hpp"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

constexpr const char* kPrefix = "astral_facility_";

std::string sanitize(const std::string& s) {
  std::string out = s;
  for (auto& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  return out;
}

const char* help_for(const std::string& quantity) {
  static const std::unordered_map<std::string, const char*> kHelp = {
      {"power", "Real power at the entity's measurement point (source and kind name the boundary)."},
      {"input_power", "Power into a PSU or rectifier."},
      {"output_power", "Power out of a PSU or rectifier."},
      {"energy", "Energy counter; resets and wraps are the reader's to handle, rate() gives power."},
      {"health", "Redfish health: 0 OK, 1 Warning, 2 Critical."},
      {"leak_state", "Leak detector state: 0 OK, 1 Warning, 2 Critical (leak)."},
      {"coolant_flow", "Coolant flow (liters per minute: the documented exception to base units)."},
      {"heat_removed", "Heat a liquid loop reports removing."},
      {"coolant_supply_temperature", "Coolant supply temperature."},
      {"coolant_return_temperature", "Coolant return temperature."},
      {"clock_event_reasons", "NVML clock-event (throttle) reason bitmask."},
      {"power_limit", "Power limit (cap) in force."},
      {"power_capacity", "Rated power capacity."},
  };
  auto it = kHelp.find(quantity);
  return it == kHelp.end() ? nullptr : it->second;
}

class Writer {
 public:
  void add(const std::string& name, const char* type, const std::string& help, const std::string& labels,
           double value) {
    if (!std::isfinite(value) && !std::isinf(value)) return;  // NaN: no value, no series
    auto& f = families_[name];
    if (f.type.empty()) {
      f.type = type;
      f.help = help;
    }
    if (!f.series.insert(labels).second) {
      ++duplicates_;
      return;
    }
    if (labels.empty()) fmt::format_to(std::back_inserter(f.body), "{} ", name);
    else fmt::format_to(std::back_inserter(f.body), "{}{{{}}} ", name, labels);
    if (std::isinf(value)) f.body += value > 0 ? "+Inf" : "-Inf";
    else fmt::format_to(std::back_inserter(f.body), "{}", value);
    f.body += '\n';
  }
  std::size_t duplicates() const { return duplicates_; }
  std::string str() const {
    std::string out;
    for (const auto& [name, f] : families_) {
      fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
      out += f.body;
    }
    return out;
  }

 private:
  struct Family {
    std::string type, help, body;
    std::unordered_set<std::string> series;
  };
  std::map<std::string, Family> families_;
  std::size_t duplicates_ = 0;
};

std::string labels(std::initializer_list<std::pair<const char*, std::string>> kv) {
  std::string out;
  for (const auto& [k, v] : kv) {
    if (!out.empty()) out += ',';
    fmt::format_to(std::back_inserter(out), "{}=\"{}\"", k, escape_label_value(v));
  }
  return out;
}

}  // namespace

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string metric_name(const Sample& s) {
  std::string name = kPrefix + sanitize(s.quantity);
  std::string unit = unit_suffix(s.unit);
  if (!unit.empty() && !ends_with(name, "_" + unit)) name += "_" + unit;
  if (s.counter) name += "_total";
  return name;
}

std::string render_prometheus_readings(const Snapshot& snap, const Derived* derived, bool with_quirks) {
  Writer w;
  std::string p = kPrefix;
  for (const auto& s : snap.samples) {
    const char* help = help_for(s.quantity);
    std::string l = labels({{"host", s.host}, {"source", s.source}, {"kind", to_string(s.kind)}, {"entity", s.entity}, {"name", s.name}});
    w.add(metric_name(s), s.counter ? "counter" : "gauge",
          help ? help : fmt::format("Facility reading: {} ({}).", s.quantity, s.unit == Unit::none ? "no unit" : unit_suffix(s.unit)),
          l, s.value);
    // The limits a reading came with, as series of their own so that rules can compare the two
    // ("<quantity>_upper_critical_<unit>" with the same labels as the reading).
    if (s.counter || s.limits.empty()) continue;
    const std::pair<const char*, const std::optional<double>*> limits[] = {
        {"upper_caution", &s.limits.upper_caution}, {"upper_critical", &s.limits.upper_critical},
        {"upper_fatal", &s.limits.upper_fatal},     {"lower_caution", &s.limits.lower_caution},
        {"lower_critical", &s.limits.lower_critical}};
    for (const auto& [level, value] : limits) {
      if (!*value) continue;
      Sample limit = s;
      limit.quantity = s.quantity + "_" + level;
      w.add(metric_name(limit), "gauge", fmt::format("The {} limit the source reports for {}.", level, s.quantity), l, **value);
    }
  }
  for (const auto& a : snap.alarms)
    w.add(p + "alarm", "gauge", "An active alarm (1); the event stream has the details.",
          labels({{"host", a.host}, {"kind", to_string(a.kind)}, {"entity", a.entity}, {"type", a.type}, {"severity", to_string(a.severity)}}), 1);
  std::map<std::string, double> findings;
  for (const auto& f : snap.findings) findings[f.check] += 1;
  for (const auto& [check, n] : findings)
    w.add(p + "findings", "gauge", "Warnings from the last poll (physics cross-checks, lenient parsing, failed resources).",
          labels({{"check", check}}), n);
  for (const auto& src : snap.sources) {
    w.add(p + "source_up", "gauge", "Whether the source answered at the last poll (1) or not (0).",
          labels({{"source", src.name}, {"reader", src.reader}}), src.ok ? 1 : 0);
    w.add(p + "source_partial", "gauge", "Whether some of the source's resources failed at the last poll.",
          labels({{"source", src.name}, {"reader", src.reader}}), src.partial ? 1 : 0);
    w.add(p + "source_poll_duration_seconds", "gauge", "How long the last poll of the source took.",
          labels({{"source", src.name}, {"reader", src.reader}}), src.seconds);
  }
  if (derived) {
    for (const auto& r : derived->racks) {
      auto l = labels({{"rack", r.name}});
      w.add(p + "rack_power_watts", "gauge", "Rack IT power (meters by configuration or source priority).", l, r.it_power_w);
      if (r.budget_w) w.add(p + "rack_power_budget_watts", "gauge", "Rack power budget.", l, *r.budget_w);
      if (r.budget_ratio) w.add(p + "rack_power_budget_ratio", "gauge", "Rack IT power over its budget.", l, *r.budget_ratio);
      if (r.headroom_w) w.add(p + "rack_power_headroom_watts", "gauge", "Rack budget minus rack IT power.", l, *r.headroom_w);
      if (r.facility_power_w) w.add(p + "rack_facility_power_watts", "gauge", "Non-IT power attributed to the rack.", l, *r.facility_power_w);
      if (r.pue_instantaneous)
        w.add(p + "pue_instantaneous_ratio", "gauge", "Interim PUE indicator from power (not the energy PUE).", l, *r.pue_instantaneous);
      if (r.heat_removed_w) w.add(p + "rack_heat_removed_watts", "gauge", "Heat the rack's liquid loops remove.", l, *r.heat_removed_w);
      if (r.capture_ratio) w.add(p + "liquid_heat_capture_ratio", "gauge", "Liquid heat removed over rack IT power.", l, *r.capture_ratio);
    }
    for (const auto& c : derived->conversions) {
      auto l = labels({{"host", c.host}, {"entity", c.entity}});
      w.add(p + "conversion_loss_watts", "gauge", "Input minus output power of a conversion stage.", l, c.loss_w());
      w.add(p + "conversion_efficiency_ratio", "gauge", "Output over input power of a conversion stage.", l, c.efficiency());
    }
    for (const auto& c : derived->cooling) {
      if (!c.heat_computed_w) continue;
      w.add(p + "heat_removed_computed_watts", "gauge", "Heat a loop carries by flow × density × c_p × ΔT.",
            labels({{"host", c.host}, {"entity", c.entity}}), *c.heat_computed_w);
    }
    for (const auto& c : derived->cdus) {
      if (c.headroom_w)
        w.add(p + "cooling_headroom_watts", "gauge", "CDU cooling capacity minus the heat its rack-side loops carry.",
              labels({{"host", c.host}, {"entity", c.entity}}), *c.headroom_w);
    }
    for (const auto& h : derived->headroom)
      w.add(p + "thermal_headroom_celsius", "gauge", "Temperature limit (critical, else caution) minus the reading.",
            labels({{"host", h.host}, {"entity", h.entity}, {"quantity", h.quantity}}), h.headroom());
    if (derived->chains) {
      for (const auto* c : {&derived->chains->ac, &derived->chains->hvdc}) {
        auto l = labels({{"chain", c->name}});
        w.add(p + "chain_input_power_watts", "gauge", "Grid power a conversion chain (configured stage efficiencies) needs for the IT load.", l, c->input_w);
        w.add(p + "chain_efficiency_ratio", "gauge", "End-to-end efficiency of a configured conversion chain.", l, c->efficiency);
      }
    }
  }
  if (with_quirks) {
    for (const auto& [q, n] : snap.quirks)
      w.add(p + "quirks_total", "counter", "Tolerated deviations from the schema, by kind.", labels({{"quirk", q}}), static_cast<double>(n));
  }
  std::string out = w.str();
  if (w.duplicates())
    out += fmt::format("# {} duplicate series dropped (the same entity reported twice by one source)\n", w.duplicates());
  return out;
}

std::string render_prometheus_counters(const ExporterCounters& counters) {
  Writer w;
  std::string p = kPrefix;
  w.add(p + "polls_total", "counter", "Polls completed.", "", static_cast<double>(counters.polls));
  w.add(p + "scrapes_total", "counter", "Scrapes served.", "", static_cast<double>(counters.scrapes));
  w.add(p + "last_poll_duration_seconds", "gauge", "How long the last poll of every source took.", "", counters.last_poll_seconds);
  w.add(p + "last_poll_timestamp_seconds", "gauge", "When the last poll finished (Unix time).", "", counters.last_poll_timestamp);
  w.add(p + "last_scrape_duration_seconds", "gauge", "How long rendering the previous scrape took.", "", counters.last_scrape_seconds);
  for (const auto& [q, n] : counters.quirks)
    w.add(p + "quirks_total", "counter", "Tolerated deviations from the schema, by kind.", labels({{"quirk", q}}), static_cast<double>(n));
  for (const auto& [s, n] : counters.source_requests)
    w.add(p + "source_requests_total", "counter", "HTTP requests made to the source.", labels({{"source", s}}), static_cast<double>(n));
  for (const auto& [s, n] : counters.source_failures)
    w.add(p + "source_failures_total", "counter", "Polls in which the source failed.", labels({{"source", s}}), static_cast<double>(n));
  w.add(p + "pushed_alarms_total", "counter", "New alarms that arrived from Redfish event streams or pushes.", "",
        static_cast<double>(counters.pushed_alarms));
  for (const auto& st : counters.event_streams) {
    std::string l = labels({{"source", st.source}, {"mode", st.mode}});
    w.add(p + "event_stream_up", "gauge", "1 while the Redfish event stream of the source is open.", l, st.connected ? 1 : 0);
    w.add(p + "event_stream_connects_total", "counter", "Event stream connection attempts.", l, static_cast<double>(st.connects));
    w.add(p + "event_stream_failures_total", "counter", "Event streams that broke or were refused.", l, static_cast<double>(st.failures));
    w.add(p + "event_stream_events_total", "counter", "Events received on the stream.", l, static_cast<double>(st.events));
    w.add(p + "event_stream_duplicates_total", "counter", "Events dropped as duplicates (same event id).", l,
          static_cast<double>(st.duplicates));
    w.add(p + "event_stream_rejected_total", "counter", "Event records rejected (no id, bad timestamp, not JSON).", l,
          static_cast<double>(st.rejected));
  }
  if (counters.pue_last_interval)
    w.add(p + "pue_ratio", "gauge", "PUE from configured energy meters over the last poll interval.", "", *counters.pue_last_interval);
  return w.str();
}

std::string render_prometheus(const Snapshot& snap, const Derived* derived, const ExporterCounters* counters) {
  std::string out = render_prometheus_readings(snap, derived, counters == nullptr);
  if (counters) out += render_prometheus_counters(*counters);
  return out;
}

}  // namespace astral::facility
