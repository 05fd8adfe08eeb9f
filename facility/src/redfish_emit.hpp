#pragma once
// Turns Redfish payload fragments into Samples, Alarms and Findings, leniently: null readings,
// "nan" strings, numbers sent as strings, non-standard enum values and unit spellings are counted
// as quirks and never fail a read (facility-formats.md §1.5).
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "astral/facility/sample.hpp"

namespace astral::facility::detail {

using json = nlohmann::json;

// "/redfish/v1/Chassis/1U/" -> "Chassis/1U"; fragments are kept ("Chassis/1U/Power#/PowerControl/0").
std::string entity_id(std::string_view odata_id);
// The "@odata.id" of j[key], or "" when absent.
std::string link_of(const json& j, std::string_view key);
// The "@odata.id" of j itself, or "".
std::string id_of(const json& j);
// j["Name"] when it is a string, else "".
std::string name_of(const json& j);
// j[key] when j is an object and j[key] a string, else `fallback`. (json::value throws
// type_error when the service sends another type, and a payload must never throw.)
std::string string_of(const json& j, std::string_view key, std::string fallback = {});
// j[key], or a null value when j is not an object or has no such key.
const json& child(const json& j, std::string_view key);
// Entity kind implied by a resource path (for alarms whose origin is another resource).
EntityKind kind_from_path(std::string_view path, EntityKind fallback);
// Environmental/Power registry message name ("PumpFailed", no prefix or version) -> alarm type;
// "" for a message that clears ("LeakDetectedNormal"), "condition" when unknown.
std::string alarm_type_for_message(std::string_view name, EntityKind kind);

// What an emitted reading belongs to.
struct Target {
  EntityKind kind = EntityKind::sensor;
  std::string entity;
  std::string name;
  std::string origin;  // resource URI
};

struct StatusInfo {
  bool absent = false;       // State "Absent": nothing to read, nothing to alarm on
  bool standby = false;      // present but not delivering (Standby* states)
  std::optional<int> health; // 0 OK, 1 Warning, 2 Critical
  std::string state;
};

class Emitter {
 public:
  Emitter(Snapshot& out, std::string host, Clock::time_point now)
      : out_(out), host_(std::move(host)), now_(now) {}

  const std::string& host() const { return host_; }
  Snapshot& snapshot() { return out_; }

  // A lenient number: JSON number, or a numeric string (counted), "nan"/"" (counted, no value),
  // null (counted, no value). `what` names the quirk context in findings.
  std::optional<double> number(const json& v);

  // parent[property] as a SensorExcerpt ({"Reading": x, "DataSourceUri": u}) or a bare number.
  // Returns the index of the emitted sample, or nullopt.
  std::optional<std::size_t> excerpt(const json& parent, std::string_view property,
                                     const Target& t, std::string_view quantity, Unit unit,
                                     double scale = 1, bool counter = false);
  std::size_t emit(const Target& t, std::string_view quantity, Unit unit, double value,
                   bool counter = false, std::string origin = {});

  // Health sample, non-standard states (counted) and Status.Conditions -> alarms.
  StatusInfo status(const json& resource, const Target& t);

  // A Sensor resource: merged into the excerpt that named it by DataSourceUri (thresholds added,
  // a different reading reported as a finding), otherwise emitted on its own.
  void sensor(const json& sensor);

  void alarm(const Target& t, Severity severity, std::string type, std::string message);
  void finding(const std::string& entity, std::string check, std::string message);
  // Whether this host already raised an alarm about the entity (health-based alarms defer to the
  // more specific ones from Status.Conditions).
  bool has_alarm(const std::string& entity) const;

  // After all resources are read: threshold crossings become alarms.
  void threshold_alarms();

 private:
  void condition_alarm(const json& condition, const Target& t);

  Snapshot& out_;
  std::string host_;
  Clock::time_point now_;
  std::unordered_map<std::string, std::size_t> by_data_source_;
  std::unordered_map<std::string, std::size_t> by_key_;  // entity + quantity: one reading each
};

}  // namespace astral::facility::detail
