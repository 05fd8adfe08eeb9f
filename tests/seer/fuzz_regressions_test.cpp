// Inputs that coverage-guided fuzzing found (tests/fixtures/astral/fuzz-regressions/seer_inputs):
// an integer field holding a number beyond any integer type was cast from double to long long
// before its range was checked (undefined behaviour). Now: one error line naming the field.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "astral/seer/inputs.hpp"
#include "astral/seer/spec.hpp"

using namespace astral::seer;
using nlohmann::json;

namespace {
std::string model_error(const json& j) {
  try {
    (void)model_from_json(j);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("Fuzz regressions: Seer integer fields beyond any integer type are errors naming the field") {
  std::ifstream in(ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/seer_inputs/crash-minimized-layers-float-cast.bin",
                   std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 1);
  const json doc = json::parse(bytes.substr(1));  // the fuzz target's first byte picks the parser
  REQUIRE(doc["layers"].is_number_float());
  CHECK(model_error(doc).find("model.layers: must be an integer >= 1") != std::string::npos);

  // The same field through every kind of out-of-range number, and a whole float that is fine.
  json j = load_json("models", "gpt3-175b");
  for (const json& bad : {json(1e30), json(-1e30), json(int64_t(1) << 40), json(UINT64_MAX)}) {
    j["layers"] = bad;
    INFO(bad.dump());
    CHECK(model_error(j).find("model.layers: must be an integer >= 1") != std::string::npos);
  }
  j["layers"] = 8.5;
  CHECK(model_error(j).find("model.layers: expected an integer") != std::string::npos);
  j["layers"] = 96.0;
  CHECK(model_error(j).empty());
  CHECK(model_from_json(j).layers == 96);
}
