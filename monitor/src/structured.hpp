#pragma once
// Structured inputs: JSON dumps and JSON-lines files.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "astral/monitor/parse.hpp"

namespace astral::monitor {

// Calls fn for each top-level JSON value in `content` (JSON lines, concatenated or pretty-printed
// objects). Values that do not parse count as damaged; `line` is where the value starts.
void for_each_json_value(std::string_view content, FileStats& stats,
                         const std::function<void(const nlohmann::json&, uint32_t line)>& fn);

// Python repr (as printed by the FR tutorial) to JSON: tuples to arrays, None/True/False,
// single-quoted strings, "..." elisions and trailing commas.
std::string python_repr_to_json(std::string_view repr);

void parse_events_jsonl(std::string_view content, const ParseOptions&, ParseResult&);
void parse_flight_recorder(std::string_view content, const ParseOptions&, ParseResult&);
void parse_inspector(std::string_view content, const ParseOptions&, ParseResult&);
void parse_nvidia_smi(std::string_view content, const ParseOptions&, ParseResult&);
void parse_ras_json(std::string_view content, const ParseOptions&, ParseResult&);

// Stable 64-bit key for a process-group name when no NCCL commHash is known.
uint64_t process_group_key(std::string_view name);

}  // namespace astral::monitor
