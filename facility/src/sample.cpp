#include "astral/facility/sample.hpp"

#include <ctime>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>

namespace astral::facility {

const char* to_string(EntityKind kind) {
  switch (kind) {
    case EntityKind::rack: return "rack";
    case EntityKind::pdu: return "pdu";
    case EntityKind::outlet: return "outlet";
    case EntityKind::circuit: return "circuit";
    case EntityKind::power_shelf: return "power_shelf";
    case EntityKind::psu: return "psu";
    case EntityKind::rectifier: return "rectifier";
    case EntityKind::bus: return "bus";
    case EntityKind::switchgear: return "switchgear";
    case EntityKind::cdu: return "cdu";
    case EntityKind::pump: return "pump";
    case EntityKind::reservoir: return "reservoir";
    case EntityKind::filter: return "filter";
    case EntityKind::coolant_connector: return "coolant_connector";
    case EntityKind::leak_detector: return "leak_detector";
    case EntityKind::fan: return "fan";
    case EntityKind::chassis: return "chassis";
    case EntityKind::node: return "node";
    case EntityKind::cpu: return "cpu";
    case EntityKind::gpu: return "gpu";
    case EntityKind::sensor: return "sensor";
  }
  return "sensor";
}

const char* unit_suffix(Unit unit) {
  switch (unit) {
    case Unit::none: return "";
    case Unit::watts: return "watts";
    case Unit::joules: return "joules";
    case Unit::celsius: return "celsius";
    case Unit::pascals: return "pascals";
    case Unit::liters_per_minute: return "liters_per_minute";
    case Unit::volts: return "volts";
    case Unit::amperes: return "amperes";
    case Unit::hertz: return "hertz";
    case Unit::ratio: return "ratio";
    case Unit::rpm: return "rpm";
    case Unit::volt_amperes: return "volt_amperes";
    case Unit::kilograms_per_cubic_meter: return "kilograms_per_cubic_meter";
    case Unit::joules_per_kilogram_kelvin: return "joules_per_kilogram_kelvin";
    case Unit::cubic_meters_per_second: return "cubic_meters_per_second";
    case Unit::seconds: return "seconds";
  }
  return "";
}

const char* unit_symbol(Unit unit) {
  switch (unit) {
    case Unit::none: return "";
    case Unit::watts: return "W";
    case Unit::joules: return "J";
    case Unit::celsius: return "°C";
    case Unit::pascals: return "Pa";
    case Unit::liters_per_minute: return "L/min";
    case Unit::volts: return "V";
    case Unit::amperes: return "A";
    case Unit::hertz: return "Hz";
    case Unit::ratio: return "";
    case Unit::rpm: return "rpm";
    case Unit::volt_amperes: return "VA";
    case Unit::kilograms_per_cubic_meter: return "kg/m³";
    case Unit::joules_per_kilogram_kelvin: return "J/(kg·K)";
    case Unit::cubic_meters_per_second: return "m³/s";
    case Unit::seconds: return "s";
  }
  return "";
}

const char* to_string(Severity severity) {
  switch (severity) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
    case Severity::critical: return "critical";
  }
  return "warning";
}

void Snapshot::merge(Snapshot&& other) {
  samples.insert(samples.end(), std::make_move_iterator(other.samples.begin()),
                 std::make_move_iterator(other.samples.end()));
  for (auto& alarm : other.alarms) add_alarm(std::move(alarm));
  findings.insert(findings.end(), std::make_move_iterator(other.findings.begin()),
                  std::make_move_iterator(other.findings.end()));
  for (const auto& [name, n] : other.quirks) quirks[name] += n;
  sources.insert(sources.end(), std::make_move_iterator(other.sources.begin()),
                 std::make_move_iterator(other.sources.end()));
}

Snapshot Snapshot::merged(std::vector<Snapshot>&& parts) {
  Snapshot out;
  std::size_t samples = 0, findings = 0, sources = 0;
  for (const auto& p : parts) {
    samples += p.samples.size();
    findings += p.findings.size();
    sources += p.sources.size();
  }
  out.samples.reserve(samples);
  out.findings.reserve(findings);
  out.sources.reserve(sources);
  // add_alarm's rule (one alarm per type, host and entity; the most severe wins; first position).
  std::unordered_map<std::string, std::size_t> alarm_at;
  for (auto& p : parts) {
    for (auto& a : p.alarms) {
      std::string key = fmt::format("{}\n{}\n{}", a.type, a.host, a.entity);
      auto [it, fresh] = alarm_at.emplace(std::move(key), out.alarms.size());
      if (fresh) out.alarms.push_back(std::move(a));
      else if (a.severity > out.alarms[it->second].severity) out.alarms[it->second] = std::move(a);
    }
    std::move(p.samples.begin(), p.samples.end(), std::back_inserter(out.samples));
    std::move(p.findings.begin(), p.findings.end(), std::back_inserter(out.findings));
    std::move(p.sources.begin(), p.sources.end(), std::back_inserter(out.sources));
    for (const auto& [name, n] : p.quirks) out.quirks[name] += n;
    p = Snapshot{};  // frees the part now, not at the end
  }
  return out;
}

void Snapshot::add_alarm(Alarm alarm) {
  for (auto& existing : alarms) {
    if (existing.type == alarm.type && existing.host == alarm.host &&
        existing.entity == alarm.entity) {
      if (alarm.severity > existing.severity) existing = std::move(alarm);
      return;
    }
  }
  alarms.push_back(std::move(alarm));
}

const Sample* Snapshot::find(const std::string& host, const std::string& entity,
                             const std::string& quantity) const {
  for (const auto& s : samples) {
    if ((host.empty() || s.host == host) && s.entity == entity && s.quantity == quantity) return &s;
  }
  return nullptr;
}

std::string format_time(Clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long frac = static_cast<long>(us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

}  // namespace astral::facility
