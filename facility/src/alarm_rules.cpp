#include "alarm_rules.hpp"

#include <algorithm>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility::detail {

using namespace text;  // contains

namespace {

}  // namespace

void raise_threshold_alarms(Snapshot& out, const std::string& host) {
  std::vector<Alarm> raised;
  auto alarmed = [&](const std::string& entity) {
    return std::any_of(out.alarms.begin(), out.alarms.end(),
                       [&](const Alarm& a) { return a.host == host && a.entity == entity; });
  };
  for (const auto& s : out.samples) {
    if (s.host != host || s.limits.empty() || alarmed(s.entity)) continue;
    const auto& l = s.limits;
    bool coolant = s.quantity.rfind("coolant", 0) == 0 || s.kind == EntityKind::cdu ||
                   s.kind == EntityKind::coolant_connector || contains(s.entity, "CDU") ||
                   contains(s.entity, "Coolant");
    std::string what = s.name.empty() ? s.entity : s.name;
    auto raise = [&](Severity sev, const char* bound, double limit, bool upper) {
      std::string type;
      if (contains(s.quantity, "temperature"))
        type = upper ? (coolant ? "coolant_over_temperature" : "over_temperature") : "under_temperature";
      else if (s.quantity == "coolant_flow")
        type = upper ? "coolant_flow_high" : "coolant_flow_low";
      else
        type = s.quantity + (upper ? "_above_threshold" : "_below_threshold");
      Alarm a;
      a.time = s.time;
      a.host = host;
      a.kind = s.kind;
      a.entity = s.entity;
      a.severity = sev;
      a.type = std::move(type);
      a.message = fmt::format("{} {} {}{} is {} the {} threshold {}{}", what, s.quantity, s.value,
                              unit_symbol(s.unit), upper ? "above" : "below", bound, limit,
                              unit_symbol(s.unit));
      a.origin = s.origin;
      a.source = s.source;
      raised.push_back(std::move(a));
    };
    if (l.upper_fatal && s.value >= *l.upper_fatal) raise(Severity::critical, "fatal", *l.upper_fatal, true);
    else if (l.upper_critical && s.value >= *l.upper_critical) raise(Severity::error, "critical", *l.upper_critical, true);
    else if (l.upper_caution && s.value >= *l.upper_caution) raise(Severity::warning, "caution", *l.upper_caution, true);
    if (l.lower_critical && s.value <= *l.lower_critical) raise(Severity::error, "critical", *l.lower_critical, false);
    else if (l.lower_caution && s.value <= *l.lower_caution) raise(Severity::warning, "caution", *l.lower_caution, false);
  }
  for (auto& a : raised) out.add_alarm(std::move(a));
}

}  // namespace astral::facility::detail
