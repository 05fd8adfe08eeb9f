#pragma once
// Strips what collectors put in front of a log message (syslog and journal headers, dmesg
// brackets, launcher and collector tags) and keeps the time, host and program they carry.
#include <cstdint>
#include <string_view>

#include "astral/monitor/event.hpp"

namespace astral::monitor {

struct Prefix {
  // Wall-clock time read from the prefix. `local` = in the writer's zone (needs --tz or the
  // zone inferred from the file time); `yearless` = the year must be supplied.
  int64_t time_us = kUnknownTime;
  bool local = false;
  bool yearless = false;
  int64_t uptime_us = -1;        // dmesg boot-relative seconds, when present
  int64_t relative_us = -1;      // `dmesg -H` delta to the previous line
  int minute_header_month = 0;   // `dmesg -H` "[Aug30 11:43]" header (month/day, local)
  std::string_view host;         // syslog host, when present
  std::string_view program;      // syslog program (kernel, pmon#xcvrd, switchd ...)
  std::string_view syslog_severity;  // SONiC puts NOTICE/WARNING after the host
  int rank = -1;                 // from a launcher tag such as "[rank3]:"
  std::string_view body;         // the message proper
};

// Reads the prefixes at the front of `line` (any that apply, in the order collectors nest them).
// Year-less times are computed with year `year_hint` (the caller corrects the year later).
Prefix strip_prefix(std::string_view line, int year_hint);

}  // namespace astral::monitor
