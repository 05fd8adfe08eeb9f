#pragma once
// Integers read from untrusted JSON. nlohmann's get<int>() casts whatever number is there
// (1e30 -> int is undefined behaviour, 2^40 -> int silently wraps); this checks the range first.
// Header-only; include it only from code that already uses nlohmann/json.
#include <nlohmann/json.hpp>

#include <concepts>
#include <cstdint>
#include <optional>

#include "astral/common/checked.hpp"

namespace astral {

// An integer-valued JSON number (8, and 8.0 as many writers emit) as T; nullopt for any other
// value: not a number, a fraction, or out of T's range.
template <std::integral T>
std::optional<T> json_integer(const nlohmann::json& v) noexcept {
  if (v.is_number_unsigned()) return checked_cast<T>(v.get<std::uint64_t>());
  if (v.is_number_integer()) return checked_cast<T>(v.get<std::int64_t>());
  if (v.is_number_float()) return checked_whole<T>(v.get<double>());
  return std::nullopt;
}

}  // namespace astral
