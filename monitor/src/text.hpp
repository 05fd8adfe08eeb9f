#pragma once
// Small allocation-free helpers for hand-written log parsing (no std::regex on the hot path:
// the parsers must run at hundreds of MB/s).
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace astral::monitor::text {

using sv = std::string_view;

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

inline sv trim(sv s) {
  while (!s.empty() && (is_space(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}
inline sv ltrim(sv s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// memcmp with the literal's length: the compiler turns it into a few compares.
inline bool starts_with(sv s, sv p) { return s.size() >= p.size() && memcmp(s.data(), p.data(), p.size()) == 0; }
inline bool ends_with(sv s, sv p) {
  return s.size() >= p.size() && memcmp(s.data() + s.size() - p.size(), p.data(), p.size()) == 0;
}

// How common a character is in log text (lower is rarer): spaces, quotes and frequent letters make
// poor search anchors. A table, because find() ranks every character of its needle on each call.
inline constexpr std::array<uint8_t, 256> kAnchorCost = [] {
  std::array<uint8_t, 256> cost {};
  for (int c = 0; c < 256; ++c) {
    uint8_t v = 30;
    if (c == ' ' || c == '"' || c == '\n') v = 100;
    else if (c >= 'a' && c <= 'z') v = 50;
    else if (c == ':' || c == ',' || c == '.' || c == '_' || c == '-' || c == '/' || c == '=') v = 60;
    else if (c >= '0' && c <= '9') v = 45;
    else if (c >= 'A' && c <= 'Z') v = 20;
    cost[size_t(c)] = v;
  }
  for (char c : std::string_view("etaoinsrhlcd")) cost[static_cast<unsigned char>(c)] = 80;
  return cost;
}();

// Substring search tuned for short log lines: memchr (vectorised) for the needle's least common
// character, then memcmp. glibc's memmem pays a set-up per call that dominates on short lines.
inline size_t find(sv hay, sv needle, size_t from = 0) {
  if (from > hay.size() || needle.size() > hay.size() - from) return sv::npos;
  if (needle.empty()) return from;
  if (hay.size() - from >= 1024) {  // long texts (file heads, JSON): memmem's set-up pays off
    const void* hit = memmem(hay.data() + from, hay.size() - from, needle.data(), needle.size());
    return hit ? size_t(static_cast<const char*>(hit) - hay.data()) : sv::npos;
  }
  // The anchor: the needle's character least common in logs and JSON.
  size_t k = 0;
  int best = 1000;
  for (size_t i = 0; i < needle.size(); ++i) {
    int score = kAnchorCost[static_cast<unsigned char>(needle[i])];
    if (score < best) best = score, k = i;
    if (best <= 20) break;  // nothing is rarer than a capital letter
  }
  const char anchor = needle[k];
  const char* base = hay.data();
  size_t pos = from + k;
  const size_t last = hay.size() - needle.size() + k;  // last position the anchor may take
  while (pos <= last) {
    const void* hit = memchr(base + pos, anchor, last - pos + 1);
    if (!hit) return sv::npos;
    size_t at = size_t(static_cast<const char*>(hit) - base);
    if (memcmp(base + at - k, needle.data(), needle.size()) == 0) return at - k;
    pos = at + 1;
  }
  return sv::npos;
}
inline bool contains(sv hay, sv needle) { return find(hay, needle) != sv::npos; }

// The text after `needle`, or empty-with-null-data when absent (check with .data()).
inline std::optional<sv> after(sv hay, sv needle) {
  size_t i = find(hay, needle);
  if (i == sv::npos) return std::nullopt;
  return hay.substr(i + needle.size());
}

// Case-insensitive ASCII search.
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
size_t ifind(sv hay, sv needle_lower, size_t from = 0);
inline bool icontains(sv hay, sv needle_lower) { return ifind(hay, needle_lower) != sv::npos; }
std::string to_lower(sv s);

// Parse an unsigned decimal at the front of s; advances s. nullopt (s unchanged) if no digit.
inline std::optional<int64_t> take_uint(sv& s) {
  const char* const begin = s.data();
  const char* const end = begin + s.size();
  const char* p = begin;
  int64_t v = 0;
  for (; p != end && unsigned(*p - '0') < 10; ++p)
    if (p - begin < 18) v = v * 10 + (*p - '0');  // absurdly long: keep the prefix value
  if (p == begin) return std::nullopt;
  s.remove_prefix(size_t(p - begin));
  return v;
}
inline std::optional<int64_t> take_int(sv& s) {
  bool neg = !s.empty() && s[0] == '-';
  sv t = neg ? s.substr(1) : s;
  auto v = take_uint(t);
  if (!v) return std::nullopt;
  s = t;
  return neg ? -*v : *v;
}
inline std::optional<uint64_t> take_hex(sv& s) {
  sv t = s;
  if (starts_with(t, "0x") || starts_with(t, "0X")) t.remove_prefix(2);
  size_t i = 0;
  uint64_t v = 0;
  while (i < t.size() && is_hex(t[i])) {
    char c = t[i++];
    v = v * 16 + uint64_t(is_digit(c) ? c - '0' : lower(c) - 'a' + 10);
  }
  if (i == 0 || i > 16) return std::nullopt;
  s = t.substr(i);
  return v;
}
inline bool take(sv& s, sv lit) {
  if (!starts_with(s, lit)) return false;
  s.remove_prefix(lit.size());
  return true;
}
inline bool take(sv& s, char c) {
  if (s.empty() || s[0] != c) return false;
  s.remove_prefix(1);
  return true;
}
// Up to (not including) the first char in `stops`; advances s past the token. (A plain loop:
// string_view::find_first_of calls memchr over the stop set for every character.)
inline sv take_until(sv& s, sv stops) {
  size_t i = 0;
  if (s.empty()) return s;  // memchr must not see an empty view's null data
  if (stops.size() == 1) {
    const void* hit = memchr(s.data(), stops[0], s.size());
    i = hit ? size_t(static_cast<const char*>(hit) - s.data()) : s.size();
  } else {
    for (; i < s.size(); ++i) {
      const char c = s[i];
      bool stop = false;
      for (char t : stops) stop |= c == t;
      if (stop) break;
    }
  }
  sv tok = s.substr(0, i);
  s.remove_prefix(i);
  return tok;
}
inline sv take_word(sv& s) {
  s = ltrim(s);
  return take_until(s, " \t");
}

// Integer after `key` in the line ("rank 36" with key "rank "); nullopt if absent/non-numeric.
inline std::optional<int64_t> int_after(sv line, sv key) {
  auto rest = after(line, key);
  if (!rest) return std::nullopt;
  return take_int(*rest);
}
inline std::optional<uint64_t> hex_after(sv line, sv key) {
  auto rest = after(line, key);
  if (!rest) return std::nullopt;
  return take_hex(*rest);
}
// The token after key up to one of the stop chars.
inline std::optional<sv> token_after(sv line, sv key, sv stops = " ,)\t") {
  auto rest = after(line, key);
  if (!rest) return std::nullopt;
  return take_until(*rest, stops);
}

// Calendar arithmetic (proleptic Gregorian, UTC): days since 1970-01-01.
inline int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}
struct Civil {
  int64_t year;
  unsigned month, day;
};
Civil civil_from_days(int64_t days);

inline int64_t to_epoch_us(int64_t y, unsigned mo, unsigned d, unsigned h, unsigned mi, unsigned s,
                           int64_t us) {
  return ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 * 1000000LL + s * 1000000LL + us;
}

// The same wall-clock date and time `delta` years later (Feb 29 becomes Feb 28).
int64_t shift_years(int64_t t_us, int delta);

// "Jan".."Dec" (any case) -> 1..12, 0 if not a month.
int month_from_name(sv name);
// Parses "HH:MM:SS[.frac]" at the front of s (advances); returns microseconds of the day.
std::optional<int64_t> take_clock(sv& s);
// Fraction digits after '.', to microseconds (nanoseconds truncated).
int64_t frac_to_us(sv digits);

// Replace bytes that are not printable ASCII/UTF-8 continuation by '?' (for messages).
std::string sanitize(sv s);

}  // namespace astral::monitor::text
