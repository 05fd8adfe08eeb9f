#pragma once
// Fast JSON reading for Redfish payloads: simdjson parses, and the walker gets the same
// nlohmann::json it always had. nlohmann's own parser runs at about 120 MB/s here and was a fifth
// of the poller's CPU at site scale; simdjson's parse and the tree built from it take about 40 %
// of that (tools/bench/facility_poll, and the equivalence test in tests/facility).
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace astral::facility::detail {

// The document as nlohmann::json::parse would give it (duplicate keys: the last wins; integers
// signed when negative, unsigned otherwise), or nullopt when simdjson declines it: not JSON,
// numbers beyond 64 bits, nesting deeper than 96 levels. Callers then ask nlohmann, so
// what is accepted, and how, never depends on which parser read it.
std::optional<nlohmann::json> parse_json_fast(std::string_view text);

}  // namespace astral::facility::detail
