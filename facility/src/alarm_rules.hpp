#pragma once
// Alarm rules shared by every reader.
#include <string>

#include "astral/facility/sample.hpp"

namespace astral::facility::detail {

// Turns readings of `host` that cross their limits into alarms: temperatures become
// over_temperature (coolant_over_temperature for liquid loops), coolant flow below its minimum
// coolant_flow_low, anything else <quantity>_above/below_threshold. Fatal limits are critical,
// critical limits errors, caution limits warnings. Entities that already have an alarm (a more
// specific one from the source) are left alone.
void raise_threshold_alarms(Snapshot& out, const std::string& host);

}  // namespace astral::facility::detail
