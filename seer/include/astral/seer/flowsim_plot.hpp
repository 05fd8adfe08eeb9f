#pragma once
// SVG charts written by the project itself (no plotting runtime): the link-load distribution of a
// simulation and bar charts for fabric comparisons. Output is a complete standalone SVG document.
#include <map>
#include <string>
#include <vector>

#include "astral/seer/flowsim.hpp"

namespace astral::seer {

// Cumulative distribution of link load (x ideal) per link class.
std::string svg_load_cdf(const std::map<std::string, std::vector<double>>& load_factors,
                         const std::string& title);

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per group
};

// Grouped bars; y from 0 to y_max (0 = fit the data).
std::string svg_bar_chart(const std::string& title, const std::string& y_label,
                          const std::vector<std::string>& groups,
                          const std::vector<BarSeries>& series, double y_max = 0);

}  // namespace astral::seer
