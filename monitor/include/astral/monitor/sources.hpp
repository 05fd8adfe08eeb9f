#pragma once
// The site's log stores as sources of a bundle: the journal files a systemd-journal-remote
// collector keeps (read through libsystemd's sd-journal, one host per _HOSTNAME) and the per-host
// tree a central rsyslog writes (hosts, switches and BMCs alike). Each becomes a LogSource for
// load_bundle, so its lines are parsed, dated and diagnosed exactly like a bundle folder's, and
// combine with one. Both are bounded by a time window and a line count.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/event.hpp"

namespace astral::monitor {

// [from, to] in UTC microseconds; an unknown end is open.
struct TimeWindow {
  int64_t from_us = kUnknownTime;
  int64_t to_us = kUnknownTime;
  bool bounded() const { return from_us != kUnknownTime || to_us != kUnknownTime; }
  bool contains(int64_t t) const {
    return (from_us == kUnknownTime || t >= from_us) && (to_us == kUnknownTime || t <= to_us);
  }
};

// "90s", "5m", "2h", "1h30m", "250ms", a bare number of seconds; nullopt when not a duration.
std::optional<int64_t> parse_duration_us(std::string_view text);
// RFC 3339 or Unix seconds ("1764456120", "1764456120.5").
std::optional<int64_t> parse_time_arg(std::string_view text);

struct JournalSourceOptions {
  std::string dir;  // a journal-remote output folder (or one .journal file)
  TimeWindow window;
  uint64_t max_entries = 20'000'000;  // over all files; the rest is left unread, with a note
  unsigned jobs = 0;                  // reader threads; 0: one per core
};

// Reads every *.journal file under `dir` (each file on its own; a damaged or truncated file is
// read up to the damage and its damage counted), one parsed file per file and host. The source
// throws std::runtime_error naming `dir` when it holds no journal file.
LogSource journal_source(JournalSourceOptions options);

struct SyslogSourceOptions {
  std::string dir;  // the collector's tree
  // Where rsyslog puts a host's lines, relative to `dir`, with %HOSTNAME% (and any other
  // %PROPERTY%, which matches anything): e.g. "%HOSTNAME%/%$YEAR%-%$MONTH%-%$DAY%.log". Empty:
  // the usual layouts, HOST/*.log (HOST/syslog, HOST/messages ...) and HOST-DATE.log / HOST.log.
  std::string path_template;
  TimeWindow window;
  uint64_t max_lines = 50'000'000;  // lines read over all files
  unsigned jobs = 0;
};

// Files of a central syslog tree, each mapped to its host; a host named in the fabric as a switch
// has switch logs. Events outside the window are dropped. Throws std::runtime_error naming
// `dir` when it has no file laid out as expected.
LogSource syslog_source(SyslogSourceOptions options);

}  // namespace astral::monitor
