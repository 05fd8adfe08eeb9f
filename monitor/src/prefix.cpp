#include "prefix.hpp"

#include <astral/common/checked.hpp>

#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

bool is_severity_word(sv w) {
  return w == "EMERG" || w == "ALERT" || w == "CRIT" || w == "ERR" || w == "ERROR" ||
         w == "WARNING" || w == "WARN" || w == "NOTICE" || w == "INFO" || w == "DEBUG";
}

// "Mon DD HH:MM:SS[.frac]" at the front; advances s. Returns local time-of-year (year given).
std::optional<int64_t> take_month_day_clock(sv& s, int year) {
  sv t = s;
  int month = month_from_name(t.substr(0, 3));
  if (!month || t.size() < 4 || t[3] != ' ') return std::nullopt;
  t.remove_prefix(4);
  t = ltrim(t);
  auto day = take_uint(t);
  if (!day || *day < 1 || *day > 31 || !take(t, ' ')) return std::nullopt;
  auto clock = take_clock(t);
  if (!clock) return std::nullopt;
  s = t;
  return days_from_civil(year, unsigned(month), unsigned(*day)) * 86400000000LL + *clock;
}

// "YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|+hh:mm]" at the front; advances s.
std::optional<int64_t> take_iso(sv& s, bool& zoned) {
  if (s.size() < 19 || !is_digit(s[0]) || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != ' '))
    return std::nullopt;
  size_t end = 11;
  sv t = s.substr(11);
  sv before = t;
  if (!take_clock(t)) return std::nullopt;
  end += before.size() - t.size();
  if (!t.empty() && (t[0] == 'Z' || t[0] == 'z')) {
    ++end;
  } else if (!t.empty() && (t[0] == '+' || t[0] == '-') && t.size() >= 3 && is_digit(t[1])) {
    size_t k = 1;
    while (k < t.size() && (is_digit(t[k]) || t[k] == ':') && k < 7) ++k;
    end += k;
  }
  sv stamp = s.substr(0, end);
  zoned = stamp.size() > 19 && (stamp.back() == 'Z' || stamp.back() == 'z' ||
                                stamp.find_first_of("+", 19) != sv::npos ||
                                stamp.find('-', 19) != sv::npos);
  std::string buf(stamp);
  auto v = parse_rfc3339(buf);
  if (!v) return std::nullopt;
  s.remove_prefix(end);
  return v;
}

// "Fri Aug 30 11:43:09 2024" (dmesg --ctime); advances s.
std::optional<int64_t> take_ctime(sv& s) {
  sv t = s;
  if (t.size() < 24 || !is_alpha(t[0]) || t[3] != ' ') return std::nullopt;
  t.remove_prefix(4);
  int month = month_from_name(t.substr(0, 3));
  if (!month || t.size() < 4) return std::nullopt;
  t.remove_prefix(4);
  t = ltrim(t);
  auto day = take_uint(t);
  if (!day || !take(t, ' ')) return std::nullopt;
  auto clock = take_clock(t);
  if (!clock || !take(t, ' ')) return std::nullopt;
  auto year = take_uint(t);
  if (!year || *year < 1970 || *year > 9999) return std::nullopt;
  s = t;
  return days_from_civil(*year, unsigned(month), unsigned(*day)) * 86400000000LL + *clock;
}

// "secs.frac" of a dmesg stamp in microseconds; nullopt when it is no clock reading (a damaged
// line), so the bracket is not taken as a timestamp. A stamp counts seconds since boot or since
// the previous line: no machine runs for 300 years, and the bound keeps every later sum of a stamp
// and a time (the line parser's reboot and relative-time checks) far inside int64_t.
constexpr int64_t kMaxDmesgStampUs = 10'000'000'000LL * 1000000;
std::optional<int64_t> dmesg_stamp_us(int64_t secs, sv frac) {
  auto us = checked_mul<int64_t>(secs, 1000000);
  if (us) us = checked_add<int64_t>(*us, frac_to_us(frac));
  return us && *us <= kMaxDmesgStampUs ? us : std::nullopt;
}

// dmesg bracket forms at the front of s. Returns true when one was consumed.
bool take_dmesg(sv& s, Prefix& p, int year_hint) {
  if (s.empty()) return false;
  bool bracket = s[0] == '[';
  sv t = bracket ? s.substr(1) : s;
  sv inner_start = ltrim(t);
  // Raw uptime "[ 1234.567890]" or the damaged "1234.567890]" form.
  if (!inner_start.empty() && is_digit(inner_start[0])) {
    sv u = inner_start;
    auto secs = take_uint(u);
    if (secs && take(u, '.') && !u.empty() && is_digit(u[0])) {
      sv frac = take_until(u, "]");
      bool digits = true;
      for (char c : frac) digits = digits && is_digit(c);
      auto stamp = dmesg_stamp_us(*secs, frac);
      if (digits && stamp && take(u, ']')) {
        p.uptime_us = *stamp;
        s = ltrim(u);
        return true;
      }
    }
    if (!bracket) return false;
  }
  if (!bracket) return false;
  // "[  +0.000001]" relative (dmesg -H)
  if (!inner_start.empty() && inner_start[0] == '+') {
    sv u = inner_start.substr(1);
    auto secs = take_uint(u);
    if (secs && take(u, '.')) {
      sv frac = take_until(u, "]");
      auto stamp = dmesg_stamp_us(*secs, frac);
      if (stamp && take(u, ']')) {
        p.relative_us = *stamp;
        s = ltrim(u);
        return true;
      }
    }
    return false;
  }
  // "[Fri Aug 30 11:43:09 2024]" (dmesg --ctime)
  {
    sv u = t;
    if (auto v = take_ctime(u); v && take(u, ']')) {
      p.time_us = *v;
      p.local = true;
      s = ltrim(u);
      return true;
    }
  }
  // "[Aug30 11:43]" header of dmesg -H
  {
    sv u = t;
    int month = month_from_name(u.substr(0, 3));
    if (month && u.size() > 4) {
      u.remove_prefix(3);
      auto day = take_uint(u);
      if (day && take(u, ' ') && u.size() >= 5 && is_digit(u[0]) && u[2] == ':') {
        int h = (u[0] - '0') * 10 + (u[1] - '0');
        int m = (u[3] - '0') * 10 + (u[4] - '0');
        u.remove_prefix(5);
        if (take(u, ']')) {
          p.time_us = days_from_civil(year_hint, unsigned(month), unsigned(*day)) * 86400000000LL +
                      (int64_t(h) * 60 + m) * 60000000LL;
          p.local = p.yearless = true;
          p.minute_header_month = month;
          s = ltrim(u);
          return true;
        }
      }
    }
  }
  // "[2026-05-05 06:16:47]" (NCCL WARN timestamp, local time)
  {
    sv u = t;
    bool zoned = false;
    if (auto v = take_iso(u, zoned); v && take(u, ']')) {
      p.time_us = *v;
      p.local = !zoned;
      s = ltrim(u);
      return true;
    }
  }
  return false;
}

// "[ T1946]" / "[    C3]" caller tags after a dmesg time.
void skip_caller_tag(sv& s) {
  if (s.size() < 4 || s[0] != '[') return;
  sv t = ltrim(s.substr(1));
  if (t.empty() || (t[0] != 'T' && t[0] != 'C')) return;
  t.remove_prefix(1);
  if (!take_uint(t) || !take(t, ']')) return;
  s = ltrim(t);
}

// "host program[pid]: " after a syslog time; SONiC adds a severity word before the program.
void take_syslog_tail(sv& s, Prefix& p) {
  sv t = s;
  sv host = take_word(t);
  if (host.empty() || host.back() == ':' || host[0] == '[') return;
  p.host = host;
  t = ltrim(t);
  sv save = t;
  sv word = take_word(t);
  if (is_severity_word(word)) {
    p.syslog_severity = word;
    t = ltrim(t);
  } else {
    t = save;
  }
  sv rest = t;
  sv prog = take_until(rest, " ");
  if (!prog.empty() && prog.back() == ':') {
    prog.remove_suffix(1);
    size_t br = prog.find('[');
    p.program = br == sv::npos ? prog : prog.substr(0, br);
    t = ltrim(rest);
    // SONiC's ":- func: msg" marker
    if (take(t, ":- ")) t = ltrim(t);
  }
  s = t;
}

// Launcher tags "[rank3]:" (torchrun) and "[default0]:" (torchrun --tee); advances s.
bool take_rank_tag(sv& s, Prefix& p) {
  if (!starts_with(s, "[rank") && !starts_with(s, "[default")) return false;
  sv t = s.substr(s[1] == 'r' ? 5 : 8);
  auto r = take_uint(t);
  if (!r || !take(t, "]:")) return false;
  p.rank = int(*r);
  s = ltrim(t);
  return true;
}

// Open MPI's --tag-output "[jobid,rank]<stdout>:" (also <stderr>, <stddiag>); advances s.
bool take_mpirun_tag(sv& s, Prefix& p) {
  if (s.size() < 12 || s[0] != '[' || !is_digit(s[1])) return false;
  sv t = s.substr(1);
  if (!take_uint(t) || !take(t, ',')) return false;
  auto rank = take_uint(t);
  if (!rank || !take(t, "]<")) return false;
  sv stream = take_until(t, ">");
  if (stream.empty() || stream.size() > 8 || !take(t, ">:")) return false;
  p.rank = int(*rank);
  s = t;
  return true;
}

// Open MPI's --timestamp-output before its tag: "2019-06-02T16:13:44.884Z: " (UTC, newer
// releases) or "Fri Aug 11 12:31:45 2023" glued to the tag (local time, older ones).
bool take_mpirun_stamp(sv& s, Prefix& p) {
  sv t = s;
  bool zoned = false;
  if (auto v = take_iso(t, zoned)) {
    if (!take(t, ": ") || !starts_with(t, "[")) return false;
    if (!take_mpirun_tag(t, p)) return false;
    p.time_us = *v;
    p.local = !zoned;
  } else if (auto c = take_ctime(t)) {
    if (!take_mpirun_tag(t, p)) return false;
    p.time_us = *c;
    p.local = true;
  } else {
    return false;
  }
  s = t;
  return true;
}

}  // namespace

Prefix strip_prefix(sv line, int year_hint) {
  Prefix p;
  sv s = line;
  // Trailing CR from files written on Windows collectors.
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  s = ltrim(s);
  // Syslog PRI "<13>" and RFC 5424 version "1 ".
  if (s.size() > 3 && s[0] == '<' && is_digit(s[1])) {
    sv t = s.substr(1);
    if (take_uint(t) && take(t, '>')) {
      s = t;
      if (s.size() > 2 && s[0] == '1' && s[1] == ' ') s.remove_prefix(2);
    }
  }
  // Collector / launcher tags that come before everything else.
  for (int guard = 0; guard < 3; ++guard) {
    if (take(s, "[...] ")) continue;
    if (starts_with(s, "(") && contains(s.substr(0, 48), " pid=")) {  // Ray "(WorkerDict pid=1) "
      size_t close = s.find(") ");
      if (close != sv::npos && close < 64) {
        s = ltrim(s.substr(close + 2));
        continue;
      }
    }
    if (take_rank_tag(s, p)) continue;
    if (take_mpirun_tag(s, p)) continue;
    if (s.size() > 3 && s[0] == '[' && is_digit(s[1])) {  // "[80746] " collector sequence
      sv t = s.substr(1);
      auto n = take_uint(t);
      if (n && take(t, "] ")) {
        s = t;
        continue;
      }
    }
    break;
  }
  bool zoned = false;
  // Cheap shape checks first: the ISO form is also every journal line's, and must stay one parse.
  const bool mpirun_iso = s.size() > 32 && is_digit(s[0]) && find(s.substr(19, 14), ": [") != sv::npos;
  const bool mpirun_ctime = s.size() > 30 && is_alpha(s[0]) && s[24] == '[';
  if ((mpirun_iso || mpirun_ctime) && take_mpirun_stamp(s, p)) {
    take_rank_tag(s, p);
  } else if (auto v = take_iso(s, zoned)) {  // journal / RFC 5424 / rsyslog high-precision / CRI
    p.time_us = *v;
    p.local = !zoned;
    if (starts_with(s, " ")) s = ltrim(s);
    if (starts_with(s, "stdout ") || starts_with(s, "stderr ")) {  // CRI: "<time> stderr F <line>"
      s.remove_prefix(7);
      if (s.size() >= 2 && (s[0] == 'F' || s[0] == 'P') && s[1] == ' ') s.remove_prefix(2);
    } else {
      take_syslog_tail(s, p);
    }
    take_rank_tag(s, p);  // the program's own line may carry a launcher tag
  } else if (s.size() > 5 && is_digit(s[0]) && is_digit(s[3]) && s[4] == ' ' &&
             month_from_name(s.substr(5, 3))) {  // SONiC "2025 Apr 23 09:56:10.997889 host"
    sv t = s;
    auto year = take_uint(t);
    take(t, ' ');
    if (year) {
      if (auto v = take_month_day_clock(t, int(*year))) {
        p.time_us = *v;
        p.local = true;
        s = ltrim(t);
        take_syslog_tail(s, p);
        take_rank_tag(s, p);
      }
    }
  } else if (s.size() > 15 && month_from_name(s.substr(0, 3)) && s[3] == ' ') {  // RFC 3164
    sv t = s;
    if (auto v = take_month_day_clock(t, year_hint)) {
      p.time_us = *v;
      p.local = p.yearless = true;
      s = ltrim(t);
      take_syslog_tail(s, p);
      take_rank_tag(s, p);
    }
  }
  // dmesg brackets (alone, or after "kernel:" in syslog), then caller tags.
  {
    Prefix d;
    if (take_dmesg(s, d, year_hint)) {
      if (d.uptime_us >= 0) p.uptime_us = d.uptime_us;
      if (d.relative_us >= 0) p.relative_us = d.relative_us;
      if (d.time_us != kUnknownTime && p.time_us == kUnknownTime) {
        p.time_us = d.time_us;
        p.local = d.local;
        p.yearless = d.yearless;
        p.minute_header_month = d.minute_header_month;
      }
      skip_caller_tag(s);
    }
  }
  // Bare "kernel: " (journal export without time, gpud comments).
  if (p.program.empty() && take(s, "kernel: ")) {
    p.program = "kernel";
    s = ltrim(s);
    Prefix d;
    if (take_dmesg(s, d, year_hint) && d.uptime_us >= 0) p.uptime_us = d.uptime_us;
  }
  p.body = s;
  return p;
}

}  // namespace astral::monitor
