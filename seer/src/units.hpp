#pragma once
// Units Seer's input files use: link and memory bandwidths in GB/s (10^9), capacities in GiB.
namespace astral::seer {

inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace astral::seer
