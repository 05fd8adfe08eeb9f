// Validation sets: predicted vs published step and layer times.
#include "astral/seer/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "astral/seer/calibrate_steps.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"
#include "astral/seer/report.hpp"

namespace astral::seer {
namespace {

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw SpecError(fmt::format("{}.{}: missing", where, key));
  return j.at(key);
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = field(j, key, where);
  if (!v.is_number() || v.get<double>() <= 0) throw SpecError(fmt::format("{}.{}: expected a positive number", where, key));
  return v.get<double>();
}

}  // namespace

double ValidationReport::mean_abs_pct() const {
  if (steps.empty()) return 0;
  double s = 0;
  for (const auto& r : steps) s += std::fabs(r.error_pct());
  return s / steps.size();
}

double ValidationReport::max_abs_pct() const {
  double m = 0;
  for (const auto& r : steps) m = std::max(m, std::fabs(r.error_pct()));
  return m;
}

bool ValidationReport::within_tolerance() const {
  return (tolerance_mean_pct <= 0 || mean_abs_pct() <= tolerance_mean_pct) &&
         (tolerance_max_pct <= 0 || max_abs_pct() <= tolerance_max_pct);
}

ValidationReport run_validation(const nlohmann::json& set, const HardwareSpec* hardware_override) {
  ValidationReport report;
  report.name = set.value("name", "validation set");
  HardwareSpec hw = hardware_override ? *hardware_override : load_hardware(field(set, "hardware", "validation").get<std::string>());
  if (set.contains("tolerance")) {
    report.tolerance_mean_pct = set["tolerance"].value("mean_abs_pct", 0.0);
    report.tolerance_max_pct = set["tolerance"].value("max_abs_pct", 0.0);
  }
  auto each = [&](const char* list, auto&& fn) {
    if (!set.contains(list)) return;
    for (size_t i = 0; i < set[list].size(); ++i) fn(set[list][i], fmt::format("validation.{}[{}]", list, i));
  };
  auto predict_case = [&](const nlohmann::json& c, const std::string& where) {
    ModelSpec m = model_from_entry(field(c, "model", where));
    TrainConfig cfg = config_from_entry(field(c, "config", where));
    int gpus = int(number(c, "gpus", where));
    return predict(m, hw, uniform_network(hw, gpus), cfg, gpus);
  };
  each("steps", [&](const nlohmann::json& c, const std::string& where) {
    Prediction p = predict_case(c, where);
    report.steps.push_back({c.value("name", where), number(c, "measured_s", where), p.step_time});
  });
  each("layers", [&](const nlohmann::json& c, const std::string& where) {
    Prediction p = predict_case(c, where);
    std::string name = c.value("name", where);
    report.layers.push_back({name + " forward", number(c, "measured_forward_ms", where) / 1e3, p.layer_forward});
    report.layers.push_back({name + " backward", number(c, "measured_backward_ms", where) / 1e3, p.layer_backward});
  });
  return report;
}

CalibratedValidation run_validation_calibrated_on_smallest(const nlohmann::json& set,
                                                            const HardwareSpec* hardware_override) {
  HardwareSpec hw = hardware_override ? *hardware_override : load_hardware(field(set, "hardware", "validation").get<std::string>());
  const auto& steps = field(set, "steps", "validation");
  if (!steps.is_array() || steps.size() < 2)
    throw SpecError("validation.steps: calibrating on the smallest run needs at least two step runs");
  size_t smallest = 0;
  for (size_t i = 1; i < steps.size(); ++i)
    if (number(steps[i], "gpus", "validation.steps") < number(steps[smallest], "gpus", "validation.steps")) smallest = i;
  StepRuns runs = parse_step_runs(nlohmann::json{{"runs", nlohmann::json::array({steps[smallest]})}},
                                  "validation.steps[" + std::to_string(smallest) + "]", hw);
  StepFitOptions compute_only;
  compute_only.fit = {StepFactor::kCompute};
  StepFitResult fit = calibrate_steps(hw, runs, compute_only);
  nlohmann::json others = set;
  others["steps"].erase(others["steps"].begin() + long(smallest));
  others.erase("layers");
  CalibratedValidation out;
  if (set.contains("tolerance_calibrated")) others["tolerance"] = set["tolerance_calibrated"];
  out.report = run_validation(others, &fit.calibrated);
  out.fitted_on = runs.runs.front().name;
  out.compute_factor = fit.compute;
  return out;
}

nlohmann::json to_json(const ValidationReport& r) {
  auto rows = [](const std::vector<ValidationRow>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : v)
      a.push_back({{"name", x.name}, {"measured_s", x.measured}, {"predicted_s", x.predicted}, {"error_pct", x.error_pct()}});
    return a;
  };
  return {{"name", r.name},
          {"steps", rows(r.steps)},
          {"layers", rows(r.layers)},
          {"mean_abs_error_pct", r.mean_abs_pct()},
          {"max_abs_error_pct", r.max_abs_pct()},
          {"tolerance", {{"mean_abs_pct", r.tolerance_mean_pct}, {"max_abs_pct", r.tolerance_max_pct}}},
          {"within_tolerance", r.within_tolerance()}};
}

nlohmann::json to_json(const CalibratedValidation& c) {
  nlohmann::json j = to_json(c.report);
  j["calibrated_on"] = c.fitted_on;
  j["compute_factor"] = c.compute_factor;
  return j;
}

std::string format_calibrated_validation(const CalibratedValidation& c) {
  return fmt::format("compute factor x{:.3f} fitted on \"{}\"; the other runs predicted:\n", c.compute_factor,
                     c.fitted_on) +
         format_validation(c.report);
}

}  // namespace astral::seer
