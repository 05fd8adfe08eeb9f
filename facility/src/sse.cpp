// The event-stream format and Redfish Event payloads (docs/facility.md "Pushed alarms").
#include <algorithm>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/facility/eventservice.hpp"
#include "redfish_emit.hpp"

namespace astral::facility {

std::vector<SseMessage> SseParser::feed(std::string_view bytes) {
  std::vector<SseMessage> out;
  for (std::size_t i = 0; i < bytes.size() && !bad(); ++i) {
    char c = bytes[i];
    if (c == '\0') {
      error_ = "a NUL byte in the event stream (not text)";
      break;
    }
    if (c == '\n' && after_cr_) {  // the LF of a CRLF
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\r' || c == '\n') {
      line(partial_, out);
      partial_.clear();
      continue;
    }
    partial_.push_back(c);
    if (partial_.size() > max_) error_ = fmt::format("an event-stream line longer than {} bytes", max_);
  }
  return out;
}

void SseParser::line(std::string_view text, std::vector<SseMessage>& out) {
  if (text.empty()) {  // dispatch
    if (have_data_) out.push_back(std::move(current_));
    current_ = SseMessage{};
    have_data_ = false;
    return;
  }
  if (text.front() == ':') {
    ++comments_;
    return;
  }
  auto colon = text.find(':');
  std::string_view field = text.substr(0, colon), value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (have_data_) current_.data.push_back('\n');
    current_.data.append(value);
    have_data_ = true;
    if (current_.data.size() > max_) error_ = fmt::format("an event larger than {} bytes", max_);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) current_.id = std::string(value);
  } else if (field == "event") {
    current_.event = std::string(value);
  }  // "retry" and unknown fields are ignored, as the format says
}

std::optional<Clock::time_point> parse_rfc3339(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM|±HHMM)
  if (t.size() < 20) return std::nullopt;
  auto digits = [&](std::size_t at, std::size_t n, int& v) {
    v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (i >= t.size() || t[i] < '0' || t[i] > '9') return false;
      v = v * 10 + (t[i] - '0');
    }
    return true;
  };
  int Y, M, D, h, m, s;
  if (!digits(0, 4, Y) || t[4] != '-' || !digits(5, 2, M) || t[7] != '-' || !digits(8, 2, D) ||
      (t[10] != 'T' && t[10] != 't' && t[10] != ' ') || !digits(11, 2, h) || t[13] != ':' || !digits(14, 2, m) ||
      t[16] != ':' || !digits(17, 2, s))
    return std::nullopt;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || s > 60) return std::nullopt;
  std::size_t at = 19;
  long long micros = 0;
  if (at < t.size() && t[at] == '.') {
    std::size_t start = ++at;
    long long scale = 100000;
    while (at < t.size() && t[at] >= '0' && t[at] <= '9') {
      if (scale > 0) micros += (t[at] - '0') * scale, scale /= 10;
      ++at;
    }
    if (at == start) return std::nullopt;
  }
  long offset_s = 0;
  if (at < t.size() && (t[at] == 'Z' || t[at] == 'z')) {
    ++at;
  } else if (at < t.size() && (t[at] == '+' || t[at] == '-')) {
    int oh, om;
    bool colon = at + 3 < t.size() && t[at + 3] == ':';
    if (!digits(at + 1, 2, oh) || !digits(at + (colon ? 4 : 3), 2, om) || oh > 23 || om > 59) return std::nullopt;
    offset_s = (t[at] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
    at += colon ? 6 : 5;
  } else {
    return std::nullopt;
  }
  if (at != t.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = Y - 1900;
  tm.tm_mon = M - 1;
  tm.tm_mday = D;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  const long long seconds = static_cast<long long>(timegm(&tm)) - offset_s;
  // Clock counts nanoseconds in int64_t (1677..2262): a year like 4050 is no time we can hold, and
  // converting it would overflow (found by the facility_events fuzz target).
  constexpr long long kMaxSeconds = std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::max()).count() - 1;
  if (seconds > kMaxSeconds || seconds < -kMaxSeconds) return std::nullopt;
  return Clock::time_point(std::chrono::seconds(seconds)) + std::chrono::microseconds(micros);
}

namespace {

Severity event_severity(const nlohmann::json& r) {
  // MessageSeverity (Health: OK/Warning/Critical) is current; Severity is the deprecated string.
  std::string s = detail::string_of(r, "MessageSeverity", detail::string_of(r, "Severity", "Warning"));
  if (s == "Critical") return Severity::critical;
  if (s == "OK" || s == "Informational") return Severity::info;
  return Severity::warning;
}

}  // namespace

ParsedEvent parse_redfish_event(std::string_view text, const std::string& source, std::string_view sse_id) {
  ParsedEvent out;
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.errors.push_back(fmt::format("{}: event {}: not a JSON object", source, sse_id.empty() ? "?" : std::string(sse_id)));
    return out;
  }
  if (!j.contains("Events") || !j["Events"].is_array()) {
    const std::string id = detail::string_of(j, "Id", std::string(sse_id));
    out.errors.push_back(fmt::format("{}: event {}: no \"Events\" array", source, id.empty() ? "?" : id));
    return out;
  }
  std::string payload_id = j.contains("Id") && j["Id"].is_string() ? j["Id"].get<std::string>() : std::string(sse_id);
  for (std::size_t i = 0; i < j["Events"].size(); ++i) {
    const auto& r = j["Events"][i];
    std::string where = fmt::format("{}: event {} record {}", source, payload_id.empty() ? "?" : payload_id, i);
    if (!r.is_object()) {
      out.errors.push_back(where + ": not an object");
      continue;
    }
    std::string record_id = r.contains("EventId") && r["EventId"].is_string() ? r["EventId"].get<std::string>()
                            : r.contains("MemberId") && r["MemberId"].is_string() ? r["MemberId"].get<std::string>()
                                                                                    : std::string();
    if (payload_id.empty() && record_id.empty()) {
      out.errors.push_back(where + ": no Id, EventId or MemberId (it cannot be deduplicated)");
      continue;
    }
    Clock::time_point when = Clock::now();
    if (r.contains("EventTimestamp")) {
      auto t = r["EventTimestamp"].is_string() ? parse_rfc3339(r["EventTimestamp"].get<std::string>()) : std::nullopt;
      if (!t) {
        out.errors.push_back(fmt::format("{}: EventTimestamp {} is not an RFC 3339 time", where, r["EventTimestamp"].dump()));
        continue;
      }
      when = *t;
    }
    std::string message_id = detail::string_of(r, "MessageId");
    std::string name = message_id.substr(message_id.rfind('.') == std::string::npos ? 0 : message_id.rfind('.') + 1);
    std::string origin = detail::link_of(r, "OriginOfCondition");
    if (origin.empty() && r.contains("OriginOfCondition") && r["OriginOfCondition"].is_string())
      origin = r["OriginOfCondition"].get<std::string>();  // older services send the URI itself
    EntityKind kind = detail::kind_from_path(origin, EntityKind::chassis);
    std::string type = detail::alarm_type_for_message(name, kind);
    Severity sev = event_severity(r);
    if (type.empty() || sev == Severity::info) continue;  // a clearing or informational message
    Alarm a;
    a.time = when;
    a.host = source;
    a.kind = kind;
    a.entity = origin.empty() ? std::string() : detail::entity_id(origin);
    a.severity = sev;
    a.type = type;
    a.message = detail::string_of(r, "Message", message_id);
    a.origin = origin;
    a.source = "redfish-event";
    out.alarms.push_back(std::move(a));
    // EventId identifies the event itself (the same event resent in another payload is a
    // duplicate); without it, the payload Id and the record's MemberId do.
    bool has_event_id = r.contains("EventId") && r["EventId"].is_string() && !r["EventId"].get<std::string>().empty();
    out.ids.push_back(has_event_id ? "event:" + record_id : "payload:" + payload_id + "/" + record_id);
  }
  return out;
}

bool EventDeduper::first_time(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!seen_.insert(key).second) return false;
  order_.push_back(key);
  if (order_.size() > capacity_) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

}  // namespace astral::facility
