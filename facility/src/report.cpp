#include "astral/facility/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace astral::facility {

namespace {

std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

}  // namespace

std::string human_value(double v, Unit unit) {
  double a = std::fabs(v);
  switch (unit) {
    case Unit::watts:
      if (a >= 1e6) return trim_zeros(fmt::format("{:.3f}", v / 1e6)) + " MW";
      if (a >= 1e4) return trim_zeros(fmt::format("{:.2f}", v / 1e3)) + " kW";
      return trim_zeros(fmt::format("{:.1f}", v)) + " W";
    case Unit::volt_amperes:
      if (a >= 1e4) return trim_zeros(fmt::format("{:.2f}", v / 1e3)) + " kVA";
      return trim_zeros(fmt::format("{:.1f}", v)) + " VA";
    case Unit::joules:
      if (a >= 3.6e7) return trim_zeros(fmt::format("{:.1f}", v / 3.6e6)) + " kWh";
      if (a >= 3.6e5) return trim_zeros(fmt::format("{:.3f}", v / 3.6e6)) + " kWh";
      if (a >= 1e4) return trim_zeros(fmt::format("{:.2f}", v / 1e3)) + " kJ";
      return trim_zeros(fmt::format("{:.1f}", v)) + " J";
    case Unit::pascals:
      return trim_zeros(fmt::format("{:.1f}", v / 1000)) + " kPa";
    case Unit::ratio:
      return trim_zeros(fmt::format("{:.1f}", v * 100)) + " %";
    case Unit::celsius:
      return trim_zeros(fmt::format("{:.1f}", v)) + " °C";
    case Unit::none:
      return trim_zeros(fmt::format("{:.3f}", v));
    default:
      return trim_zeros(fmt::format("{:.3f}", v)) + " " + unit_symbol(unit);
  }
}

void print_read(std::ostream& out, const Snapshot& s, const Derived& d, bool all) {
  out << "Sources\n";
  for (const auto& src : s.sources) {
    if (src.ok)
      out << fmt::format("  {:<7} {:<8} {:<28} {} request(s), {:.2f} s\n", src.partial ? "partial" : "ok", src.reader,
                         src.name, src.requests, src.seconds);
    else
      out << fmt::format("  {:<7} {:<8} {:<28} {}\n", src.reader == "nvml" ? "skipped" : "FAILED", src.reader, src.name, src.error);
  }
  // One line per entity, in the order the sources reported them.
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<const Sample*>> by_entity;
  for (const auto& x : s.samples) {
    auto key = std::make_pair(x.host, x.entity);
    if (!by_entity.count(key)) order.push_back(key);
    by_entity[key].push_back(&x);
  }
  if (!order.empty()) out << "\nReadings\n";
  for (const auto& key : order) {
    const auto& xs = by_entity[key];
    std::vector<std::string> parts;
    for (const Sample* x : xs) {
      if (!all && x->quantity == "health" && x->value == 0) continue;
      if (!all && x->quantity == "leak_state" && x->value == 0) continue;
      std::string v = x->quantity == "health" ? (x->value >= 2 ? "Critical" : x->value >= 1 ? "Warning" : "OK")
                                              : human_value(x->value, x->unit);
      if (x->quantity.find("delta_temperature") != std::string::npos) v = v.substr(0, v.find(' ')) + " K";
      std::string part = x->quantity + " " + v;
      if (all && x->limits.upper_critical) part += " (critical at " + human_value(*x->limits.upper_critical, x->unit) + ")";
      parts.push_back(part);
    }
    if (parts.empty()) continue;
    const Sample* first = xs.front();
    out << fmt::format("  {} · {} ({}{})\n      {}\n", key.first, key.second, first->name.empty() ? "" : first->name + ", ",
                       to_string(first->kind), fmt::join(parts, ", "));
  }
  if (!d.racks.empty()) out << "\nRacks\n";
  for (const auto& r : d.racks) {
    if (r.meters.empty() && !r.budget_w && !r.heat_removed_w) {
      out << fmt::format("  {}: no power reading among the sources\n", r.name);
      continue;
    }
    out << fmt::format("  {}: IT power {} from {} meter(s) ({})", r.name, human_value(r.it_power_w, Unit::watts),
                       r.meters.size(), r.basis.empty() ? "none" : r.basis);
    if (r.budget_w)
      out << fmt::format(", budget {} ({:.0f} %, headroom {})", human_value(*r.budget_w, Unit::watts),
                         *r.budget_ratio * 100, human_value(*r.headroom_w, Unit::watts));
    out << "\n";
    if (r.facility_power_w)
      out << fmt::format("      facility power {} → instantaneous PUE {:.3f} (an interim indicator; the PUE is from energy: astral facility pue)\n",
                         human_value(*r.facility_power_w, Unit::watts), r.pue_instantaneous.value_or(0));
    if (r.heat_removed_w)
      out << fmt::format("      liquid loops remove {}{}\n", human_value(*r.heat_removed_w, Unit::watts),
                         r.capture_ratio ? fmt::format(" → heat capture ratio {:.2f} of IT power", *r.capture_ratio) : "");
  }
  if (!d.conversions.empty()) out << "\nPower conversion\n";
  for (const auto& c : d.conversions)
    out << fmt::format("  {} · {}: in {}, out {}, loss {}, efficiency {:.1f} %\n", c.host, c.name, human_value(c.input_w, Unit::watts),
                       human_value(c.output_w, Unit::watts), human_value(c.loss_w(), Unit::watts), c.efficiency() * 100);
  if (!d.conversions.empty()) out << fmt::format("  total measured conversion loss {}\n", human_value(d.conversion_loss_w(), Unit::watts));
  if (d.chains) {
    const auto& c = *d.chains;
    out << fmt::format("\nAC versus HVDC chain for {} of IT load (configured stage efficiencies)\n",
                       human_value(c.ac.input_w * c.ac.efficiency, Unit::watts));
    for (const auto* chain : {&c.ac, &c.hvdc}) {
      std::vector<std::string> stages;
      for (const auto& [name, loss] : chain->stage_loss_w) stages.push_back(name + " " + human_value(loss, Unit::watts));
      out << fmt::format("  {:<4} efficiency {:.1f} %: grid {}, loss {} ({})\n", chain->name, chain->efficiency * 100,
                         human_value(chain->input_w, Unit::watts), human_value(chain->loss_w, Unit::watts), fmt::join(stages, ", "));
    }
    out << fmt::format("  HVDC saves {} ({:.1f} %), {:.0f} kWh a year at this load\n", human_value(c.saved_w, Unit::watts),
                       c.saved_ratio * 100, c.saved_kwh_per_year);
  }
  if (!d.cooling.empty() || !d.cdus.empty()) out << "\nCooling balance\n";
  for (const auto& c : d.cooling) {
    out << fmt::format("  {} · {}:", c.host, c.entity);
    if (c.flow_lpm) out << fmt::format(" {} L/min", trim_zeros(fmt::format("{:.1f}", *c.flow_lpm)));
    if (c.delta_t_k) out << fmt::format(", ΔT {} K", trim_zeros(fmt::format("{:.1f}", *c.delta_t_k)));
    if (c.heat_computed_w)
      out << fmt::format(" → {} computed ({} kg/m³, {} J/(kg·K): {})", human_value(*c.heat_computed_w, Unit::watts), c.density,
                         c.specific_heat, c.coolant);
    if (c.heat_reported_w) out << fmt::format("; reports {}", human_value(*c.heat_reported_w, Unit::watts));
    out << "\n";
  }
  for (const auto& c : d.cdus) {
    out << fmt::format("  CDU {} · {}", c.host, c.name);
    if (c.capacity_w) out << ": capacity " << human_value(*c.capacity_w, Unit::watts);
    if (c.heat_w) out << ", rack-side heat " << human_value(*c.heat_w, Unit::watts);
    if (c.headroom_w) out << ", headroom " << human_value(*c.headroom_w, Unit::watts);
    out << "\n";
  }
  if (!d.headroom.empty()) {
    auto h = d.headroom;
    std::sort(h.begin(), h.end(), [](const auto& a, const auto& b) { return a.headroom() < b.headroom(); });
    out << "\nThermal headroom (lowest first)\n";
    for (std::size_t i = 0; i < h.size() && (all || i < 5); ++i)
      out << fmt::format("  {} · {} {}: {} against {} → {} K\n", h[i].host, h[i].name, h[i].quantity, human_value(h[i].value, Unit::celsius),
                         human_value(h[i].limit, Unit::celsius), trim_zeros(fmt::format("{:.1f}", h[i].headroom())));
  }
  out << fmt::format("\nAlarms ({})\n", s.alarms.size());
  for (const auto& a : s.alarms)
    out << fmt::format("  {:<8} {:<24} {} · {}: {}\n", upper(to_string(a.severity)), a.type, a.host, a.entity, a.message);
  if (!s.findings.empty()) {
    std::map<std::string, std::vector<const Finding*>> by_check;
    for (const auto& f : s.findings) by_check[f.check].push_back(&f);
    out << fmt::format("\nFindings ({})\n", s.findings.size());
    for (const auto& [check, fs] : by_check) {
      out << fmt::format("  {} ({})\n", check, fs.size());
      for (std::size_t i = 0; i < fs.size() && (all || i < 3); ++i) out << fmt::format("    {}: {}\n", fs[i]->host, fs[i]->message);
      if (!all && fs.size() > 3) out << fmt::format("    ... and {} more (--all or --json)\n", fs.size() - 3);
    }
  }
  if (!s.quirks.empty()) {
    std::vector<std::string> q;
    for (const auto& [name, n] : s.quirks) q.push_back(fmt::format("{}={}", name, n));
    out << fmt::format("\nTolerated quirks: {}\n", fmt::join(q, ", "));
  }
}

void print_pue(std::ostream& out, const PueResult& r) {
  out << fmt::format("Interval {:.1f} s\n", r.seconds);
  for (const auto& m : r.meters) {
    const char* cls = m.cls == MeterClass::it ? "IT" : m.cls == MeterClass::facility ? "facility" : "total";
    out << fmt::format("  {:<9} {:<48} {}{}\n", cls, m.meter, human_value(m.delta_j, Unit::joules), m.reset ? " (counter reset)" : "");
  }
  out << fmt::format("IT energy {}, facility energy {}, total {}{}\n", human_value(r.it_j, Unit::joules),
                     human_value(r.facility_j, Unit::joules), human_value(r.total_j, Unit::joules),
                     r.from_total_meter ? " (metered)" : " (IT + facility)");
  if (r.pue) out << fmt::format("PUE {:.3f}\n", *r.pue);
  else out << "PUE: no IT energy moved in the interval (are the IT meters' counters advancing?)\n";
  for (const auto& n : r.notes) out << "  note: " << n << "\n";
}

}  // namespace astral::facility
