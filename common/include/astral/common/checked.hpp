#pragma once
// Checked conversions and arithmetic for numbers that come from untrusted input (log lines, trace
// headers, JSON, wire bytes). The range is checked first and the cast done only when the value
// fits, so a hostile or damaged input can never reach undefined behaviour (a signed overflow, an
// out-of-range float-to-integer cast). Each returns std::nullopt when the result does not fit;
// the caller names the input and field in its error, or skips the value.
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <utility>

namespace astral {

// An integer or a floating-point value as To, or nullopt when it does not fit. Floating-point
// values are truncated toward zero (as static_cast does) once they are known to fit; NaN and
// infinities never fit.
template <std::integral To, typename From>
  requires std::integral<From> || std::floating_point<From>
constexpr std::optional<To> checked_cast(From value) noexcept {
  if constexpr (std::integral<From>) {
    if (!std::in_range<To>(value)) return std::nullopt;
    return static_cast<To>(value);
  } else {
    // Both bounds are powers of two (or zero), so they are exact in any floating-point type.
    // [min, max + 1) fits; the few values just below min whose truncation would still fit
    // (-0.5 for an unsigned type) are refused too, which is the safe side.
    constexpr From lower = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From upper = static_cast<From>(std::numeric_limits<To>::max() / 2 + 1) * From(2);
    if (!(value >= lower && value < upper)) return std::nullopt;  // NaN fails too
    return static_cast<To>(value);
  }
}

// A floating-point value that must be a whole number in To's range (a count written as 8.0 in
// JSON is fine, 8.5 is not).
template <std::integral To, std::floating_point From>
constexpr std::optional<To> checked_whole(From value) noexcept {
  auto v = checked_cast<To>(value);
  if (!v || static_cast<From>(*v) != value) return std::nullopt;
  return v;
}

// The nearest integer to a floating-point value (halves away from zero, as std::llround) as To, or
// nullopt when it does not fit. std::llround's result is unspecified out of range, and the
// garbage it returns then overflows whatever arithmetic follows.
template <std::integral To, std::floating_point From>
std::optional<To> checked_round(From value) noexcept {
  return checked_cast<To>(std::round(value));
}

template <std::integral T>
constexpr std::optional<T> checked_add(T a, T b) noexcept {
  T r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
template <std::integral T>
constexpr std::optional<T> checked_sub(T a, T b) noexcept {
  T r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
template <std::integral T>
constexpr std::optional<T> checked_mul(T a, T b) noexcept {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace astral
