#pragma once
// Human-readable reports for `astral facility read` and `astral facility pue`.
#include <ostream>
#include <string>

#include "astral/facility/derived.hpp"
#include "astral/facility/sample.hpp"

namespace astral::facility {

// A value in the unit people read it in: kW above 10 kW, kWh for energy, kPa, percent.
std::string human_value(double value, Unit unit);

// Sources, readings (one line per entity; every reading with `all`), racks, conversion, chains,
// cooling balance, thermal headroom, alarms, findings (grouped) and quirks.
void print_read(std::ostream& out, const Snapshot& snapshot, const Derived& derived, bool all = false);
void print_pue(std::ostream& out, const PueResult& pue);

}  // namespace astral::facility
