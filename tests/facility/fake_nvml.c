/* A stand-in for libnvidia-ml.so.1 with the entry points the facility NVML reader binds, so the
 * dlopen path is tested on machines without a GPU. FAKE_NVML_MODE selects the behaviour:
 *   unset/"ok"   two GPUs; GPU 1 is thermally throttled and power capped
 *   "no_driver"  nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED (9)
 * FAKE_NVML_REASONS (hex) overrides GPU 1's clock-event reasons.
 */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;

static int mode_no_driver(void) {
  const char* m = getenv("FAKE_NVML_MODE");
  return m && strcmp(m, "no_driver") == 0;
}

static long index_of(nvmlDevice_t d) { return (long)(size_t)d - 1; }

nvmlReturn_t nvmlInit_v2(void) { return mode_no_driver() ? 9 : 0; }
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(nvmlReturn_t r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return 0; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= 2) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *d = (nvmlDevice_t)(size_t)(i + 1);
  return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned len) {
  const char* u = index_of(d) == 0 ? "GPU-00000000-1111-2222-3333-444444444444" : "GPU-55555555-6666-7777-8888-999999999999";
  strncpy(buf, u, len - 1);
  buf[len - 1] = 0;
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned len) {
  (void)d;
  strncpy(buf, "NVIDIA H100 80GB HBM3", len - 1);
  buf[len - 1] = 0;
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) { *mw = index_of(d) == 0 ? 312500 : 699000; return 0; }
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  *mj = index_of(d) == 0 ? 123456789ULL : 987654321ULL;
  return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* c) {
  if (sensor != 0) return 3;
  *c = index_of(d) == 0 ? 54 : 87;
  return 0;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) { (void)d; *mw = 700000; return 0; }
/* Only the old name, as on drivers before 535: the reader must fall back to it. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* r) {
  const char* over = getenv("FAKE_NVML_REASONS");
  *r = index_of(d) == 0 ? 0x1ULL /* idle */ : (0x40ULL | 0x4ULL); /* HwThermalSlowdown | SwPowerCap */
  if (over && index_of(d) == 1) *r = strtoull(over, NULL, 16);
  return 0;
}
