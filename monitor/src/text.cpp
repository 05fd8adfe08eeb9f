#include "text.hpp"

namespace astral::monitor::text {

size_t ifind(sv hay, sv needle, size_t from) {
  if (needle.empty()) return from <= hay.size() ? from : sv::npos;
  const char first = needle[0];
  for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
    if (lower(hay[i]) != first) continue;
    size_t k = 1;
    while (k < needle.size() && lower(hay[i + k]) == needle[k]) ++k;
    if (k == needle.size()) return i;
  }
  return sv::npos;
}

std::string to_lower(sv s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

Civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp + (mp < 10 ? 3 : -9);
  return {y + (m <= 2), m, d};
}

int64_t shift_years(int64_t t, int delta) {
  int64_t days = t >= 0 ? t / 86400000000LL : -((-t + 86400000000LL - 1) / 86400000000LL);
  int64_t in_day = t - days * 86400000000LL;
  Civil c = civil_from_days(days);
  unsigned day = c.day;
  if (c.month == 2 && day == 29) day = 28;
  return days_from_civil(c.year + delta, c.month, day) * 86400000000LL + in_day;
}

int month_from_name(sv n) {
  if (n.size() < 3) return 0;
  switch (lower(n[0])) {  // most lines are rejected by the first letter
    case 'j': case 'f': case 'm': case 'a': case 's': case 'o': case 'n': case 'd': break;
    default: return 0;
  }
  static const char* names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                "jul", "aug", "sep", "oct", "nov", "dec"};
  char a = lower(n[0]), b = lower(n[1]), c = lower(n[2]);
  for (int i = 0; i < 12; ++i)
    if (names[i][0] == a && names[i][1] == b && names[i][2] == c) return i + 1;
  return 0;
}

int64_t frac_to_us(sv digits) {
  int64_t us = 0;
  size_t i = 0;
  for (; i < digits.size() && i < 6; ++i) us = us * 10 + (digits[i] - '0');
  for (; i < 6; ++i) us *= 10;
  return us;
}

std::optional<int64_t> take_clock(sv& s) {
  if (s.size() < 8 || !is_digit(s[0]) || !is_digit(s[1]) || s[2] != ':' || !is_digit(s[3]) ||
      !is_digit(s[4]) || s[5] != ':' || !is_digit(s[6]) || !is_digit(s[7]))
    return std::nullopt;
  int h = (s[0] - '0') * 10 + (s[1] - '0');
  int m = (s[3] - '0') * 10 + (s[4] - '0');
  int sec = (s[6] - '0') * 10 + (s[7] - '0');
  if (h > 23 || m > 59 || sec > 60) return std::nullopt;
  size_t i = 8;
  int64_t us = 0;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j;
    us = frac_to_us(s.substr(i + 1, j - i - 1));
    i = j;
  }
  s.remove_prefix(i);
  return ((int64_t(h) * 60 + m) * 60 + sec) * 1000000LL + us;
}

std::string sanitize(sv s) {
  unsigned bad = 0;
  for (unsigned char c : s)  // branch-free: vectorises
    bad |= (unsigned(c < 0x20) & unsigned(c != '\t')) | unsigned(c == 0x7f);
  if (!bad) return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\t' || (c >= 0x20 && c != 0x7f)) out.push_back(char(c));
    else out.push_back('?');
  }
  return out;
}

}  // namespace astral::monitor::text
