#pragma once
// Local power and thermal sources: hwmon and powercap/RAPL sysfs (rooted anywhere, so tests and
// offline analysis can point at a copied tree), IPMI DCMI and SDR through ipmitool, and NVML
// loaded with dlopen (skipped where the driver is absent). facility-formats.md §2.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "astral/facility/sample.hpp"

namespace astral::facility {

// This machine's host name, for sample and event labels.
std::string local_host_name();

// --- hwmon --------------------------------------------------------------------------------------
// Every chip under <root>/sys/class/hwmon: temperatures (with max/crit/emergency limits), voltages,
// currents, power (sentinel 4294967295000 µW and other implausible values dropped and counted),
// energy counters, fans, humidity.
Snapshot read_hwmon(const std::string& root = "/", const std::string& host = local_host_name());

// --- powercap / RAPL ----------------------------------------------------------------------------
struct RaplZone {
  std::string id;    // "intel-rapl:0:0"
  std::string name;  // "package-0/core" (sub-zones carry their parent's name)
  std::string path;
  std::optional<std::uint64_t> energy_uj;
  std::uint64_t max_energy_range_uj = 0;
  std::optional<double> power_limit_w;  // the long_term constraint
  std::string error;  // "no permission" when energy_uj is root-only (distinct from absent)
};
std::vector<RaplZone> read_rapl_zones(const std::string& root = "/");

// Delta of a counter that wraps at `range` (RAPL energy_uj at max_energy_range_uj).
std::uint64_t wrapped_delta(std::uint64_t previous, std::uint64_t current, std::uint64_t range);

// Energy counters per zone; power from the previous sample with wrap handling.
class RaplMeter {
 public:
  explicit RaplMeter(std::string root = "/", std::string host = local_host_name());
  Snapshot sample(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

 private:
  struct Last {
    std::uint64_t energy_uj;
    std::chrono::steady_clock::time_point at;
  };
  std::string root_, host_;
  std::map<std::string, Last> last_;
};

// --- IPMI ---------------------------------------------------------------------------------------
struct DcmiPowerReading {
  bool active = false;  // "Power reading state is: activated"
  double current_w = 0, minimum_w = 0, maximum_w = 0, average_w = 0;
  double sampling_period_s = 0;
  std::string timestamp;
};
// `ipmitool dcmi power reading` output (ipmitool 1.8.18 and 1.8.19+ layouts). nullopt with *error
// set when the text is not such output.
std::optional<DcmiPowerReading> parse_dcmi_power_reading(const std::string& text, std::string* error);

struct SdrRecord {
  std::string name;
  std::string sensor_number;  // "04h" (elist only)
  std::string status;         // ok, ns, nc, cr, nr, ucr, lcr, ... (elist and list)
  std::string entity;         // "7.1" (elist only)
  std::string reading;        // the text as printed
  std::optional<double> value;
  std::string unit;           // "degrees C", "Watts", ...
};
// `ipmitool sdr list` / `sdr elist` output; lines that are not records are skipped.
std::vector<SdrRecord> parse_sdr(const std::string& text);

struct IpmiOptions {
  std::string ipmitool = "ipmitool";
  std::string bmc_host;        // empty: the local BMC (in-band); else -I lanplus -H host
  std::string username;        // remote only; the password comes from IPMI_PASSWORD (ipmitool -E)
  bool zero_is_reading = false;  // some BMCs report 0 W while "activated": a reading or not?
  std::chrono::milliseconds timeout{15000};
  std::string host;            // label; defaults to bmc_host or this machine
};
// Turns captured ipmitool output (DCMI power reading or SDR list; detected from the text) into
// samples and alarms. `origin` names where the text came from.
Snapshot ipmi_from_text(const std::string& text, const IpmiOptions& options, const std::string& origin);
// Runs ipmitool (dcmi power reading, then sdr elist) without a shell and parses its output.
Snapshot read_ipmi(const IpmiOptions& options);

// --- NVML ---------------------------------------------------------------------------------------
struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";
  std::string host = local_host_name();
};
// Power, total energy, temperature, enforced power limit and clock-event (throttle) reasons per
// GPU; thermal slowdown and power capping become alarms. Where NVML cannot be loaded or has no
// driver, the source is reported as skipped (ok = false, error says why) and nothing else happens.
Snapshot read_nvml(const NvmlOptions& options = {});

// Clock-event reason bits (nvmlClocksEventReasons; azurehpc-health-checks).
inline constexpr std::uint64_t kNvmlSwPowerCap = 0x4, kNvmlHwSlowdown = 0x8,
                               kNvmlSwThermalSlowdown = 0x20, kNvmlHwThermalSlowdown = 0x40,
                               kNvmlHwPowerBrakeSlowdown = 0x80;

// Which alarms a clock-event reason mask raises, each attributed by its specific bit. NVML sets
// HwSlowdown (0x8) together with HwThermalSlowdown (0x40) and with HwPowerBrakeSlowdown (0x80), so
// 0x8 alone says nothing about the cause: a power brake (0x88) is `power_brake`, never
// `gpu_thermal_throttling`; 0x8 without either specific bit is `gpu_hw_slowdown` (cause unknown:
// older drivers, or an external slowdown signal).
//   0x40 -> gpu_thermal_throttling (error)   0x20 (without 0x40) -> gpu_thermal_throttling (warning)
//   0x80 -> power_brake (error)              0x4  (without 0x80) -> power_capping (warning)
//   0x8 without 0x40/0x80 -> gpu_hw_slowdown (error)
struct ClockEventAlarm {
  Severity severity = Severity::warning;
  std::string type;
  std::string cause;  // a phrase for the message: "hardware thermal slowdown"
};
std::vector<ClockEventAlarm> clock_event_alarms(std::uint64_t reasons);

}  // namespace astral::facility
