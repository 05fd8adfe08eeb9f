#pragma once
// What a facility alarm says about the plant, and what a throttling record says about a GPU:
// the vocabulary candidates_facility.cpp joins across layers.
#include <string_view>

#include "astral/monitor/event.hpp"

namespace astral::monitor {

enum class PlantFault { none, cooling, power, leak };
struct PlantAlarm {
  PlantFault fault = PlantFault::none;
  double weight = 0;  // how strongly the alarm alone says the plant failed
};

// Plant equipment's alarms (layer facility, or placed in the site layout); cleared alarms and
// server-side BMC alarms are not plant faults.
PlantAlarm plant_alarm(const Event& e);
std::string_view plant_fault_id(PlantFault);    // cooling_loss, power_capping, leak
std::string_view plant_fault_name(PlantFault);  // "cooling loss", ...
PlantFault plant_fault_kind(std::string_view fault_id);

// Why a GPU's (or CPU's) clocks were held down, by the record's specific bit: NVML alarms
// (gpu_thermal_throttling, power_brake, power_capping, gpu_hw_slowdown), nvidia-smi dumps
// (gpu_clock_event), dcgm clock-event bits (metric_change of gpu_clock_events) and the kernel's
// thermal interrupts.
enum class ThrottleCause { none, thermal, power, hardware };
ThrottleCause throttle_cause(const Event& e);
// A cooling loss explains thermal throttling, a power fault power capping; HW slowdown without
// its specific bit is either.
bool throttle_explained_by(ThrottleCause cause, PlantFault fault);
std::string_view throttle_why(ThrottleCause);
// The host lost power or shut down (kernel power-down, BMC power-off, a thermal shutdown).
bool is_host_down(const Event& e);

}  // namespace astral::monitor
