#pragma once
// The writer's clock. Events are stamped with a raw tick counter (the TSC on x86-64, the virtual
// counter on arm64: ~10-20 ns, no system call) because clock_gettime costs ~50 ns on a VM; the
// file records (ticks, CLOCK_MONOTONIC, CLOCK_REALTIME) triples at open, in every chunk header and
// about once a second, and the reader maps ticks to monotonic ns between them. Where the kernel
// does not trust the TSC, ticks are CLOCK_MONOTONIC ns themselves.
#include <time.h>

#include <cstdint>

#include "format.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace astral::trace::clock {

struct Reading {
  uint64_t ticks = 0;
  uint64_t mono_ns = 0;
  uint64_t wall_ns = 0;
};

inline uint64_t read_ns(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t ticks(uint32_t source) noexcept {
#if defined(__x86_64__)
  if (source == format::kClockTsc) return __rdtsc();
#elif defined(__aarch64__)
  if (source == format::kClockArmCounter) {
    uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
  }
#endif
  return read_ns(CLOCK_MONOTONIC);
}

// The best tick source the kernel vouches for (x86: current clocksource "tsc").
uint32_t pick_source() noexcept;
// A (ticks, monotonic, wall) triple; ticks are bracketed by two monotonic reads.
Reading read(uint32_t source) noexcept;
// Ticks per ns, measured over ~2 ms (1.0 for the monotonic source).
double measure_rate(uint32_t source) noexcept;

}  // namespace astral::trace::clock
