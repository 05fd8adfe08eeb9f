#pragma once
// Helpers shared by the fabric model's sources (validation, JSON, generators).
#include <charconv>
#include <string>
#include <string_view>

#include "astral/topo/fabric.hpp"

namespace astral::topo::detail {

[[noreturn]] inline void fail(const std::string& message) { throw FabricError(message); }

// A whole decimal integer, nothing before or after it.
inline bool parse_int(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace astral::topo::detail
