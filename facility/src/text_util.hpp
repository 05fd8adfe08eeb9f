#pragma once
// Small string helpers shared by the facility readers (HTTP, IPMI text, Redfish, Prometheus).
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace astral::facility::text {

inline bool starts_with(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
inline bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }
inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

inline std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Without leading and trailing blanks (space, tab, CR, LF).
inline std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == s.npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace astral::facility::text
