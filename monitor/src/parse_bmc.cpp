// BMC System Event Log (`ipmitool sel elist`, log-formats.md §4.5) and the OpenBMC log-util
// form; also `ibdev2netdev` lines, which name which netdev belongs to which mlx5 device.
#include <array>
#include <string>
#include <vector>

#include "line_parser.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

constexpr double kBmcClockConfidenceS = 300;  // BMC clocks are often skewed or unset

// Offsets of the zone abbreviations BMCs print (seconds east of UTC); nullopt if unknown.
std::optional<int64_t> zone_offset(sv z) {
  struct Zone {
    sv name;
    int64_t offset_s;
  };
  static const Zone zones[] = {{"UTC", 0},        {"GMT", 0},        {"Z", 0},          {"CET", 3600},
                               {"CEST", 7200},    {"EET", 7200},     {"EEST", 10800},   {"BST", 3600},
                               {"EST", -18000},   {"EDT", -14400},   {"CST", -21600},   {"CDT", -18000},
                               {"MST", -25200},   {"MDT", -21600},   {"PST", -28800},   {"PDT", -25200},
                               {"JST", 32400},    {"KST", 32400},    {"IST", 19800},    {"SGT", 28800},
                               {"HKT", 28800},    {"AEST", 36000},   {"AEDT", 39600}};
  for (const Zone& zone : zones)
    if (zone.name == z) return zone.offset_s;
  return std::nullopt;
}

// Power transitions an operator or the scheduler asked for: the Power Unit's "Power off/down" and
// the ACPI soft-off states are routine rows, not hardware faults (AC loss and power-unit failures are).
bool routine_power_row(const std::string& low) {
  const bool power_sensor = contains(low, "power unit") || contains(low, "acpi") || contains(low, "system power");
  return power_sensor && (contains(low, "power off") || contains(low, "soft-off") || contains(low, "s4/s5") ||
                          contains(low, "s5/g2") || contains(low, "power cycle") || contains(low, "power on")) &&
         !contains(low, "ac lost") && !contains(low, "failure") && !contains(low, "fault");
}

Severity sel_severity(const std::string& low, bool deasserted) {
  if (deasserted || routine_power_row(low)) return Severity::info;
  static const char* critical[] = {"uncorrectable", "fatal", "ierr", "machine check", "non-recoverable",
                                   "critical going", "failure detected", "power off", "ac lost", "thermal trip"};
  static const char* error[] = {"failure", "fault", "error", "critical", "predictive", "lower critical",
                                "upper critical", "timeout"};
  static const char* warning[] = {"correctable", "non-critical", "degraded", "throttl", "warning"};
  for (const char* w : critical)
    if (contains(low, w)) return contains(low, "correctable") && !contains(low, "uncorrectable") ? Severity::warning
                                                                                                : Severity::critical;
  for (const char* w : error)
    if (contains(low, w)) return Severity::error;
  for (const char* w : warning)
    if (contains(low, w)) return Severity::warning;
  return Severity::info;
}

ComponentKind sel_component(const std::string& sensor_low) {
  if (contains(sensor_low, "power supply") || contains(sensor_low, "psu")) return ComponentKind::psu;
  return ComponentKind::host;
}

// "  89 | 08/31/2016 | 06:20:30 | Processor #0xc9 | IERR | Asserted"
Match sel_elist(LineParser& p, sv body) {
  std::vector<sv> f;
  sv t = body;
  while (true) {
    size_t bar = t.find('|');
    f.push_back(trim(t.substr(0, bar)));
    if (bar == sv::npos) break;
    t.remove_prefix(bar + 1);
  }
  if (f.size() < 5 || f[0].empty()) return Match::none;
  for (char c : f[0])
    if (!is_hex(c)) return Match::none;
  sv date = f[1], clock = f[2];
  bool pre_init = contains(date, "Pre-Init");
  if (!pre_init) {
    sv d = date;
    int64_t mo = take_uint(d).value_or(-1);
    int64_t day = take(d, '/') ? take_uint(d).value_or(-1) : -1;
    int64_t year = take(d, '/') ? take_uint(d).value_or(-1) : -1;
    sv c = clock;
    int64_t tod = take_clock(c).value_or(-1);
    // ipmitool writes four-digit years; a longer one would overflow the microsecond clock.
    if (mo < 1 || mo > 12 || day < 1 || day > 31 || year < 0 || year > 9999 || tod < 0) return Match::damaged;
    int64_t y = year < 100 ? 2000 + year : year;
    int64_t wall = days_from_civil(y, unsigned(mo), unsigned(day)) * 86400000000LL + tod;
    c = trim(c);
    auto offset = c.empty() ? std::nullopt : zone_offset(c);
    if (offset) p.set_line_time(wall - *offset * 1000000, false, false, kBmcClockConfidenceS);
    else p.set_line_time(wall, true, false, kBmcClockConfidenceS);
  }
  sv sensor = f[3], what = f[4];
  sv direction = f.size() > 5 ? f[5] : sv{};
  std::string low = to_lower(std::string(sensor) + " " + std::string(what));
  const Severity sev = sel_severity(low, contains(direction, "Deasserted"));
  const sv kind = routine_power_row(low) ? "bmc_power_state" : "sel_event";
  Event& e = pre_init ? p.emit_undated(Layer::bmc, sev, kind, sel_component(to_lower(sensor)), body)
                      : p.emit(Layer::bmc, sev, kind, sel_component(to_lower(sensor)), body);
  e.component.device = std::string(sensor);
  e.set_attr("sensor", std::string(sensor));
  e.set_attr("event", std::string(what));
  if (!direction.empty()) e.set_attr("direction", std::string(direction));
  if (pre_init) e.set_attr("time", "pre-init");  // BMC clock not set: no usable time
  return Match::known;
}

// OpenBMC log-util: "3    slot3    2022-09-20 01:52:58    ipmid            SEL Entry: ..."
Match openbmc(LineParser& p, sv body) {
  size_t at = find(body, "SEL Entry:");
  size_t date = body.find("20");
  while (date != sv::npos && date < at && !(date + 19 <= body.size() && body[date + 4] == '-'))
    date = body.find("20", date + 1);
  if (date == sv::npos || date > at) return Match::damaged;
  if (auto t = parse_rfc3339(body.substr(date, 19))) p.set_line_time(*t, true, false, kBmcClockConfidenceS);
  sv entry = trim(body.substr(at + 10));
  std::string low = to_lower(entry);
  Event& e = p.emit(Layer::bmc, sel_severity(low, false), "sel_event", ComponentKind::host, body);
  e.set_attr("event", std::string(entry));
  return Match::known;
}

// "mlx5_0 port 1 ==> ib0 (Up)" and the -v form with the PCI address first.
Match ibdev2netdev(LineParser& p, sv body) {
  sv left = body.substr(0, body.find("==>"));
  sv right = trim(body.substr(body.find("==>") + 3));
  std::string bdf, dev;
  sv t = left;
  while (!t.empty()) {
    sv w = take_word(t);
    if (w.empty()) break;
    if (starts_with(w, "mlx") || starts_with(w, "ib") || contains(w, "_")) {
      if (dev.empty() && names::nic_ordinal(w) >= 0) dev = std::string(w);
    }
    if (bdf.empty() && !names::canonical_pci(w).empty() && w.find(':') != sv::npos && w.size() >= 7)
      bdf = names::canonical_pci(w);
  }
  auto port = int_after(left, "port ");
  sv r = right;
  sv netdev = take_word(r);
  if (dev.empty() || netdev.empty()) return Match::damaged;
  std::string key = "map:" + std::string(p.host()) + ":" + dev + ":" + std::string(netdev);
  if (!p.seen.insert(key).second) return Match::known;
  Event& e = p.emit(Layer::kernel, Severity::debug, "nic_map", ComponentKind::nic, body);
  e.component.device = dev;
  e.set_attr("netdev", std::string(netdev));
  if (port) e.component.port = std::to_string(*port);
  if (!bdf.empty()) e.set_attr("bdf", bdf);
  e.set_attr("state", std::string(trim(r)));
  return Match::known;
}

}  // namespace

Match recognise_bmc(LineParser& p, sv body) {
  if (contains(body, "==>") && contains(body, " port ")) return ibdev2netdev(p, body);
  if (contains(body, "SEL Entry:")) return openbmc(p, body);
  size_t bars = 0;
  for (char c : body.substr(0, 200)) bars += c == '|';
  if (bars >= 4) return sel_elist(p, body);
  return Match::none;
}

}  // namespace astral::monitor
