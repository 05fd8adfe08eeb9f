#include "astral/monitor/event.hpp"

#include <array>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "text.hpp"

namespace astral::monitor {
namespace {
constexpr std::array<std::string_view, 7> kLayers = {"facility", "bmc",     "switch", "kernel",
                                                     "nccl",     "pytorch", "astral"};
constexpr std::array<std::string_view, 5> kSeverities = {"debug", "info", "warning", "error",
                                                         "critical"};
constexpr std::array<std::string_view, 19> kComponentKindNames = {
    "",        "gpu",    "nic", "port", "link",      "switch_port", "optic", "switch",
    "host",    "process", "psu", "pdu",  "rectifier", "cdu",         "pump",  "rack",
    "cooling_loop", "power_shelf", "feed"};

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s && !s.empty()) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace

std::string_view to_string(Layer l) { return kLayers[size_t(l)]; }
std::string_view to_string(Severity s) { return kSeverities[size_t(s)]; }
std::string_view to_string(ComponentKind k) { return kComponentKindNames[size_t(k)]; }
std::optional<Layer> parse_layer(std::string_view s) { return lookup<Layer>(kLayers, s); }
std::optional<Severity> parse_severity(std::string_view s) {
  if (s == "warn") return Severity::warning;
  if (s == "fatal") return Severity::critical;
  return lookup<Severity>(kSeverities, s);
}
std::optional<ComponentKind> parse_component_kind(std::string_view s) {
  return lookup<ComponentKind>(kComponentKindNames, s);
}

std::string_view Event::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return v;
  return {};
}

int64_t Event::attr_int(std::string_view key, int64_t fallback) const {
  std::string_view v = attr(key);
  if (v.empty()) return fallback;
  auto n = text::take_int(v);
  return n ? *n : fallback;
}

void Event::set_attr(std::string_view key, std::string value) {
  for (auto& [k, v] : attrs)
    if (k == key) {
      v = std::move(value);
      return;
    }
  if (attrs.empty()) attrs.reserve(4);  // one allocation for the usual few
  attrs.emplace_back(std::string(key), std::move(value));
}

std::string format_time(int64_t t) {
  if (t == kUnknownTime) return {};
  int64_t days = t >= 0 ? t / 86400000000LL : -((-t + 86400000000LL - 1) / 86400000000LL);
  int64_t rem = t - days * 86400000000LL;
  auto c = text::civil_from_days(days);
  int64_t secs = rem / 1000000, us = rem % 1000000;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%06lldZ",
                static_cast<long long>(c.year), c.month, c.day,
                static_cast<long long>(secs / 3600), static_cast<long long>(secs / 60 % 60),
                static_cast<long long>(secs % 60), static_cast<long long>(us));
  return buf;
}

std::optional<int64_t> parse_rfc3339(std::string_view s) {
  using namespace text;
  s = trim(s);
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ')) return {};
  auto num = [&](size_t at, size_t n) -> int {
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (!is_digit(s[i])) return -1;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  int y = num(0, 4), mo = num(5, 2), d = num(8, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31) return {};
  sv rest = s.substr(11);
  auto clock = take_clock(rest);
  if (!clock) return {};
  int64_t t = days_from_civil(y, unsigned(mo), unsigned(d)) * 86400000000LL + *clock;
  if (rest.empty() || rest == "Z" || rest == "z") return t;
  if (rest[0] == '+' || rest[0] == '-') {
    int sign = rest[0] == '-' ? -1 : 1;
    rest.remove_prefix(1);
    if (rest.size() < 2 || !is_digit(rest[0]) || !is_digit(rest[1])) return {};
    int hh = (rest[0] - '0') * 10 + (rest[1] - '0');
    rest.remove_prefix(2);
    take(rest, ':');
    int mm = 0;
    if (rest.size() >= 2 && is_digit(rest[0]) && is_digit(rest[1]))
      mm = (rest[0] - '0') * 10 + (rest[1] - '0');
    return t - sign * (int64_t(hh) * 60 + mm) * 60000000LL;
  }
  return {};
}

nlohmann::json to_json(const Event& e, std::string_view file_name) {
  nlohmann::json j;
  j["time"] = format_time(e.time_us);
  j["time_confidence_s"] = e.time_confidence_s;
  j["host"] = e.host;
  j["layer"] = to_string(e.layer);
  nlohmann::json c = nlohmann::json::object();
  if (e.component.kind != ComponentKind::none) c["kind"] = to_string(e.component.kind);
  if (!e.component.host.empty()) c["host"] = e.component.host;
  if (!e.component.device.empty()) c["device"] = e.component.device;
  if (!e.component.switch_name.empty()) c["switch"] = e.component.switch_name;
  if (!e.component.port.empty()) c["port"] = e.component.port;
  if (e.component.rank >= 0) c["rank"] = e.component.rank;
  j["component"] = std::move(c);
  j["severity"] = to_string(e.severity);
  j["kind"] = e.kind;
  j["message"] = e.message;
  nlohmann::json k = nlohmann::json::object();
  if (e.keys.comm_hash) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(*e.keys.comm_hash));
    k["comm_hash"] = buf;
  }
  if (e.keys.seq >= 0) k["seq"] = e.keys.seq;
  if (e.keys.rank >= 0) k["rank"] = e.keys.rank;
  if (e.keys.peer >= 0) k["peer"] = e.keys.peer;
  if (!e.keys.process_group.empty()) k["process_group"] = e.keys.process_group;
  if (e.keys.channel >= 0) k["channel"] = e.keys.channel;
  if (!e.keys.request_id.empty()) k["request_id"] = e.keys.request_id;
  if (e.keys.xid >= 0) k["xid"] = e.keys.xid;
  j["keys"] = std::move(k);
  if (!e.attrs.empty()) {
    nlohmann::json a = nlohmann::json::object();
    for (const auto& [key, value] : e.attrs) a[key] = value;
    j["attrs"] = std::move(a);
  }
  j["source"] = {{"file", file_name}, {"line", e.line}};
  return j;
}

namespace {
std::string str_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  throw std::runtime_error(std::string("field '") + key + "' is not a string");
}
int int_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  if (it->is_number_integer()) return it->get<int>();
  if (it->is_string()) {
    std::string_view s = it->get_ref<const std::string&>();
    auto v = text::take_int(s);
    if (v) return int(*v);
  }
  throw std::runtime_error(std::string("field '") + key + "' is not an integer");
}
// A JSON array of strings as "a,b,c" (facility keys.racks / keys.hosts).
std::string joined_strings(const nlohmann::json& list, const char* key) {
  std::string out;
  for (const auto& v : list) {
    if (!v.is_string()) throw std::runtime_error(std::string("keys.") + key + " holds a non-string");
    if (!out.empty()) out += ',';
    out += v.get<std::string>();
  }
  return out;
}
}  // namespace

Event event_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("event is not a JSON object");
  Event e;
  std::string time = str_field(j, "time");
  if (!time.empty()) {
    auto t = parse_rfc3339(time);
    if (!t) throw std::runtime_error("field 'time' is not RFC 3339: " + time);
    e.time_us = *t;
  }
  if (auto it = j.find("time_confidence_s"); it != j.end() && it->is_number())
    e.time_confidence_s = it->get<double>();
  e.host = str_field(j, "host");
  if (auto layer = parse_layer(str_field(j, "layer"))) e.layer = *layer;
  else throw std::runtime_error("field 'layer' missing or unknown");
  if (auto it = j.find("component"); it != j.end() && it->is_object()) {
    std::string kind = str_field(*it, "kind");
    if (!kind.empty()) {
      auto k = parse_component_kind(kind);
      if (!k) throw std::runtime_error("component.kind unknown: " + kind);
      e.component.kind = *k;
    }
    e.component.host = str_field(*it, "host");
    e.component.device = str_field(*it, "device");
    e.component.switch_name = str_field(*it, "switch");
    e.component.port = str_field(*it, "port");
    e.component.rank = int_field(*it, "rank");
    // Where a facility alarm sits in the site layout (facility/events.hpp): kept as attributes.
    if (std::string site = str_field(*it, "site"); !site.empty()) e.set_attr("site", std::move(site));
  }
  if (e.component.host.empty() && e.component.kind != ComponentKind::switch_ &&
      e.component.kind != ComponentKind::switch_port)
    e.component.host = e.host;
  std::string severity = str_field(j, "severity");
  auto sev = parse_severity(severity);
  if (!sev) throw std::runtime_error("field 'severity' missing or unknown: " + severity);
  e.severity = *sev;
  e.kind = str_field(j, "kind");
  if (e.kind.empty()) throw std::runtime_error("field 'kind' missing");
  e.message = str_field(j, "message");
  if (auto it = j.find("keys"); it != j.end() && it->is_object()) {
    std::string hash = str_field(*it, "comm_hash");
    if (!hash.empty()) {
      std::string_view h = hash;
      auto v = text::take_hex(h);
      if (v) e.keys.comm_hash = *v;
    }
    if (auto s = it->find("seq"); s != it->end() && s->is_number_integer()) e.keys.seq = s->get<int64_t>();
    e.keys.rank = int_field(*it, "rank");
    e.keys.peer = int_field(*it, "peer");
    e.keys.process_group = str_field(*it, "process_group");
    e.keys.channel = int_field(*it, "channel");
    e.keys.request_id = str_field(*it, "request_id");
    e.keys.xid = int_field(*it, "xid");
    if (std::string kind = str_field(*it, "site_kind"); !kind.empty()) e.set_attr("site_kind", std::move(kind));
    for (const char* list : {"racks", "hosts"})
      if (auto l = it->find(list); l != it->end() && l->is_array()) e.set_attr(list, joined_strings(*l, list));
  }
  if (auto it = j.find("attrs"); it != j.end() && it->is_object())
    for (auto& [k, v] : it->items()) e.attrs.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  if (auto it = j.find("source"); it != j.end() && it->is_object()) {
    int line = int_field(*it, "line");
    if (line > 0) e.line = uint32_t(line);
  }
  return e;
}

}  // namespace astral::monitor
