#pragma once
// Figures derived from samples: rack IT power against its budget, conversion loss and efficiency,
// an HVDC-versus-AC chain comparison from configured stage efficiencies, PUE over an interval from
// energy counters, liquid heat removal (flow × density × c_p × ΔT) against IT power, thermal
// headroom. Physics cross-checks (η ≤ 1, P = V·I on DC, ApparentVA ≥ W, Q = ṁ·c_p·ΔT, capture ≤ 1)
// become findings with a tolerance: never failures, and reported values are never rewritten.
// facility-formats.md §4–5: conversion efficiencies are configuration, never constants.
#include <optional>
#include <string>
#include <vector>

#include "astral/facility/sample.hpp"

namespace astral::facility {

// Defaults only for a loop whose CDU does not report its coolant (facility-formats.md §4.2).
inline constexpr double kWaterDensity = 1000;       // kg/m³
inline constexpr double kWaterSpecificHeat = 4180;  // J/(kg·K)

// Heat carried by a liquid loop, in watts: (L/min ÷ 60 000) m³/s × kg/m³ × J/(kg·K) × K.
double liquid_heat_watts(double flow_lpm, double delta_t_k, double density = kWaterDensity,
                         double specific_heat = kWaterSpecificHeat);

// Increase of an energy counter; a counter that went down was reset (driver reload, ResetMetrics)
// and is counted from zero, unless wrap_at says it wrapped.
double counter_delta(double start, double end, std::optional<double> wrap_at = std::nullopt);

// "host:entity:quantity" with '*' globs in each part; missing parts match anything
// ("pdu:PowerEquipment/RackPDUs/1" = that PDU, any quantity the caller asks for).
struct Selector {
  std::string host = "*", entity = "*", quantity = "*";
};
Selector parse_selector(const std::string& text);
bool glob_match(const std::string& pattern, const std::string& text);
bool matches(const Selector& selector, const Sample& sample);

struct ChainStage {
  std::string name;
  double efficiency = 1;  // 0 < η ≤ 1
};
struct ChainResult {
  std::string name;
  double efficiency = 1;  // end to end
  double input_w = 0;     // what the grid supplies for the IT load
  double loss_w = 0;
  std::vector<std::pair<std::string, double>> stage_loss_w;
};
// Throws std::invalid_argument for an efficiency outside (0, 1].
ChainResult evaluate_chain(const std::string& name, const std::vector<ChainStage>& stages, double it_load_w);
struct ChainComparison {
  ChainResult ac, hvdc;
  double saved_w = 0;       // ac.input - hvdc.input
  double saved_ratio = 0;   // saved_w / ac.input
  double saved_kwh_per_year = 0;
};
ChainComparison compare_chains(const std::vector<ChainStage>& ac, const std::vector<ChainStage>& hvdc,
                               double it_load_w);

struct RackConfig {
  std::string name;
  std::optional<double> budget_w;
  std::vector<Selector> it_power;        // empty: pick by source priority (docs/facility.md)
  std::vector<Selector> facility_power;  // non-IT loads (CDU pumps, fans, conversion) for pPUE
  std::vector<Selector> total_power;     // meters of everything the rack draws (wins over IT + facility)
  std::vector<Selector> cooling;         // coolant connectors whose heat is this rack's
};

struct DeriveConfig {
  std::vector<RackConfig> racks;  // empty: one rack "all" of every source, no budget
  std::vector<ChainStage> ac_chain, hvdc_chain;
  std::vector<Selector> pue_it, pue_facility, pue_total;  // energy meters for PUE
  double tolerance = 0.05;  // physics cross-checks
  double budget_warning_ratio = 0.95;
};

struct RackFigures {
  std::string name;
  double it_power_w = 0;
  std::vector<std::string> meters;  // "host:entity" of what was summed
  std::string basis;                // which rule picked the meters
  std::optional<double> budget_w, budget_ratio, headroom_w;
  std::optional<double> facility_power_w;
  std::optional<double> pue_instantaneous;  // an interim indicator from power, not the PUE
  std::optional<double> heat_removed_w;
  std::optional<double> capture_ratio;      // liquid heat removed / IT power
};

struct CoolingFigures {
  std::string host, entity, name;
  std::optional<double> flow_lpm, delta_t_k;
  std::optional<double> heat_reported_w, heat_computed_w;
  double density = kWaterDensity, specific_heat = kWaterSpecificHeat;
  std::string coolant = "water (assumed)";  // where density and c_p came from: connector, CDU, assumed
};

struct CduFigures {
  std::string host, entity, name;
  std::optional<double> capacity_w, heat_w, headroom_w;
};

struct ConversionFigures {
  std::string host, entity, name;
  double input_w = 0, output_w = 0;
  double loss_w() const { return input_w - output_w; }
  double efficiency() const { return input_w > 0 ? output_w / input_w : 0; }
};

struct ThermalHeadroom {
  std::string host, entity, name, quantity;
  double value = 0, limit = 0;
  double headroom() const { return limit - value; }
};

struct Derived {
  std::vector<RackFigures> racks;
  std::vector<CoolingFigures> cooling;
  std::vector<CduFigures> cdus;
  std::vector<ConversionFigures> conversions;
  std::vector<ThermalHeadroom> headroom;
  std::optional<ChainComparison> chains;
  double conversion_loss_w() const;
};

// Computes everything above from one snapshot; physics findings and budget alarms are added to it.
Derived derive(Snapshot& snapshot, const DeriveConfig& config);

enum class MeterClass { it, facility, total };
struct MeterDelta {
  std::string meter;  // "host:entity"
  MeterClass cls = MeterClass::it;
  double start_j = 0, end_j = 0, delta_j = 0;
  bool reset = false;
};
struct PueResult {
  double seconds = 0;
  double it_j = 0, facility_j = 0, total_j = 0;
  std::optional<double> pue;  // total / IT; empty when no IT energy moved
  bool from_total_meter = false;  // total metered directly, rather than IT + facility
  std::vector<MeterDelta> meters;
  std::vector<std::string> notes;  // boundary statements and anything suspicious (PUE < 1)
};
// PUE = E_total / E_IT over the interval between two snapshots, from the energy counters the
// config classifies (meters missing from either snapshot are noted, not guessed).
PueResult pue_between(const Snapshot& start, const Snapshot& end, const DeriveConfig& config);

}  // namespace astral::facility
