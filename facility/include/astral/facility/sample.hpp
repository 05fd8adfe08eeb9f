#pragma once
// The normalised facility model: every reader (Redfish, hwmon, RAPL, IPMI, NVML) turns what it
// reads into Samples (one number, one unit, one entity), Alarms (things an operator must act on)
// and Findings (lenient-parsing and physics warnings). Units are base units so that the
// Prometheus names follow from the sample (docs/facility.md lists every quantity).
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace astral::facility {

using Clock = std::chrono::system_clock;

// What a reading is attached to.
enum class EntityKind {
  rack, pdu, outlet, circuit, power_shelf, psu, rectifier, bus, switchgear, cdu, pump, reservoir,
  filter, coolant_connector, leak_detector, fan, chassis, node, cpu, gpu, sensor
};
const char* to_string(EntityKind kind);

// Base units (Prometheus naming): liters per minute is the one documented exception, because
// every CDU, datasheet and operator speaks L/min.
enum class Unit {
  none, watts, joules, celsius, pascals, liters_per_minute, volts, amperes, hertz, ratio, rpm,
  volt_amperes, kilograms_per_cubic_meter, joules_per_kilogram_kelvin, cubic_meters_per_second,
  seconds
};
// The metric-name suffix for a unit ("watts", "celsius", ...); empty for Unit::none.
const char* unit_suffix(Unit unit);
// The short symbol for human output ("W", "°C", "L/min", ...).
const char* unit_symbol(Unit unit);

// Limits that came with a reading (Redfish Sensor.Thresholds, Thermal UpperThreshold*, hwmon
// temp*_max/_crit). Absent limits stay empty; a null limit from a BMC is counted as a quirk.
struct Thresholds {
  std::optional<double> upper_caution, upper_critical, upper_fatal;
  std::optional<double> lower_caution, lower_critical;
  bool empty() const {
    return !upper_caution && !upper_critical && !upper_fatal && !lower_caution && !lower_critical;
  }
};

struct Sample {
  Clock::time_point time;
  std::string source;    // reader and boundary: "redfish", "hwmon", "rapl", "ipmi", "nvml"
  std::string host;      // the BMC, PDU, CDU or node the reading came from
  EntityKind kind = EntityKind::sensor;
  std::string entity;    // stable id: Redfish path below /redfish/v1, sysfs zone, GPU UUID
  std::string name;      // human name when the source gives one ("CDU Pump 2")
  std::string quantity;  // snake_case: "input_power", "coolant_flow", "temperature", "health"
  Unit unit = Unit::none;
  double value = 0;
  bool counter = false;  // accumulates (energy): exported as *_total, deltas need wrap handling
  Thresholds limits;
  std::string origin;    // provenance: Redfish URI or sysfs file the number came from
};

enum class Severity { info, warning, error, critical };
const char* to_string(Severity severity);

// Something an operator must act on; becomes a monitor event (events.hpp).
struct Alarm {
  Clock::time_point time;
  std::string host;
  EntityKind kind = EntityKind::sensor;
  std::string entity;
  Severity severity = Severity::warning;
  std::string type;     // leak_detected, pump_failed, coolant_over_temperature, psu_fault, ...
  std::string message;  // one line for a human
  std::string origin;   // Redfish URI, sysfs file, "nvml:<index>", ipmitool command
  std::string source;   // reader: "redfish", "hwmon", "ipmi", "nvml", "astral" (derived)
};

// A warning that is not an alarm: a physically inconsistent payload, a link that points at the
// wrong resource, a resource that could not be read. Never a failure on its own.
struct Finding {
  std::string host;
  std::string entity;
  std::string check;    // "efficiency_above_one", "heat_balance", "http", "malformed_json", ...
  std::string message;
};

// How one source (one BMC, the local hwmon tree, ...) went.
struct SourceStatus {
  std::string name;
  std::string reader;   // "redfish", "hwmon", "rapl", "ipmi", "nvml"
  bool ok = false;
  bool partial = false; // some resources failed or the crawl hit its deadline
  std::string error;    // one line when !ok
  double seconds = 0;
  std::uint64_t requests = 0;
};

struct Snapshot {
  std::vector<Sample> samples;
  std::vector<Alarm> alarms;
  std::vector<Finding> findings;
  std::map<std::string, std::uint64_t> quirks;  // tolerated deviations, by name
  std::vector<SourceStatus> sources;

  void merge(Snapshot&& other);
  // The same for many results at once (a site poll's 12,500 BMCs): storage is reserved once and
  // alarms are deduplicated through a hash index, where merging one by one scans every alarm so far.
  static Snapshot merged(std::vector<Snapshot>&& parts);
  void count_quirk(const std::string& name, std::uint64_t n = 1) { quirks[name] += n; }
  // Adds an alarm unless one of the same type for the same host and entity is already there
  // (a pump failure is reported by the pump, its CDU's conditions and its health; once is enough).
  void add_alarm(Alarm alarm);
  // The first sample matching host (empty = any), entity and quantity, or nullptr.
  const Sample* find(const std::string& host, const std::string& entity,
                     const std::string& quantity) const;
};

// Health as a number for samples and metrics: 0 OK, 1 Warning, 2 Critical.
inline constexpr double kHealthOk = 0, kHealthWarning = 1, kHealthCritical = 2;

// RFC 3339 UTC with microseconds and 'Z' ("2026-11-29T22:42:00.123456Z").
std::string format_time(Clock::time_point t);

}  // namespace astral::facility
