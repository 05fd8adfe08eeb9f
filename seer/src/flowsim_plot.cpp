// Plain SVG: axes, ticks, polylines and bars, with text escaped.
#include "astral/seer/flowsim_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace astral::seer {
namespace {

constexpr int kWidth = 840, kHeight = 440;
constexpr int kLeft = 70, kRight = 250, kTop = 50, kBottom = 60;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" axis maximum and tick step for [0, hi].
std::pair<double, double> nice_axis(double hi) {
  if (!(hi > 0) || !std::isfinite(hi)) hi = 1;
  double raw = hi / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  return {std::ceil(hi / step - 1e-9) * step, step};
}

struct Frame {
  double x_max, y_max;
  double px(double x) const { return kLeft + x / x_max * (kWidth - kLeft - kRight); }
  double py(double y) const { return kHeight - kBottom - y / y_max * (kHeight - kTop - kBottom); }
};

std::string header(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      kWidth, kHeight, kLeft, escape(title));
}

std::string y_axis(const Frame& fr, double step, const std::string& label, bool percent) {
  std::string out;
  for (double y = 0; y <= fr.y_max + step / 2; y += step) {
    out += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                       kLeft, fr.py(y), kWidth - kRight, fr.py(y));
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                       fr.py(y) + 4, percent ? fmt::format("{:.0f}%", y * 100) : fmt::format("{:g}", y));
  }
  out += fmt::format(
      "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      (kTop + kHeight - kBottom) / 2, escape(label));
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft,
                     kTop, kHeight - kBottom);
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft,
                     kHeight - kBottom, kWidth - kRight);
  return out;
}

std::string legend_entry(int index, const std::string& name) {
  int y = kTop + 10 + index * 20;
  return fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>\n"
      "<text x=\"{}\" y=\"{}\">{}</text>\n",
      kWidth - kRight + 16, y - 9, kColours[index % 8], kWidth - kRight + 36, y, escape(name));
}

}  // namespace

std::string svg_load_cdf(const std::map<std::string, std::vector<double>>& load_factors,
                         const std::string& title) {
  double hi = 1.0;
  for (const auto& [name, v] : load_factors)
    for (double x : v) hi = std::max(hi, x);
  auto [x_max, x_step] = nice_axis(hi);
  Frame fr{x_max, 1.0};
  std::string out = header(title) + y_axis(fr, 0.2, "fraction of links", true);
  for (double x = 0; x <= x_max + x_step / 2; x += x_step)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", fr.px(x),
                       kHeight - kBottom + 18, x);
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">link load (x ideal: 1 = as busy as the "
      "busiest NIC of a perfect network)</text>\n",
      (kLeft + kWidth - kRight) / 2, kHeight - 16);
  out += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#999\" "
      "stroke-dasharray=\"4 3\"/>\n",
      fr.px(1.0), kTop, kHeight - kBottom);
  int index = 0;
  for (const auto& [name, values] : load_factors) {
    if (values.empty()) continue;
    std::vector<double> v = values;
    std::sort(v.begin(), v.end());
    std::string points;
    size_t n = v.size(), stride = std::max<size_t>(1, n / 400);
    for (size_t i = 0; i < n; i += stride)
      points += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", fr.px(v[i]), fr.py(double(i) / n),
                            fr.px(v[i]), fr.py(double(std::min(n, i + stride)) / n));
    points += fmt::format("{:.1f},{:.1f}", fr.px(v.back()), fr.py(1.0));
    out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       kColours[index % 8], points);
    out += legend_entry(index, fmt::format("{} ({})", name, n));
    ++index;
  }
  return out + "</svg>\n";
}

std::string svg_bar_chart(const std::string& title, const std::string& y_label,
                          const std::vector<std::string>& groups,
                          const std::vector<BarSeries>& series, double y_max) {
  double hi = y_max;
  if (hi <= 0)
    for (const auto& s : series)
      for (double v : s.values) hi = std::max(hi, std::isfinite(v) ? v : 0);
  auto [top, step] = nice_axis(hi);
  Frame fr{1.0, top};
  std::string out = header(title) + y_axis(fr, step, y_label, false);
  double plot_w = kWidth - kLeft - kRight;
  double group_w = plot_w / std::max<size_t>(1, groups.size());
  double bar_w = group_w * 0.8 / std::max<size_t>(1, series.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    double x0 = kLeft + g * group_w + group_w * 0.1;
    for (size_t s = 0; s < series.size(); ++s) {
      double v = g < series[s].values.size() ? series[s].values[g] : 0;
      if (!std::isfinite(v)) v = 0;
      double y = fr.py(std::min(v, top));
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: "
          "{:.3f}</title></rect>\n",
          x0 + s * bar_w, y, bar_w - 2, fr.py(0) - y, kColours[s % 8], escape(series[s].name), v);
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{:.2f}</text>\n",
                         x0 + s * bar_w + bar_w / 2 - 1, y - 3, v);
    }
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       x0 + group_w * 0.4, kHeight - kBottom + 18, escape(groups[g]));
  }
  for (size_t s = 0; s < series.size(); ++s) out += legend_entry(int(s), series[s].name);
  return out + "</svg>\n";
}

}  // namespace astral::seer
