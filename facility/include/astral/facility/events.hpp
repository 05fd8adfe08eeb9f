#pragma once
// Alarms as the monitor's normalised events (docs/event-model.md), one JSON object per line, so a
// cooling or power fault shows up in a job's diagnosis. Files are named *.events.jsonl.
#include <nlohmann/json.hpp>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "astral/facility/sample.hpp"

namespace astral::facility {

// The event-model layer an alarm belongs to: "facility" for plant equipment (CDUs, pumps, PDUs,
// power shelves, racks), "bmc" for a server's BMC (Redfish chassis, IPMI), "kernel" for
// hwmon/powercap, "astral" for NVML readings and derived alarms.
std::string event_layer(const Alarm& alarm);
// The event-model component kind: psu, rectifier, pdu, cdu, pump, rack, gpu, or host.
std::string event_component_kind(EntityKind kind, const std::string& layer);

nlohmann::json alarm_to_event(const Alarm& alarm);
// One line each, '\n'-terminated.
void write_events(std::ostream& out, const std::vector<Alarm>& alarms);

// Edge detection for a long-running poller: which alarms appeared since the last poll and which
// cleared (a cleared alarm is reported once, with severity info and kind "<type>_cleared").
class AlarmTracker {
 public:
  std::vector<Alarm> update(const std::vector<Alarm>& current, Clock::time_point now = Clock::now());

 private:
  std::map<std::string, Alarm> active_;  // host|entity|type -> alarm
};

}  // namespace astral::facility
