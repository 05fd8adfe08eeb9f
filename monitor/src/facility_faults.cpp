#include "facility_faults.hpp"

#include <cstdlib>
#include <string>

#include "candidates_net.hpp"
#include "text.hpp"

namespace astral::monitor {

namespace {

bool ends_with_cleared(std::string_view kind) {
  constexpr std::string_view k = "_cleared";
  return kind.size() >= k.size() && kind.substr(kind.size() - k.size()) == k;
}

// NVML / DCGM clock-event reason bits (facility-formats.md §2.6).
constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40, kHwPowerBrake = 0x80;

ThrottleCause cause_of_bits(uint64_t bits) {
  if (bits & (kHwThermal | kSwThermal)) return ThrottleCause::thermal;
  if (bits & (kHwPowerBrake | kSwPowerCap)) return ThrottleCause::power;
  if (bits & kHwSlowdown) return ThrottleCause::hardware;
  return ThrottleCause::none;
}

}  // namespace

PlantAlarm plant_alarm(const Event& e) {
  if (e.severity < Severity::warning || ends_with_cleared(e.kind)) return {};
  const bool plant = e.layer == Layer::facility || !e.attr("site_kind").empty();
  if (!plant || e.component.kind == ComponentKind::gpu) return {};
  const std::string_view k = e.kind;
  const bool critical = e.severity >= Severity::error;
  if (k == "leak_detected") return {PlantFault::leak, critical ? 0.95 : 0.8};
  if (k == "pump_failed") return {PlantFault::cooling, 0.9};
  if (k == "coolant_flow_low") return {PlantFault::cooling, critical ? 0.8 : 0.6};
  if (k == "coolant_over_temperature") return {PlantFault::cooling, critical ? 0.8 : 0.6};
  if (k == "coolant_level_low" || k == "valve_fault") return {PlantFault::cooling, 0.5};
  if (k == "coolant_pressure_out_of_range") return {PlantFault::cooling, 0.4};
  if (k == "rectifier_fault") return {PlantFault::power, critical ? 0.85 : 0.7};
  if (k == "psu_fault" && e.layer == Layer::facility) return {PlantFault::power, 0.75};
  if (k == "power_capping") return {PlantFault::power, 0.8};
  if (k == "rack_power_over_budget") return {PlantFault::power, 0.4};
  return {};
}

std::string_view plant_fault_id(PlantFault f) {
  switch (f) {
    case PlantFault::cooling: return "cooling_loss";
    case PlantFault::power: return "power_capping";
    case PlantFault::leak: return "leak";
    default: return "";
  }
}

std::string_view plant_fault_name(PlantFault f) {
  switch (f) {
    case PlantFault::cooling: return "cooling loss";
    case PlantFault::power: return "power capping";
    case PlantFault::leak: return "coolant leak";
    default: return "";
  }
}

PlantFault plant_fault_kind(std::string_view id) {
  for (PlantFault f : {PlantFault::cooling, PlantFault::power, PlantFault::leak})
    if (plant_fault_id(f) == id) return f;
  return PlantFault::none;
}

ThrottleCause throttle_cause(const Event& e) {
  const std::string_view k = e.kind;
  if (k == "gpu_thermal_throttling" || k == "cpu_thermal_throttle" || k == "thermal_shutdown") return ThrottleCause::thermal;
  if (e.layer == Layer::astral && (k == "power_brake" || k == "power_capping")) return ThrottleCause::power;
  if (k == "gpu_hw_slowdown") return ThrottleCause::hardware;
  if (k == "gpu_clock_event") {
    const std::string_view c = e.attr("cause");
    return text::contains(c, "thermal") ? ThrottleCause::thermal
           : text::contains(c, "power") ? ThrottleCause::power
                                        : ThrottleCause::hardware;
  }
  // dcgm-exporter: GPU or memory temperature that climbed around onset is thermal evidence.
  if (k == kMetricChangeKind && (e.attr("rule") == "gpu_temperature" || e.attr("rule") == "gpu_memory_temperature"))
    return e.attr("change") == "rose" ? ThrottleCause::thermal : ThrottleCause::none;
  if (k == kMetricChangeKind && e.attr("rule") == "gpu_clock_events") {
    const std::string after(e.attr("after"));
    return cause_of_bits(std::strtoull(after.c_str(), nullptr, 0));
  }
  return ThrottleCause::none;
}

bool throttle_explained_by(ThrottleCause cause, PlantFault fault) {
  if (cause == ThrottleCause::hardware) return fault == PlantFault::cooling || fault == PlantFault::power;
  return (cause == ThrottleCause::thermal && fault == PlantFault::cooling) ||
         (cause == ThrottleCause::power && fault == PlantFault::power);
}

std::string_view throttle_why(ThrottleCause c) {
  switch (c) {
    case ThrottleCause::thermal: return "thermal throttling";
    case ThrottleCause::power: return "power capping of the GPUs";
    case ThrottleCause::hardware: return "hardware slowdown";
    default: return "";
  }
}

bool is_host_down(const Event& e) {
  if (e.kind == "host_reboot" || e.kind == "thermal_shutdown") return true;
  // A routine power-off row (bmc_power_state) is no fault alone, but under a leak it is the shutdown.
  return (e.kind == "sel_event" || e.kind == "bmc_power_state") && text::icontains(e.message, "power off");
}

}  // namespace astral::monitor
