#pragma once
// Alarms as the monitor's normalised events (docs/event-model.md), one JSON object per line, so a
// cooling or power fault shows up in a job's diagnosis. Files are named *.events.jsonl.
#include <nlohmann/json.hpp>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "astral/facility/sample.hpp"
#include "astral/facility/site.hpp"

namespace astral::facility {

// The event-model layer an alarm belongs to: "facility" for plant equipment (CDUs, pumps, PDUs,
// power shelves, racks), "bmc" for a server's BMC (Redfish chassis, IPMI), "kernel" for
// hwmon/powercap, "astral" for NVML readings and derived alarms.
std::string event_layer(const Alarm& alarm);
// The event-model component kind: psu, rectifier, pdu, power_shelf, cdu, pump, rack, gpu, or host.
std::string event_component_kind(EntityKind kind, const std::string& layer);

// With a site layout, the event also says where the alarm sits, in the layout's ids, so the
// monitor can join it to the hosts it affects:
//   component.site   the site component (or rack) that reported it ("cdu-1")
//   keys.site_kind   its kind (cdu, cooling_loop, power_shelf, pdu, feed, switchgear, rack)
//   keys.racks       racks that depend on it (directly or through fed_by), or the host's rack
//   keys.hosts       the hosts in those racks
nlohmann::json alarm_to_event(const Alarm& alarm, const SiteLayout* site = nullptr);
// One line each, '\n'-terminated.
void write_events(std::ostream& out, const std::vector<Alarm>& alarms, const SiteLayout* site = nullptr);

// Edge detection for a long-running poller: which alarms appeared since the last poll and which
// cleared (a cleared alarm is reported once, with severity info and kind "<type>_cleared").
class AlarmTracker {
 public:
  std::vector<Alarm> update(const std::vector<Alarm>& current, Clock::time_point now = Clock::now());
  // A pushed alarm: true when it is new (or its severity changed), so it is written once. It
  // stays active until a poll no longer reports it (kept for `hold` polls, so that a poll taken
  // before the service noticed does not clear it at once).
  bool raise(const Alarm& alarm);
  // Pushed alarms still held (not yet confirmed or cleared by a poll).
  std::vector<Alarm> held() const;

 private:
  std::map<std::string, Alarm> active_;  // host|entity|type -> alarm
  std::map<std::string, int> pushed_;    // pushed alarms: polls left before a poll may clear them
};

}  // namespace astral::facility
