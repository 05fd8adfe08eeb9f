// The poller's JSON reader (simdjson, building nlohmann trees) must read every payload exactly as
// nlohmann::json::parse does, or decline it so that nlohmann reads it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "json_parse.hpp"

using astral::facility::detail::parse_json_fast;
using nlohmann::json;

namespace {

// The value and the kind of every number in it: 3 and 3u compare equal, so compare kinds too.
std::string shape(const json& j) {
  std::string out = std::to_string(static_cast<int>(j.type()));
  if (j.is_structured())
    for (const auto& item : j.items()) out += "(" + item.key() + ":" + shape(item.value()) + ")";
  return out;
}

void check_same_as_nlohmann(const std::string& text, const std::string& what) {
  INFO(what);
  json slow = json::parse(text, nullptr, false);
  auto fast = parse_json_fast(text);
  if (!fast) {
    CHECK(slow.is_discarded());  // declined is fine only where nlohmann refuses too, in these files
    return;
  }
  REQUIRE_FALSE(slow.is_discarded());
  CHECK(*fast == slow);
  CHECK(fast->dump() == slow.dump());
  CHECK(shape(*fast) == shape(slow));
}

}  // namespace

TEST_CASE("json: every Redfish fixture reads the same through simdjson as through nlohmann") {
  std::size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(ASTRAL_FIXTURES_DIR) + "/redfish")) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    check_same_as_nlohmann(text.str(), e.path().string());
    ++files;
  }
  CHECK(files > 100);
}

TEST_CASE("json: numbers, repeated keys, escapes and nesting read as nlohmann reads them") {
  check_same_as_nlohmann(R"({"a": 1, "b": -1, "c": 0, "d": 18446744073709551615, "e": -9223372036854775808,
                             "f": 1.5, "g": 1e3, "h": -0.0, "i": 12.0})", "numbers");
  check_same_as_nlohmann(R"({"k": 1, "k": "two", "z": [1, {"k": null}]})", "a repeated key: the last wins");
  check_same_as_nlohmann(R"({"s": "caf\u00e9 \"q\" \\ \n", "t": "日本", "u": [], "v": {}, "w": [true, false]})", "strings");
  check_same_as_nlohmann("  [1, 2, 3]  \n", "whitespace around a top-level array");
  check_same_as_nlohmann("\"just a string\"", "a top-level string");
  std::string deep;
  deep.append(200, '[').append(200, ']');
  CHECK_FALSE(parse_json_fast(deep));  // deeper than the fibers' stacks allow: nlohmann's turn
  CHECK_FALSE(json::parse(deep, nullptr, false).is_discarded());
  std::string fine;
  fine.append(90, '[').append(90, ']');
  check_same_as_nlohmann(fine, "90 levels");
  CHECK(parse_json_fast(fine));
}

TEST_CASE("json: what is not JSON is declined, and nlohmann then decides") {
  for (const char* bad : {"", "{", "{\"a\": NaN}", "{\"a\": 1} trailing", "{\"a\": 1,}", "[1, 2", "\"\xff\xfe\"",
                          "{\"a\": 123456789012345678901234567890}", "nul", "{'a': 1}"}) {
    INFO(bad);
    CHECK_FALSE(parse_json_fast(bad));
  }
  // A number beyond 64 bits is JSON: declined here, nlohmann reads it as a double.
  CHECK(json::parse("{\"a\": 123456789012345678901234567890}")["a"].is_number_float());
}
