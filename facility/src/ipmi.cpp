// ipmitool output parsers (lib/ipmi_dcmi.c, lib/ipmi_sdr.c printf formats; facility-formats.md
// §2.3-2.4) and the runner. Parsing is by key, never by column position.
#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "astral/facility/local.hpp"
#include "process.hpp"
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

std::optional<double> number_after(const std::string& text, const std::regex& re) {
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return std::stod(m[1]);
}

bool is_power_supply(const SdrRecord& r) {
  // IPMI entity id 10 is "power supply"; names are the fallback.
  if (r.entity.rfind("10.", 0) == 0) return true;
  std::string n = r.name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::toupper(c); });
  return n.rfind("PSU", 0) == 0 || n.rfind("PS ", 0) == 0 || std::regex_search(n, std::regex("^PS[0-9]"));
}

}  // namespace

std::optional<DcmiPowerReading> parse_dcmi_power_reading(const std::string& text, std::string* error) {
  static const std::regex kCurrent(R"(Instantaneous power reading:\s*(-?\d+)\s*Watts)");
  static const std::regex kMin(R"(Minimum during sampling period:\s*(-?\d+)\s*Watts)");
  static const std::regex kMax(R"(Maximum during sampling period:\s*(-?\d+)\s*Watts)");
  static const std::regex kAvg(R"(Average power reading over sample period:\s*(-?\d+)\s*Watts)");
  static const std::regex kPeriod(R"(Sampling period:\s*(\d+)\s*Seconds)");
  static const std::regex kState(R"(Power reading state is:\s*(activated|deactivated))");
  // 1.8.19 glues "Sampling period" onto the timestamp line (no newline after the timestamp).
  static const std::regex kStamp(R"(IPMI timestamp:\s*(.*?)(\s{2,}Sampling period:|\n|$))");
  DcmiPowerReading r;
  auto current = number_after(text, kCurrent);
  std::smatch state;
  if (!current || !std::regex_search(text, state, kState)) {
    if (error) *error = "not `ipmitool dcmi power reading` output (no instantaneous reading or reading state)";
    return std::nullopt;
  }
  r.current_w = *current;
  r.active = state[1] == "activated";
  r.minimum_w = number_after(text, kMin).value_or(0);
  r.maximum_w = number_after(text, kMax).value_or(0);
  r.average_w = number_after(text, kAvg).value_or(0);
  r.sampling_period_s = number_after(text, kPeriod).value_or(0);
  std::smatch stamp;
  if (std::regex_search(text, stamp, kStamp)) r.timestamp = trim(stamp[1].str());
  return r;
}

std::vector<SdrRecord> parse_sdr(const std::string& text) {
  static const std::regex kValue(R"(^(-?[0-9]+(?:\.[0-9]+)?)\s+(.+)$)");
  std::vector<SdrRecord> records;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    std::vector<std::string> fields;
    std::size_t at = 0;
    while (true) {
      auto bar = line.find('|', at);
      fields.push_back(trim(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at)));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    SdrRecord r;
    if (fields.size() == 3) {  // sdr list: name | value unit | status
      r.name = fields[0], r.reading = fields[1], r.status = fields[2];
    } else if (fields.size() == 5) {  // sdr elist: name | 04h | ok | 7.1 | reading
      r.name = fields[0], r.sensor_number = fields[1], r.status = fields[2], r.entity = fields[3], r.reading = fields[4];
    } else {
      continue;
    }
    if (r.name.empty()) continue;
    std::smatch m;
    if (std::regex_match(r.reading, m, kValue)) {
      r.value = std::stod(m[1]);
      r.unit = m[2];
    }
    records.push_back(std::move(r));
  }
  return records;
}

Snapshot ipmi_from_text(const std::string& text, const IpmiOptions& options, const std::string& origin) {
  Snapshot out;
  std::string host = options.host.empty() ? (options.bmc_host.empty() ? local_host_name() : options.bmc_host) : options.host;
  SourceStatus status;
  status.reader = "ipmi";
  status.name = host + ":ipmi";
  auto now = Clock::now();
  auto sample = [&](EntityKind kind, const std::string& entity, const std::string& name, const char* quantity,
                    Unit unit, double value, bool counter = false) {
    Sample s;
    s.time = now;
    s.source = "ipmi";
    s.host = host;
    s.kind = kind;
    s.entity = entity;
    s.name = name;
    s.quantity = quantity;
    s.unit = unit;
    s.value = value;
    s.counter = counter;
    s.origin = origin;
    out.samples.push_back(std::move(s));
  };
  auto alarm = [&](EntityKind kind, const std::string& entity, Severity sev, std::string type, std::string msg) {
    out.add_alarm(Alarm{now, host, kind, entity, sev, std::move(type), std::move(msg), origin, "ipmi"});
  };
  if (text.find("Instantaneous power reading") != std::string::npos) {
    std::string error;
    auto r = parse_dcmi_power_reading(text, &error);
    if (!r) {
      status.error = fmt::format("{}: {}", origin, error);
    } else if (!r->active) {
      status.ok = true;
      out.count_quirk("dcmi_deactivated");
      out.findings.push_back(Finding{host, "dcmi", "dcmi_deactivated",
                                     fmt::format("{}: DCMI power reading is deactivated; its numbers mean nothing", origin)});
    } else {
      status.ok = true;
      if (r->current_w == 0 && !options.zero_is_reading) {
        out.count_quirk("dcmi_zero_reading");
      } else {
        sample(EntityKind::node, "dcmi", "DCMI system power", "power", Unit::watts, r->current_w);
        sample(EntityKind::node, "dcmi", "DCMI system power", "power_minimum", Unit::watts, r->minimum_w);
        sample(EntityKind::node, "dcmi", "DCMI system power", "power_maximum", Unit::watts, r->maximum_w);
        sample(EntityKind::node, "dcmi", "DCMI system power", "power_average", Unit::watts, r->average_w);
      }
    }
    out.sources.push_back(std::move(status));
    return out;
  }
  auto records = parse_sdr(text);
  if (records.empty()) {
    status.error = fmt::format("{}: neither `ipmitool dcmi power reading` nor `ipmitool sdr` output", origin);
    out.sources.push_back(std::move(status));
    return out;
  }
  status.ok = true;
  for (const auto& r : records) {
    bool psu = is_power_supply(r);
    std::string entity = "sdr/" + r.name;
    std::string lower = r.reading;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!r.value) {
      if (lower == "no reading" || lower == "disabled" || lower == "not readable" || r.status == "ns") {
        out.count_quirk("ipmi_no_reading");
        continue;
      }
      // Discrete sensors print event text: PSU failure and input loss are what matters here.
      if (psu && lower.find("failure detected") != std::string::npos)
        alarm(EntityKind::psu, entity, Severity::critical, "psu_fault", fmt::format("{}: {}", r.name, r.reading));
      else if (psu && (lower.find("ac lost") != std::string::npos || lower.find("input lost") != std::string::npos))
        alarm(EntityKind::psu, entity, Severity::error, "psu_input_lost", fmt::format("{}: {}", r.name, r.reading));
      else if (psu && lower.find("predictive failure") != std::string::npos)
        alarm(EntityKind::psu, entity, Severity::warning, "psu_predictive_failure", fmt::format("{}: {}", r.name, r.reading));
      continue;
    }
    std::string unit = r.unit;
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
    EntityKind kind = psu ? EntityKind::psu : EntityKind::sensor;
    const char* quantity = nullptr;
    Unit u = Unit::none;
    double v = *r.value;
    bool counter = false;
    if (unit == "degrees c") quantity = "temperature", u = Unit::celsius;
    else if (unit == "watts") quantity = psu ? "input_power" : "power", u = Unit::watts;
    else if (unit == "volts") quantity = "voltage", u = Unit::volts;
    else if (unit == "amps") quantity = "current", u = Unit::amperes;
    else if (unit == "rpm") quantity = "fan_speed_rpm", u = Unit::rpm, kind = EntityKind::fan;
    else if (unit == "joules") quantity = "energy", u = Unit::joules, counter = true;
    else if (unit == "percent") quantity = "level", u = Unit::ratio, v /= 100;
    if (!quantity) {
      out.count_quirk("ipmi_unknown_unit");
      continue;
    }
    sample(kind, entity, r.name, quantity, u, v, counter);
    // Threshold status from the BMC: c(ritical), n(on-recoverable), nc (non-critical), with u/l.
    const std::string& st = r.status;
    if (st == "ok" || st.empty() || st == "ns") continue;
    bool lower_bound = !st.empty() && st[0] == 'l';
    Severity sev = (st.find("nr") != std::string::npos) ? Severity::critical
                   : (st.find("nc") != std::string::npos) ? Severity::warning
                                                           : Severity::error;
    std::string type = u == Unit::celsius ? (lower_bound ? "under_temperature" : "over_temperature")
                                          : std::string(quantity) + (lower_bound ? "_below_threshold" : "_above_threshold");
    alarm(kind, entity, sev, type, fmt::format("{} reads {} (status {})", r.name, r.reading, st));
  }
  out.sources.push_back(std::move(status));
  return out;
}

Snapshot read_ipmi(const IpmiOptions& options) {
  std::vector<std::string> base{options.ipmitool};
  if (!options.bmc_host.empty()) {
    base.insert(base.end(), {"-I", "lanplus", "-H", options.bmc_host});
    if (!options.username.empty()) base.insert(base.end(), {"-U", options.username});
    base.push_back("-E");  // password from IPMI_PASSWORD, never argv
  }
  Snapshot out;
  std::string host = options.host.empty() ? (options.bmc_host.empty() ? local_host_name() : options.bmc_host) : options.host;
  for (std::vector<std::string> command : {std::vector<std::string>{"dcmi", "power", "reading"},
                                           std::vector<std::string>{"sdr", "elist"}}) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), command.begin(), command.end());
    std::string what = fmt::format("ipmitool {}", fmt::join(command, " "));
    auto r = detail::run_command(argv, options.timeout);
    if (r.not_found) {
      SourceStatus s{host + ":ipmi", "ipmi", false, false,
                     fmt::format("{} not found: install ipmitool, or pass --ipmi-file with recorded output", options.ipmitool)};
      out.sources.push_back(std::move(s));
      return out;
    }
    if (r.timed_out || r.exit_code != 0) {
      std::string why = r.timed_out ? fmt::format("timed out after {} ms", options.timeout.count())
                                    : fmt::format("exit {}: {}", r.exit_code, r.err.substr(0, r.err.find('\n')));
      out.sources.push_back(SourceStatus{host + ":ipmi", "ipmi", false, false, fmt::format("{}: {}", what, why)});
      continue;
    }
    out.merge(ipmi_from_text(r.out, options, what));
  }
  return out;
}

}  // namespace astral::facility
