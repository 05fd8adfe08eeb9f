#pragma once
// What the monitor knows of exporter metrics: which names (current and older spellings) mean
// what, on which component, and what change of them is significant.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "astral/monitor/event.hpp"

namespace astral::monitor {

enum class ChangeRule : uint8_t {
  rise,     // a counter's rate climbs above its baseline (errors, pauses, replays)
  level,    // a gauge moves by at least `abs_delta` and `rel_delta` (temperature, power, clocks)
  bits,     // a bitmask gains bits outside `ignore_bits` (clock-event reasons)
  nonzero,  // a gauge becomes non-zero (dcgm's last XID)
};

struct MetricRule {
  std::string_view name;      // rule id, also the source of a series
  std::string_view exporter;  // node_exporter, dcgm-exporter, astral-facility
  std::vector<std::string_view> metrics;  // names as exported; a trailing '*' is a prefix
  std::string_view what;      // "symbol errors"
  ChangeRule rule = ChangeRule::rise;
  ComponentKind component = ComponentKind::nic;  // nic (switch_port on a switch), gpu, or from labels
  std::string_view unit;      // shown after values ("/min" for rates, "°C", "W", "MHz")
  double floor = 0;           // rise: the rate (per minute) that counts at all
  double abs_delta = 0, rel_delta = 0;  // level
  int direction = 0;          // level: +1 only rises, -1 only drops, 0 either
  uint64_t ignore_bits = 0;   // bits
  Severity severity = Severity::warning;
};

const std::vector<MetricRule>& metric_rules();
// The rule whose metric list names `metric`, or null (unknown metrics are ignored).
const MetricRule* rule_for_metric(std::string_view metric);
// PromQL selecting a rule's metrics (raw values; counters become rates in the monitor).
std::string rule_query(const MetricRule&);

}  // namespace astral::monitor
