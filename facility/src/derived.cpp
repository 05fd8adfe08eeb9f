#include "astral/facility/derived.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // trim, lower, starts_with, ends_with, contains

double liquid_heat_watts(double flow_lpm, double delta_t_k, double density, double specific_heat) {
  double cubic_meters_per_second = flow_lpm / 60000.0;
  return cubic_meters_per_second * density * specific_heat * delta_t_k;
}

double counter_delta(double start, double end, std::optional<double> wrap_at) {
  if (end >= start) return end - start;
  if (wrap_at && *wrap_at > start) return (*wrap_at - start) + end;
  return end;  // reset: the counter restarted from zero
}

bool glob_match(const std::string& p, const std::string& t) {
  // Iterative '*' matching with backtracking to the last star.
  std::size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && p[pi] == t[ti]) {
      ++pi, ++ti;
    } else if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Selector parse_selector(const std::string& text) {
  Selector s;
  auto first = text.find(':');
  s.host = text.substr(0, first);
  if (first != std::string::npos) {
    auto second = text.find(':', first + 1);
    s.entity = text.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
    if (second != std::string::npos) s.quantity = text.substr(second + 1);
  }
  if (s.host.empty()) s.host = "*";
  if (s.entity.empty()) s.entity = "*";
  if (s.quantity.empty()) s.quantity = "*";
  return s;
}

bool matches(const Selector& s, const Sample& sample) {
  return glob_match(s.host, sample.host) && glob_match(s.entity, sample.entity) &&
         glob_match(s.quantity, sample.quantity);
}

ChainResult evaluate_chain(const std::string& name, const std::vector<ChainStage>& stages, double it_load_w) {
  ChainResult r;
  r.name = name;
  // Walk from the load back to the grid: each stage's input is its output over its efficiency.
  double power = it_load_w;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    if (!(it->efficiency > 0 && it->efficiency <= 1))
      throw std::invalid_argument(fmt::format("chain {}: stage '{}' efficiency {} is not in (0, 1]", name, it->name, it->efficiency));
    double in = power / it->efficiency;
    r.stage_loss_w.emplace_back(it->name, in - power);
    r.efficiency *= it->efficiency;
    power = in;
  }
  std::reverse(r.stage_loss_w.begin(), r.stage_loss_w.end());
  r.input_w = power;
  r.loss_w = power - it_load_w;
  return r;
}

ChainComparison compare_chains(const std::vector<ChainStage>& ac, const std::vector<ChainStage>& hvdc, double it_load_w) {
  ChainComparison c;
  c.ac = evaluate_chain("ac", ac, it_load_w);
  c.hvdc = evaluate_chain("hvdc", hvdc, it_load_w);
  c.saved_w = c.ac.input_w - c.hvdc.input_w;
  c.saved_ratio = c.ac.input_w > 0 ? c.saved_w / c.ac.input_w : 0;
  c.saved_kwh_per_year = c.saved_w * 8760.0 / 1000.0;
  return c;
}

double Derived::conversion_loss_w() const {
  double sum = 0;
  for (const auto& c : conversions) sum += c.loss_w();
  return sum;
}

namespace {

using Key = std::pair<std::string, std::string>;  // host, entity

struct Index {
  std::map<Key, std::map<std::string, const Sample*>> by_entity;
  explicit Index(const Snapshot& s) {
    for (const auto& x : s.samples) by_entity[{x.host, x.entity}].emplace(x.quantity, &x);
  }
  const Sample* get(const Key& k, const std::string& q) const {
    auto e = by_entity.find(k);
    if (e == by_entity.end()) return nullptr;
    auto it = e->second.find(q);
    return it == e->second.end() ? nullptr : it->second;
  }
};

void physics_checks(Snapshot& snap, const Index& idx, const DeriveConfig& cfg, Derived& d) {
  double tol = cfg.tolerance;
  for (const auto& [key, q] : idx.by_entity) {
    const auto& [host, entity] = key;
    // clang 14 cannot capture a structured binding (a C++20 feature it lacks): capture a reference.
    auto get = [&idx, &entity_key = key](const char* name) { return idx.get(entity_key, name); };
    const Sample* any = q.begin()->second;
    std::string label = any->name.empty() ? entity : any->name;
    if (const Sample *in = get("input_power"), *out = get("output_power"); in && out && in->value > 0) {
      d.conversions.push_back(ConversionFigures{host, entity, label, in->value, out->value});
      if (out->value > in->value * (1 + tol))
        snap.findings.push_back(Finding{host, entity, "efficiency_above_one",
            fmt::format("{}: output {} W exceeds input {} W (efficiency {:.3f} > 1)", label, out->value, in->value, out->value / in->value)});
    }
    if (const Sample *in = get("input_power"), *cap = get("power_capacity"); in && cap && cap->value > 0 &&
                                                                             in->value > cap->value * (1 + tol))
      snap.findings.push_back(Finding{host, entity, "over_capacity",
          fmt::format("{}: input {} W exceeds its rated capacity {} W", label, in->value, cap->value)});
    const Sample* p = get("power");
    if (const Sample* va = get("apparent_power"); p && va && va->value < std::fabs(p->value) * (1 - tol))
      snap.findings.push_back(Finding{host, entity, "apparent_below_real",
          fmt::format("{}: apparent power {} VA is less than real power {} W (impossible)", label, va->value, p->value)});
    const Sample *v = get("voltage"), *i = get("current");
    if (p && v && i && get("nominal_voltage") && p->value > 0) {  // P = V·I holds on DC circuits
      double vi = v->value * i->value;
      if (std::fabs(vi - p->value) > tol * p->value)
        snap.findings.push_back(Finding{host, entity, "power_mismatch",
            fmt::format("{}: {} V × {} A = {:.1f} W but the circuit reports {} W", label, v->value, i->value, vi, p->value)});
    }
  }
}

// Power-shelf conversion measured end to end: AC mains in, DC branches out.
void shelf_conversions(const Index& idx, Derived& d) {
  std::map<Key, std::pair<double, double>> shelves;  // in, out
  for (const auto& [key, q] : idx.by_entity) {
    auto pw = q.find("power");
    if (pw == q.end()) continue;
    const std::string& entity = key.second;
    auto mains = entity.find("/Mains/");
    auto branches = entity.find("/Branches/");
    if (!starts_with(entity, "PowerEquipment/PowerShelves/")) continue;
    if (mains != std::string::npos && entity.find('/', mains + 7) == std::string::npos)
      shelves[{key.first, entity.substr(0, mains)}].first += pw->second->value;
    else if (branches != std::string::npos && q.count("nominal_voltage"))
      shelves[{key.first, entity.substr(0, branches)}].second += pw->second->value;
  }
  for (const auto& [key, io] : shelves) {
    if (io.first > 0 && io.second > 0)
      d.conversions.push_back(ConversionFigures{key.first, key.second, key.second + " (AC mains → DC bus)", io.first, io.second});
  }
}

void cooling(Snapshot& snap, const Index& idx, const DeriveConfig& cfg, Derived& d) {
  for (const auto& [key, q] : idx.by_entity) {
    const auto& [host, entity] = key;
    const Sample* any = q.begin()->second;
    if (any->kind == EntityKind::cdu && (q.count("cooling_capacity") || q.count("coolant_density"))) {
      CduFigures cdu{host, entity, any->name.empty() ? entity : any->name, {}, {}, {}};
      if (auto c = q.find("cooling_capacity"); c != q.end()) cdu.capacity_w = c->second->value;
      d.cdus.push_back(cdu);
    }
    if (any->kind != EntityKind::coolant_connector) continue;
    CoolingFigures c;
    c.host = host, c.entity = entity, c.name = any->name.empty() ? entity : any->name;
    if (entity.find("PrimaryCoolantConnectors/") != std::string::npos) c.coolant = "facility water (assumed)";
    if (auto f = q.find("coolant_flow"); f != q.end()) c.flow_lpm = f->second->value;
    if (auto dt = q.find("coolant_delta_temperature"); dt != q.end()) c.delta_t_k = dt->second->value;
    else if (q.count("coolant_supply_temperature") && q.count("coolant_return_temperature"))
      c.delta_t_k = q.at("coolant_return_temperature")->value - q.at("coolant_supply_temperature")->value;
    if (auto h = q.find("heat_removed"); h != q.end()) c.heat_reported_w = h->second->value;
    // Coolant properties: the connector's own, else (rack-side loops) those of the CDU it belongs
    // to (ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1 -> CDUs/1). A CDU's Coolant
    // describes its secondary loop; the primary side is facility water unless it says otherwise.
    if (auto dn = q.find("coolant_density"); dn != q.end()) c.density = dn->second->value, c.coolant = "the connector";
    if (auto cp = q.find("coolant_specific_heat"); cp != q.end()) c.specific_heat = cp->second->value;
    bool primary = entity.find("PrimaryCoolantConnectors/") != std::string::npos;
    if (!q.count("coolant_density") && !primary) {
      // The nearest ancestor that reports a coolant, by walking up the path (no scan of all entities).
      for (auto cut = entity.rfind('/'); cut != std::string::npos && cut > 0; cut = entity.rfind('/', cut - 1)) {
        const Sample* dn = idx.get({host, entity.substr(0, cut)}, "coolant_density");
        if (!dn) continue;
        c.density = dn->value, c.coolant = "the CDU";
        if (const Sample* cp = idx.get({host, entity.substr(0, cut)}, "coolant_specific_heat")) c.specific_heat = cp->value;
        break;
      }
    }
    if (c.flow_lpm && c.delta_t_k) c.heat_computed_w = liquid_heat_watts(*c.flow_lpm, *c.delta_t_k, c.density, c.specific_heat);
    if (c.heat_reported_w && c.heat_computed_w &&
        std::fabs(*c.heat_reported_w - *c.heat_computed_w) > cfg.tolerance * std::max(*c.heat_reported_w, *c.heat_computed_w))
      snap.findings.push_back(Finding{host, entity, "heat_balance",
          fmt::format("{}: {} L/min × ΔT {} K × {} kg/m³ × {} J/(kg·K) = {:.1f} kW, but the CDU reports {:.2f} kW removed",
                      c.name, *c.flow_lpm, *c.delta_t_k, c.density, c.specific_heat, *c.heat_computed_w / 1000, *c.heat_reported_w / 1000)});
    if (c.flow_lpm || c.heat_reported_w) d.cooling.push_back(std::move(c));
  }
  // CDU headroom against the heat its rack-side (secondary) loops carry.
  for (auto& cdu : d.cdus) {
    double heat = 0;
    bool any = false;
    for (const auto& c : d.cooling) {
      if (c.host != cdu.host || !starts_with(c.entity, cdu.entity + "/SecondaryCoolantConnectors/")) continue;
      if (auto h = c.heat_reported_w ? c.heat_reported_w : c.heat_computed_w) heat += *h, any = true;
    }
    if (!any) continue;
    cdu.heat_w = heat;
    if (cdu.capacity_w) cdu.headroom_w = *cdu.capacity_w - heat;
  }
}

// Rack power by source priority (facility-formats.md §4.2) for one host's samples.
std::pair<std::string, std::vector<const Sample*>> auto_meters(const std::vector<const Sample*>& host_samples) {
  auto pick = [&](auto pred) {
    std::vector<const Sample*> r;
    for (const Sample* s : host_samples) if (pred(*s)) r.push_back(s);
    return r;
  };
  auto r = pick([](const Sample& s) { return s.quantity == "power" && (s.kind == EntityKind::pdu || s.kind == EntityKind::power_shelf) && starts_with(s.entity, "PowerEquipment/"); });
  if (!r.empty()) return {"PDU / power-shelf input", r};
  r = pick([](const Sample& s) { return s.quantity == "power" && (s.kind == EntityKind::chassis || s.kind == EntityKind::rack); });
  if (!r.empty()) return {"chassis power", r};
  r = pick([](const Sample& s) { return s.quantity == "input_power" && (s.kind == EntityKind::psu || s.kind == EntityKind::rectifier); });
  if (!r.empty()) return {"sum of PSU inputs", r};
  r = pick([](const Sample& s) { return s.quantity == "power" && s.kind == EntityKind::node; });
  if (!r.empty()) return {"IPMI DCMI", r};
  r = pick([](const Sample& s) { return s.quantity == "power" && (s.kind == EntityKind::cpu || s.kind == EntityKind::gpu) && s.entity.find('/') == std::string::npos; });
  if (!r.empty()) return {"RAPL packages + GPUs (a lower bound)", r};
  return {"no power reading", {}};
}

void racks(Snapshot& snap, const DeriveConfig& cfg, Derived& d) {
  std::vector<RackConfig> configured = cfg.racks;
  if (configured.empty()) configured.push_back(RackConfig{"all", std::nullopt, {}, {}, {}, {}});
  for (const auto& rc : configured) {
    RackFigures r;
    r.name = rc.name;
    r.budget_w = rc.budget_w;
    if (!rc.it_power.empty()) {
      r.basis = "configured meters";
      std::set<const Sample*> used;
      for (const auto& sel : rc.it_power) {
        Selector s = sel;
        if (s.quantity == "*") s.quantity = "power";
        for (const auto& x : snap.samples) if (matches(s, x)) used.insert(&x);
      }
      for (const Sample* x : used) r.it_power_w += x->value, r.meters.push_back(x->host + ":" + x->entity);
    } else {
      std::map<std::string, std::vector<const Sample*>> by_host;
      for (const auto& x : snap.samples) by_host[x.host].push_back(&x);
      std::set<std::string> bases;
      for (const auto& [host, xs] : by_host) {
        auto [basis, meters] = auto_meters(xs);
        if (meters.empty()) continue;
        bases.insert(basis);
        for (const Sample* x : meters) r.it_power_w += x->value, r.meters.push_back(x->host + ":" + x->entity);
      }
      for (const auto& b : bases) r.basis += (r.basis.empty() ? "" : "; ") + b;
    }
    auto sum_power = [&](const std::vector<Selector>& selectors) {
      double sum = 0;
      for (const auto& sel : selectors) {
        Selector s = sel;
        if (s.quantity == "*") s.quantity = "power";
        for (const auto& x : snap.samples) if (matches(s, x)) sum += x.value;
      }
      return sum;
    };
    if (!rc.total_power.empty()) {
      double total = sum_power(rc.total_power);
      r.facility_power_w = total - r.it_power_w;
      if (r.it_power_w > 0) r.pue_instantaneous = total / r.it_power_w;
    } else if (!rc.facility_power.empty()) {
      double f = sum_power(rc.facility_power);
      r.facility_power_w = f;
      if (r.it_power_w > 0) r.pue_instantaneous = (r.it_power_w + f) / r.it_power_w;
    }
    // Heat the rack's loops carry: configured connectors, else every rack-side (secondary) loop.
    double heat = 0;
    bool have_heat = false;
    for (const auto& c : d.cooling) {
      bool mine = false;
      if (!rc.cooling.empty()) {
        Sample probe;
        probe.host = c.host, probe.entity = c.entity, probe.quantity = "heat_removed";
        for (const auto& sel : rc.cooling) mine |= matches(sel, probe);
      } else {
        mine = c.entity.find("SecondaryCoolantConnectors/") != std::string::npos;
      }
      if (!mine) continue;
      if (auto h = c.heat_reported_w ? c.heat_reported_w : c.heat_computed_w) heat += *h, have_heat = true;
    }
    if (have_heat) {
      r.heat_removed_w = heat;
      if (r.it_power_w > 0) {
        r.capture_ratio = heat / r.it_power_w;
        if (*r.capture_ratio > 1 + cfg.tolerance)
          snap.findings.push_back(Finding{rc.name, rc.name, "capture_above_one",
              fmt::format("rack {}: liquid loops remove {:.1f} kW but the rack draws {:.1f} kW (capture ratio {:.2f} > 1): "
                          "meters disagree or the loop serves more than this rack", rc.name, heat / 1000, r.it_power_w / 1000, *r.capture_ratio)});
      }
    }
    if (r.budget_w && *r.budget_w > 0) {
      r.budget_ratio = r.it_power_w / *r.budget_w;
      r.headroom_w = *r.budget_w - r.it_power_w;
      if (*r.budget_ratio >= cfg.budget_warning_ratio) {
        Alarm a;
        a.time = Clock::now();
        a.host = rc.name;
        a.kind = EntityKind::rack;
        a.entity = rc.name;
        a.severity = *r.budget_ratio > 1 ? Severity::critical : Severity::warning;
        a.type = "rack_power_over_budget";
        a.source = "astral";
        a.message = fmt::format("rack {} draws {:.1f} kW, {:.0f} % of its {:.1f} kW budget", rc.name,
                                r.it_power_w / 1000, *r.budget_ratio * 100, *r.budget_w / 1000);
        snap.add_alarm(std::move(a));
      }
    }
    d.racks.push_back(std::move(r));
  }
}

}  // namespace

Derived derive(Snapshot& snapshot, const DeriveConfig& config) {
  Derived d;
  {
    Index idx(snapshot);
    physics_checks(snapshot, idx, config, d);
    shelf_conversions(idx, d);
    cooling(snapshot, idx, config, d);
    for (const auto& s : snapshot.samples) {
      const auto& l = s.limits;
      std::optional<double> limit = l.upper_critical ? l.upper_critical : l.upper_caution;
      if (s.unit == Unit::celsius && limit)
        d.headroom.push_back(ThermalHeadroom{s.host, s.entity, s.name.empty() ? s.entity : s.name, s.quantity, s.value, *limit});
    }
  }
  racks(snapshot, config, d);  // after the index: it adds findings and alarms to the snapshot
  if (!config.ac_chain.empty() && !config.hvdc_chain.empty()) {
    double load = 0;
    for (const auto& r : d.racks) load += r.it_power_w;
    if (load > 0) d.chains = compare_chains(config.ac_chain, config.hvdc_chain, load);
  }
  return d;
}

PueResult pue_between(const Snapshot& start, const Snapshot& end, const DeriveConfig& config) {
  PueResult r;
  auto t0 = start.samples.empty() ? Clock::time_point{} : start.samples.front().time;
  auto t1 = end.samples.empty() ? Clock::time_point{} : end.samples.front().time;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  auto collect = [&](const std::vector<Selector>& selectors, MeterClass cls) {
    double sum = 0;
    for (const auto& sel : selectors) {
      Selector s = sel;
      if (s.quantity == "*") s.quantity = "energy";
      for (const auto& b : end.samples) {
        if (!b.counter || !matches(s, b)) continue;
        std::string meter = b.host + ":" + b.entity;
        if (std::any_of(r.meters.begin(), r.meters.end(), [&](const MeterDelta& m) { return m.meter == meter; })) continue;
        const Sample* a = start.find(b.host, b.entity, b.quantity);
        if (!a) {
          r.notes.push_back(fmt::format("{} has no reading at the start of the interval; left out", meter));
          continue;
        }
        MeterDelta m{meter, cls, a->value, b.value, counter_delta(a->value, b.value), b.value < a->value};
        if (m.reset) r.notes.push_back(fmt::format("{} went down ({} -> {} J): counted as a reset", meter, a->value, b.value));
        sum += m.delta_j;
        r.meters.push_back(std::move(m));
      }
    }
    return sum;
  };
  r.it_j = collect(config.pue_it, MeterClass::it);
  r.facility_j = collect(config.pue_facility, MeterClass::facility);
  double total = collect(config.pue_total, MeterClass::total);
  r.from_total_meter = !config.pue_total.empty() && total > 0;
  r.total_j = r.from_total_meter ? total : r.it_j + r.facility_j;
  if (r.from_total_meter && r.facility_j > 0)
    r.notes.push_back("a total meter is configured: facility meters are reported but not added to it");
  if (r.it_j > 0) {
    r.pue = r.total_j / r.it_j;
    if (*r.pue < 1) r.notes.push_back(fmt::format("PUE {:.3f} < 1: some IT load is metered as total or facility load, or a meter is missing", *r.pue));
  }
  r.notes.push_back(fmt::format("boundary: IT = {} meter(s); facility = {} meter(s); total = {}",
                                std::count_if(r.meters.begin(), r.meters.end(), [](const MeterDelta& m) { return m.cls == MeterClass::it; }),
                                std::count_if(r.meters.begin(), r.meters.end(), [](const MeterDelta& m) { return m.cls == MeterClass::facility; }),
                                r.from_total_meter ? "metered" : "IT + facility"));
  return r;
}

}  // namespace astral::facility
