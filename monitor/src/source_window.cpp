// Time arguments of the sources: --from/--to (RFC 3339 or Unix seconds), --around T --window D.
#include <cmath>
#include <cstdlib>
#include <string>

#include "astral/common/checked.hpp"
#include "astral/monitor/sources.hpp"

namespace astral::monitor {

std::optional<int64_t> parse_duration_us(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double total_s = 0;
  size_t i = 0;
  while (i < text.size()) {
    const std::string rest(text.substr(i));
    char* end = nullptr;
    const double n = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str() || n < 0 || !std::isfinite(n)) return std::nullopt;
    i += size_t(end - rest.c_str());
    std::string_view unit = text.substr(i);
    double scale = 1;
    if (unit.starts_with("ms")) scale = 1e-3, i += 2;
    else if (unit.starts_with("s")) i += 1;
    else if (unit.starts_with("m")) scale = 60, i += 1;
    else if (unit.starts_with("h")) scale = 3600, i += 1;
    else if (unit.starts_with("d")) scale = 86400, i += 1;
    else if (!unit.empty()) return std::nullopt;
    total_s += n * scale;
  }
  return checked_round<int64_t>(total_s * 1e6);  // nullopt beyond int64_t microseconds
}

std::optional<int64_t> parse_time_arg(std::string_view text) {
  if (auto t = parse_rfc3339(text)) return t;
  const std::string s(text);
  char* end = nullptr;
  const double seconds = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end || !std::isfinite(seconds) || seconds < 0) return std::nullopt;
  return checked_round<int64_t>(seconds * 1e6);
}

}  // namespace astral::monitor
