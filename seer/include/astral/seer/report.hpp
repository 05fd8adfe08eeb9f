#pragma once
// Reports for the CLI (`astral seer ...`): human-readable text for a terminal and the JSON documents
// that `--json` prints, with the same facts.
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
// The cost table followed by the line naming the best algorithm and protocol.
std::string format_collective(Collective c, double bytes, const Group& g, const CostTable& t,
                              const CollectiveCost& best);
// The bundled inputs, one category per line ("models: a b c").
std::string format_bundled_list();

nlohmann::json to_json(const SearchResult& r);
nlohmann::json to_json(const CalibrationResult& r);
// `predict --json`: the prediction with the model, hardware, GPU count and layout it is for.
nlohmann::json prediction_report(const ModelSpec& model, const HardwareSpec& hw, const TrainConfig& config, int gpus,
                                 const Prediction& p);
// `otherData` of a `predict --timeline` trace: what `compare` reads back.
nlohmann::json timeline_metadata(const ModelSpec& model, const HardwareSpec& hw, const TrainConfig& config, int gpus,
                                 const Prediction& p);
// `search --json`: the result with the model, hardware, GPU count and network it is for.
nlohmann::json search_report(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                             const SearchResult& r);
// `collective --json`: seconds per algorithm and protocol, and the best of them.
nlohmann::json collective_report(Collective c, double bytes, const Group& g, const CostTable& t,
                                 const CollectiveCost& best);

}  // namespace astral::seer
