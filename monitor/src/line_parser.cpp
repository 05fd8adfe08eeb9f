#include "line_parser.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "keywords.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {
constexpr double kInheritedConfidenceS = 60;      // time taken from a neighbouring line
constexpr double kUptimeGuessConfidenceS = 3600;  // dmesg dated from the file time only

int year_of(int64_t t) {
  int64_t days = t >= 0 ? t / 86400000000LL : -((-t + 86400000000LL - 1) / 86400000000LL);
  return int(civil_from_days(days).year);
}

std::string format_offset(int64_t s) {
  char buf[48];
  int64_t a = s < 0 ? -s : s;
  std::snprintf(buf, sizeof buf, "%c%02lld:%02lld", s < 0 ? '-' : '+',
                static_cast<long long>(a / 3600), static_cast<long long>(a / 60 % 60));
  return buf;
}
}  // namespace

LineParser::LineParser(const ParseOptions& options, ParseResult& out)
    : options_(options), out_(out) {
  year_ = options.time.year;
  if (year_ == 0 && options.time.reference_us != kUnknownTime) year_ = year_of(options.time.reference_us);
  if (year_ == 0) year_ = 2026;  // nothing better known; flagged in the notes at finish()
}

std::string_view LineParser::host() const {
  if (!prefix_.host.empty()) return prefix_.host;
  return options_.default_host;
}

void LineParser::set_line_time(int64_t t, bool local, bool yearless, double confidence_s) {
  // Lines without a time since the previous dated line happened between the two.
  if (!inherited_.empty() && last_time_ != kUnknownTime && t >= last_time_) {
    for (size_t i : inherited_) {
      Event& e = out_.events[i];
      e.time_us = last_time_ + (t - last_time_) / 2;
      e.time_confidence_s = double(t - last_time_) / 2e6 + 1;
    }
  }
  inherited_.clear();
  line_time_ = t;
  line_local_ = local;
  line_yearless_ = yearless;
  line_confidence_ = confidence_s;
  last_time_ = t;
  last_local_ = local;
  last_yearless_ = yearless;
}

Event& LineParser::emit_undated(Layer layer, Severity severity, std::string_view kind, ComponentKind component,
                                std::string_view message) {
  const int64_t saved_line = line_time_, saved_last = last_time_;
  const int64_t saved_uptime = line_uptime_;
  line_time_ = last_time_ = kUnknownTime;
  line_uptime_ = -1;
  Event& e = emit(layer, severity, kind, component, message);
  untimed_.pop_back();  // stays undated
  line_time_ = saved_line;
  last_time_ = saved_last;
  line_uptime_ = saved_uptime;
  return e;
}

Event& LineParser::emit(Layer layer, Severity severity, std::string_view kind,
                        ComponentKind component, std::string_view message) {
  Event& e = out_.events.emplace_back();
  e.layer = layer;
  e.severity = severity;
  e.kind = std::string(kind);
  e.host = std::string(host());
  e.component.kind = component;
  if (component != ComponentKind::switch_ && component != ComponentKind::switch_port)
    e.component.host = e.host;
  if (prefix_.rank >= 0) {
    e.keys.rank = prefix_.rank;
    if (component == ComponentKind::process) e.component.rank = prefix_.rank;
  }
  e.message = sanitize(message);
  e.file = options_.file_index;
  e.line = event_line_;
  const size_t index = out_.events.size() - 1;
  if (line_time_ != kUnknownTime) {
    e.time_us = line_time_;
    e.time_confidence_s = line_confidence_;
    if (line_local_) local_.push_back(index);
    if (line_yearless_) yearless_.push_back(index);
  } else if (line_uptime_ >= 0) {
    e.set_attr("uptime_us", std::to_string(line_uptime_));
    uptime_only_.push_back(index);
  } else if (last_time_ != kUnknownTime) {
    e.time_us = last_time_;
    e.time_confidence_s = kInheritedConfidenceS;
    if (last_local_) local_.push_back(index);
    if (last_yearless_) yearless_.push_back(index);
    inherited_.push_back(index);
  } else {
    untimed_.push_back(index);
  }
  return e;
}

bool LineParser::start_join(sv line, uint32_t triggers) {
  if ((triggers & kGotCompletion) && !(triggers & kWith)) {
    join_mode_ = 1;
  } else if ((triggers & kWatchdogCaught) && !(triggers & kTimingOut)) {
    join_mode_ = 2;
  } else {
    return false;
  }
  join_.assign(line);
  join_line_ = line_no_;
  join_count_ = 0;
  return true;
}

void LineParser::flush_join() {
  if (!join_mode_) return;
  join_mode_ = 0;
  std::string text = std::move(join_);
  join_.clear();
  uint32_t saved = line_no_;
  line_no_ = join_line_;
  process(text, KeywordScanner::instance().scan(text));
  line_no_ = saved;
}

void LineParser::feed(sv raw) {
  ++line_no_;
  ++out_.stats.lines;
  if (join_mode_) {
    bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    if (join_mode_ == 1 && indented) {
      join_ += ' ';
      join_ += trim(raw);
      ++out_.stats.recognised;
      if (contains(join_, " hca ") || ++join_count_ >= 6) flush_join();
      return;
    }
    if (join_mode_ == 2 && !raw.empty() && !starts_with(raw, "[") && !starts_with(raw, "Exception")) {
      join_ += trim(raw);
      ++out_.stats.recognised;
      if (contains(join_, "timing out") || ++join_count_ >= 3) flush_join();
      return;
    }
    flush_join();
  }
  // Exact repeats (a shipper sending a line twice). Comparing with a copy of the previous line
  // is cheaper than hashing every line: lines of equal length mostly differ early.
  if (!raw.empty() && raw.size() == previous_.size() && memcmp(raw.data(), previous_.data(), raw.size()) == 0) {
    ++out_.stats.duplicates;
    ++out_.stats.recognised;
    return;
  }
  previous_.assign(raw);
  // NCCL INFO lines (most of a job log) need no keyword scan: their recogniser reads them by
  // structure. Everything else is scanned once for the trigger words of every format.
  const size_t info = find(raw.substr(0, 160), "NCCL INFO ");
  if (info != sv::npos && is_quiet_nccl_info(raw, info, channel_lines)) {
    ++out_.stats.recognised;
    return;
  }
  const uint32_t triggers = info != sv::npos ? uint32_t(kNcclMark) : KeywordScanner::instance().scan(raw);
  if (start_join(raw, triggers)) return;  // the joined text is processed (and counted) at flush
  process(raw, triggers);
}

void LineParser::feed_at(sv raw, int64_t time_us) {
  given_time_ = time_us;
  feed(raw);
  given_time_ = kUnknownTime;
}

void LineParser::process(sv line, uint32_t triggers) {
  event_line_ = line_no_;
  triggers_ = triggers;
  if (trim(line).empty()) {
    ++out_.stats.recognised;
    return;
  }
  prefix_ = strip_prefix(line, year_);
  line_time_ = kUnknownTime;
  line_uptime_ = -1;
  line_local_ = line_yearless_ = false;
  line_confidence_ = 1;
  if (prefix_.time_us != kUnknownTime) {
    set_line_time(prefix_.time_us, prefix_.local, prefix_.yearless, 1);
    if (prefix_.uptime_us >= 0) {
      uptime_pairs_.emplace_back(prefix_.time_us, prefix_.uptime_us);
      uptime_pairs_local_ = prefix_.local;
    }
  } else if (given_time_ != kUnknownTime) {
    set_line_time(given_time_, false, false, 1);
  } else if (prefix_.relative_us >= 0 && last_time_ != kUnknownTime) {
    set_line_time(last_time_ + prefix_.relative_us, last_local_, last_yearless_, 1);
  } else if (prefix_.uptime_us >= 0) {
    line_uptime_ = prefix_.uptime_us;
  }
  if (prefix_.uptime_us >= 0) {
    if (last_uptime_us >= 0 && prefix_.uptime_us + 60000000 < last_uptime_us) {
      // The kernel clock went backwards: the machine rebooted inside this dump.
      emit(switch_context() ? Layer::switch_ : Layer::kernel, Severity::warning,
           switch_context() ? "switch_reboot" : "host_reboot",
           switch_context() ? ComponentKind::switch_ : ComponentKind::host,
           "kernel uptime restarted (reboot)")
          .component.switch_name = switch_context() ? std::string(host()) : std::string();
    }
    last_uptime_us = prefix_.uptime_us;
  }
  sv body = prefix_.body;
  Match m = Match::none;
  if (last_error_line) {
    if (line_no_ == last_error_line + 1) m = recognise_last_error(*this, body);
    last_error_line = 0;
  }
  // Only the recognisers whose trigger words occur in the line; most lines of a job log are
  // NCCL INFO, most of the rest match nothing.
  const uint32_t t = triggers;
  if (m == Match::none && ((t & kIbDiag) || !ib_table.empty())) m = recognise_ib_diagnostics(*this, body);
  if (m == Match::none && (t & (kNcclMark | kNetIb))) m = recognise_nccl(*this, body);
  if (m == Match::none && (t & (kTorch | kPythonError | kGotCompletion))) m = recognise_pytorch(*this, body);
  if (m == Match::none && switch_context()) m = recognise_switch(*this, body);
  if (m == Match::none && (t & kKernel)) m = recognise_kernel(*this, body);
  if (m == Match::none && !switch_context() && (t & (kPort | kSairedis))) m = recognise_switch(*this, body);
  if (m == Match::none && ((t & kBmc) || memchr(body.data(), '|', body.size()))) m = recognise_bmc(*this, body);
  if (m == Match::none) m = recognise_ras_text(*this, body);
  switch (m) {
    case Match::none: ++out_.stats.unknown; break;
    case Match::damaged: ++out_.stats.damaged; break;
    case Match::known: ++out_.stats.recognised; break;
  }
}

void LineParser::finish() {
  flush_join();
  finish_ras_block(*this);
  auto& events = out_.events;
  auto& notes = out_.stats.notes;
  const TimeContext& tc = options_.time;
  // 1. Kernel uptimes -> wall time, from lines of this file that carry both.
  if (!uptime_pairs_.empty()) {
    std::vector<int64_t> boots;
    for (auto [wall, up] : uptime_pairs_) boots.push_back(wall - up);
    std::nth_element(boots.begin(), boots.begin() + boots.size() / 2, boots.end());
    int64_t boot = boots[boots.size() / 2];
    for (size_t i : uptime_only_) {
      Event& e = events[i];
      e.time_us = boot + e.attr_int("uptime_us", 0);
      e.time_confidence_s = 1;
      if (uptime_pairs_local_) local_.push_back(i);
    }
    uptime_only_.clear();
  }
  // 2. Events before the first dated line take the first date of the file.
  if (!untimed_.empty()) {
    int64_t first = kUnknownTime;
    bool local = false, yearless = false;
    for (const Event& e : events)
      if (e.has_time() && (first == kUnknownTime || e.time_us < first)) first = e.time_us;
    for (size_t i : local_) local = local || events[i].time_us == first;
    for (size_t i : yearless_) yearless = yearless || events[i].time_us == first;
    if (first != kUnknownTime)
      for (size_t i : untimed_) {
        events[i].time_us = first;
        events[i].time_confidence_s = kInheritedConfidenceS;
        if (local) local_.push_back(i);
        if (yearless) yearless_.push_back(i);
      }
  }
  // 3. Year-less dates: a date after the file was written belongs to the year before.
  if (tc.year == 0 && tc.reference_us != kUnknownTime) {
    size_t shifted = 0;
    for (size_t i : yearless_) {
      Event& e = events[i];
      if (e.time_us > tc.reference_us + 2 * 86400000000LL + 14 * 3600000000LL) {
        e.time_us = shift_years(e.time_us, -1);
        ++shifted;
      }
    }
    if (shifted) notes.push_back("year-less dates after the file time placed in the year before");
  } else if (tc.year == 0 && !yearless_.empty()) {
    notes.push_back("year-less dates and no file time: year " + std::to_string(year_) + " assumed");
  }
  // 4. Zone of local times.
  std::sort(local_.begin(), local_.end());
  local_.erase(std::unique(local_.begin(), local_.end()), local_.end());
  int64_t offset_s = 0;
  std::optional<int64_t> guess;
  if (!tc.tz_known && !local_.empty() && tc.reference_us != kUnknownTime) {
    int64_t latest = kUnknownTime;
    for (size_t i : local_)  // BMC clocks are their own: they do not reveal the host's zone
      if (events[i].layer != Layer::bmc) latest = std::max(latest, events[i].time_us);
    // A file is written as its lines happen: the latest local time minus the file time is
    // the zone offset (whole or half hours), plus a little lag.
    if (latest != kUnknownTime) {  // only BMC lines are local: nothing to learn the zone from
      int64_t diff_s = (latest - tc.reference_us) / 1000000;
      int64_t half_hours = (diff_s + (diff_s >= 0 ? 900 : -900)) / 1800;
      int64_t residual = diff_s - half_hours * 1800;
      if (std::abs(half_hours) <= 28 && residual > -300 && residual < 120) guess = half_hours * 1800;
    }
  }
  const bool deferred = options_.defer_zone && !tc.tz_known;
  if (tc.tz_known) {
    offset_s = tc.tz_offset_s;
  } else if (deferred) {
    out_.zone_guess_s = guess;
  } else if (guess) {
    offset_s = *guess;
    if (offset_s) notes.push_back("zone " + format_offset(offset_s) + " inferred from the file time");
  } else if (!local_.empty()) {
    notes.push_back("zone unknown; UTC assumed (use --tz)");
  }
  if (offset_s != 0)
    for (size_t i : local_) events[i].time_us -= offset_s * 1000000;
  for (size_t i : local_) out_.local_events.push_back(uint32_t(i));
  for (size_t i : yearless_) out_.yearless_events.push_back(uint32_t(i));
  if (deferred) {  // the file time cannot bound them before the zone is known
    for (size_t i : inherited_) events[i].time_confidence_s = std::max(events[i].time_confidence_s, 1800.0);
    inherited_.clear();
  }
  // 4b. Events after the last dated line happened before the file was last written.
  if (!inherited_.empty() && tc.reference_us != kUnknownTime) {
    for (size_t i : inherited_) {
      Event& e = events[i];
      int64_t upper = tc.reference_us;
      if (upper > e.time_us && upper - e.time_us < 2 * 86400000000LL) {
        e.time_confidence_s = double(upper - e.time_us) / 2e6 + 1;
        e.time_us += (upper - e.time_us) / 2;
      }
    }
  }
  inherited_.clear();
  // 5. Uptime anchors for the bundle (other dmesg dumps of the same host).
  if (!uptime_pairs_.empty()) {
    std::vector<int64_t> boots;
    for (auto [wall, up] : uptime_pairs_) boots.push_back(wall - up - (uptime_pairs_local_ ? offset_s * 1000000 : 0));
    std::nth_element(boots.begin(), boots.begin() + boots.size() / 2, boots.end());
    out_.uptime_anchors.push_back({options_.default_host, boots[boots.size() / 2], deferred && uptime_pairs_local_});
  }
  // 6. Dmesg with uptimes only: the bundle may date them from another file of the host;
  //    meanwhile, the last line is taken to be written at the file time.
  if (!uptime_only_.empty() && tc.reference_us != kUnknownTime) {
    int64_t max_up = 0;
    for (size_t i : uptime_only_) max_up = std::max(max_up, events[i].attr_int("uptime_us", 0));
    for (size_t i : uptime_only_) {
      Event& e = events[i];
      e.time_us = tc.reference_us - max_up + e.attr_int("uptime_us", 0);
      e.time_confidence_s = kUptimeGuessConfidenceS;
      e.set_attr("time_from", "file_time");
    }
    notes.push_back("kernel uptimes dated from the file time (low confidence)");
  }
  out_.stats.events = events.size();
}

}  // namespace astral::monitor
