#pragma once
// Human-readable reports for the CLI (`astral seer ...`): the same facts as the JSON forms, laid
// out for a terminal.
#include <string>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/compare.hpp"
#include "astral/seer/predict.hpp"
#include "astral/seer/search.hpp"
#include "astral/seer/validate.hpp"

namespace astral::seer {

std::string describe_layout(const TrainConfig& c);
std::string format_prediction(const ModelSpec& model, const HardwareSpec& hw, const Network& net,
                              const TrainConfig& config, int gpus, const Prediction& p);
std::string format_search(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                          const SearchResult& r);
std::string format_comparison(const Comparison& c);
std::string format_validation(const ValidationReport& r);
std::string format_calibration(const CalibrationResult& r);
std::string format_cost_table(Collective c, double bytes, const Group& g, const CostTable& t);

nlohmann::json to_json(const SearchResult& r);

}  // namespace astral::seer
