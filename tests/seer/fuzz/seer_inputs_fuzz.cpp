// Fuzz target: every Seer input parser (model, hardware, config, network JSON; operator CSV; a
// Kineto trace for compare) and, when the inputs are consistent and small, a prediction. Bad input
// must end in an exception with a message, never in a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/compare.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/predict.hpp"

using namespace astral::seer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int which = data[0] % 6;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (which == 4) {
      (void)parse_operator_csv(text, "fuzz.csv");
      return 0;
    }
    nlohmann::json j = nlohmann::json::parse(text);
    static const HardwareSpec hw = load_hardware("a100-80gb");
    switch (which) {
      case 0: {
        ModelSpec m = model_from_json(j);
        TrainConfig c;
        c.global_batch = 8;
        c.tp = 2;
        c.pp = 2;
        if (validation_error(m, c, 8).empty() && double(m.layers) * m.seq_len < 1e7) (void)predict(m, hw, uniform_network(hw, 8), c, 8);
        break;
      }
      case 1: (void)hardware_from_json(j); break;
      case 2: {
        TrainConfig c = config_from_json(j);
        ModelSpec m = load_model("korthikanti-22b");
        const int gpus = std::max(1, c.tp * c.pp * std::max(c.dp, 1));
        if (gpus <= 4096 && validation_error(m, c, gpus).empty() &&
            double(c.microbatches()) * c.pp * c.vp < 1e5)
          (void)predict(m, hw, uniform_network(hw, gpus), c, gpus);
        break;
      }
      case 3: (void)network_from_json(j, hw); break;
      case 5: {
        static const nlohmann::json predicted = [] {
          nlohmann::json p;
          p["otherData"]["seer"] = {{"step_time_s", 1.0}, {"tp", 1}, {"dp", 1}};
          p["traceEvents"] = nlohmann::json::array({{{"ph", "X"}, {"pid", 0}, {"cat", "gemm"}, {"dur", 5.0}}});
          return p;
        }();
        (void)compare_timelines(predicted, j);
        break;
      }
    }
  } catch (const std::exception&) {
    // Expected for bad input: every path reports through an exception with a message.
  }
  return 0;
}
