// NVML through dlopen: the library loads on machines without the NVIDIA driver, where the source
// is reported as skipped. Only the few entry points we need are declared here (NVML API
// reference; units: mW, mJ, °C).
#include <dlfcn.h>


#include <fmt/format.h>

#include "astral/facility/local.hpp"

namespace astral::facility {

namespace {

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;

struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;

  template <typename F>
  bool bind(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(dlsym(handle, symbol));
    return fn != nullptr;
  }
  std::string describe(nvmlReturn_t rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? fmt::format("{} ({})", s, rc) : fmt::format("NVML error {}", rc);
  }
};

}  // namespace

std::vector<ClockEventAlarm> clock_event_alarms(std::uint64_t r) {
  std::vector<ClockEventAlarm> out;
  if (r & kNvmlHwThermalSlowdown)
    out.push_back({Severity::error, "gpu_thermal_throttling", "hardware thermal slowdown"});
  else if (r & kNvmlSwThermalSlowdown)
    out.push_back({Severity::warning, "gpu_thermal_throttling", "the driver keeps the GPU within its temperature"});
  if (r & kNvmlHwPowerBrakeSlowdown)
    out.push_back({Severity::error, "power_brake", "hardware power brake asserted (external power-brake signal)"});
  else if (r & kNvmlSwPowerCap)
    out.push_back({Severity::warning, "power_capping", "clocks capped by the power limit"});
  if ((r & kNvmlHwSlowdown) && !(r & (kNvmlHwThermalSlowdown | kNvmlHwPowerBrakeSlowdown)))
    out.push_back({Severity::error, "gpu_hw_slowdown", "hardware slowdown without a thermal or power-brake bit"});
  return out;
}

Snapshot read_nvml(const NvmlOptions& options) {
  Snapshot out;
  SourceStatus status;
  status.reader = "nvml";
  status.name = options.host + ":nvml";
  auto t0 = std::chrono::steady_clock::now();
  auto finish = [&] {
    status.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.sources.push_back(std::move(status));
    return std::move(out);
  };
  Nvml nv;
  nv.handle = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nv.handle) {
    status.error = fmt::format("skipped: {} cannot be loaded (no NVIDIA driver here?)", options.library);
    return finish();
  }
  bool required = nv.bind(nv.init, "nvmlInit_v2") && nv.bind(nv.shutdown, "nvmlShutdown") &&
                  nv.bind(nv.count, "nvmlDeviceGetCount_v2") &&
                  nv.bind(nv.by_index, "nvmlDeviceGetHandleByIndex_v2");
  nv.bind(nv.uuid, "nvmlDeviceGetUUID");
  nv.bind(nv.name, "nvmlDeviceGetName");
  nv.bind(nv.power, "nvmlDeviceGetPowerUsage");
  nv.bind(nv.energy, "nvmlDeviceGetTotalEnergyConsumption");
  nv.bind(nv.temperature, "nvmlDeviceGetTemperature");
  nv.bind(nv.limit, "nvmlDeviceGetEnforcedPowerLimit");
  nv.bind(nv.error_string, "nvmlErrorString");
  // Renamed in recent drivers; either name reads the same bitmask.
  if (!nv.bind(nv.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    nv.bind(nv.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!required) {
    status.error = fmt::format("skipped: {} lacks nvmlInit_v2/nvmlDeviceGetCount_v2", options.library);
    dlclose(nv.handle);
    return finish();
  }
  if (nvmlReturn_t rc = nv.init(); rc != kNvmlSuccess) {
    status.error = fmt::format("skipped: nvmlInit failed: {}", nv.describe(rc));
    dlclose(nv.handle);
    return finish();
  }
  unsigned n = 0;
  if (nvmlReturn_t rc = nv.count(&n); rc != kNvmlSuccess) {
    status.error = fmt::format("nvmlDeviceGetCount failed: {}", nv.describe(rc));
    n = 0;
  } else {
    status.ok = true;
  }
  auto now = Clock::now();
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nv.by_index(i, &dev) != kNvmlSuccess) {
      out.count_quirk("nvml_device_unavailable");
      continue;
    }
    char uuid[96] = {0}, name[96] = {0};
    std::string id = fmt::format("gpu{}", i);
    if (nv.uuid && nv.uuid(dev, uuid, sizeof uuid) == kNvmlSuccess && uuid[0]) id = uuid;
    std::string label = fmt::format("GPU {}", i);
    if (nv.name && nv.name(dev, name, sizeof name) == kNvmlSuccess && name[0]) label += std::string(" ") + name;
    auto emit = [&](const char* quantity, Unit unit, double value, bool counter = false) {
      Sample s;
      s.time = now;
      s.source = "nvml";
      s.host = options.host;
      s.kind = EntityKind::gpu;
      s.entity = id;
      s.name = label;
      s.quantity = quantity;
      s.unit = unit;
      s.value = value;
      s.counter = counter;
      s.origin = fmt::format("nvml:{}", i);
      out.samples.push_back(std::move(s));
    };
    unsigned mw = 0, celsius = 0, limit_mw = 0;
    unsigned long long mj = 0, reasons = 0;
    if (nv.power && nv.power(dev, &mw) == kNvmlSuccess) emit("power", Unit::watts, mw / 1000.0);
    if (nv.energy && nv.energy(dev, &mj) == kNvmlSuccess) emit("energy", Unit::joules, static_cast<double>(mj) / 1000.0, true);
    if (nv.temperature && nv.temperature(dev, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess)
      emit("temperature", Unit::celsius, celsius);
    if (nv.limit && nv.limit(dev, &limit_mw) == kNvmlSuccess) emit("power_limit", Unit::watts, limit_mw / 1000.0);
    if (nv.reasons && nv.reasons(dev, &reasons) == kNvmlSuccess) {
      emit("clock_event_reasons", Unit::none, static_cast<double>(reasons));
      auto alarm = [&](Severity sev, const char* type, std::string msg) {
        out.add_alarm(Alarm{now, options.host, EntityKind::gpu, id, sev, type, std::move(msg), fmt::format("nvml:{}", i), "nvml"});
      };
      for (const auto& c : clock_event_alarms(reasons)) {
        std::string msg = fmt::format("{} clocks held down: {} (reasons 0x{:x})", label, c.cause, reasons);
        if (c.type == "power_capping") msg += fmt::format(", power limit {} W", limit_mw / 1000.0);
        alarm(c.severity, c.type.c_str(), std::move(msg));
      }
    }
  }
  nv.shutdown();
  dlclose(nv.handle);
  return finish();
}

}  // namespace astral::facility
