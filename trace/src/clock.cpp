#include "clock.hpp"

#include <cstdio>
#include <cstring>

namespace astral::trace::clock {

uint32_t pick_source() noexcept {
#if defined(__x86_64__)
  // The kernel picks "tsc" as clocksource only when the TSC is invariant and synchronised across
  // CPUs; otherwise (e.g. "hpet" after a TSC watchdog failure) stay on clock_gettime.
  char name[64] = {};
  if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
    if (!std::fgets(name, sizeof name, f)) name[0] = 0;
    std::fclose(f);
  }
  if (std::strncmp(name, "tsc", 3) == 0) return format::kClockTsc;
#elif defined(__aarch64__)
  return format::kClockArmCounter;  // architecturally constant-rate and synchronised
#endif
  return format::kClockMonotonic;
}

Reading read(uint32_t source) noexcept {
  Reading best;
  uint64_t best_gap = ~uint64_t{0};
  for (int i = 0; i < 3; ++i) {  // keep the tightest bracket (a preemption widens it)
    const uint64_t m0 = read_ns(CLOCK_MONOTONIC);
    const uint64_t t = ticks(source);
    const uint64_t m1 = read_ns(CLOCK_MONOTONIC);
    if (m1 - m0 < best_gap) {
      best_gap = m1 - m0;
      best.ticks = t;
      best.mono_ns = m0 + (m1 - m0) / 2;
    }
  }
  best.wall_ns = read_ns(CLOCK_REALTIME);
  if (source == format::kClockMonotonic) best.ticks = best.mono_ns;
  return best;
}

double measure_rate(uint32_t source) noexcept {
  if (source == format::kClockMonotonic) return 1.0;
  const Reading a = read(source);
  Reading b = a;
  while (b.mono_ns - a.mono_ns < 2'000'000) b = read(source);
  const double rate = double(b.ticks - a.ticks) / double(b.mono_ns - a.mono_ns);
  return rate > 0 ? rate : 1.0;
}

}  // namespace astral::trace::clock
