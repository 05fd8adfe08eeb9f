#pragma once
// Accuracy against published measurements: a validation set (JSON, docs/seer.md) lists step times
// (and optionally per-layer forward/backward times) measured for named model/config pairs on one
// hardware profile; Seer predicts each and reports the errors.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "astral/seer/spec.hpp"

namespace astral::seer {

struct ValidationRow {
  std::string name;
  double measured = 0;   // seconds
  double predicted = 0;
  double error_pct() const { return (predicted - measured) / measured * 100.0; }
};

struct ValidationReport {
  std::string name;
  std::vector<ValidationRow> steps;
  std::vector<ValidationRow> layers;  // forward and backward rows, one each per measured layer
  double tolerance_mean_pct = 0;      // from the set; 0 when it gives none
  double tolerance_max_pct = 0;
  double mean_abs_pct() const;        // over steps
  double max_abs_pct() const;
  bool within_tolerance() const;
};

// Runs every case of `set`. Model and config entries are bundled names, paths, or inline objects;
// `hardware_override` (when not empty) replaces the set's hardware.
ValidationReport run_validation(const nlohmann::json& set, const HardwareSpec* hardware_override = nullptr);
// The second protocol: the compute factor fitted (calibrate --steps, one factor from one run) on
// the set's smallest step run (fewest GPUs), then the other step runs predicted with that profile.
// The report's steps exclude the fitted run; `fitted_on` and `compute_factor` say what was fitted.
// The set's `tolerance_calibrated`, when present, is this protocol's tolerance.
struct CalibratedValidation {
  ValidationReport report;
  std::string fitted_on;
  double compute_factor = 1;
};
CalibratedValidation run_validation_calibrated_on_smallest(const nlohmann::json& set,
                                                            const HardwareSpec* hardware_override = nullptr);
nlohmann::json to_json(const ValidationReport& r);
nlohmann::json to_json(const CalibratedValidation& c);  // the report plus calibrated_on, compute_factor
std::string format_calibrated_validation(const CalibratedValidation& c);

}  // namespace astral::seer
