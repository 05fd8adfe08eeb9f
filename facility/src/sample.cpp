#include "astral/facility/sample.hpp"

#include <ctime>

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
