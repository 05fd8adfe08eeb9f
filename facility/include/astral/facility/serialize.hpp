#pragma once
// JSON forms of the model: what `astral facility read --json` prints and what `astral facility pue
// --from/--to` reads back.
#include <nlohmann/json.hpp>

#include <string>

#include "astral/facility/derived.hpp"
#include "astral/facility/sample.hpp"

namespace astral::facility {

nlohmann::json to_json(const Sample& sample);
nlohmann::json to_json(const Snapshot& snapshot);  // samples, alarms (as events), findings, quirks, sources
nlohmann::json to_json(const Derived& derived);
nlohmann::json to_json(const PueResult& pue);

// Reads the "samples" (and "sources") of a to_json(Snapshot) document back; throws
// std::runtime_error naming what is wrong.
Snapshot snapshot_from_json(const nlohmann::json& document);

// Parses format_time()'s output (and RFC 3339 with 'Z' generally); nullopt when it is not one.
std::optional<Clock::time_point> parse_time(const std::string& text);

}  // namespace astral::facility
