#include "astral/topo/pci.hpp"

#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace astral::topo {
namespace {

bool parse_hex(std::string_view s, uint32_t max, uint32_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size() && out <= max;
}

}  // namespace

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
  // dddd:bb:dd.f or bb:dd.f
  auto dot = text.rfind('.');
  auto last_colon = text.rfind(':');
  if (dot == std::string_view::npos || last_colon == std::string_view::npos || dot < last_colon)
    return std::nullopt;
  uint32_t domain = 0, bus = 0, dev = 0, fn = 0;
  std::string_view head = text.substr(0, last_colon);
  auto first_colon = head.rfind(':');
  std::string_view bus_text = head;
  if (first_colon != std::string_view::npos) {
    if (!parse_hex(head.substr(0, first_colon), 0xffffffff, domain)) return std::nullopt;
    bus_text = head.substr(first_colon + 1);
  }
  if (bus_text.size() > 2 || !parse_hex(bus_text, 0xff, bus)) return std::nullopt;
  if (!parse_hex(text.substr(last_colon + 1, dot - last_colon - 1), 0x1f, dev)) return std::nullopt;
  if (!parse_hex(text.substr(dot + 1), 7, fn)) return std::nullopt;
  return PciAddress{domain, uint8_t(bus), uint8_t(dev), uint8_t(fn)};
}

std::string PciAddress::to_string() const {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

double pcie_lane_gbytes_per_s(int generation) {
  switch (generation) {
    case 1: return 0.25;                         // 2.5 GT/s, 8b/10b
    case 2: return 0.5;                          // 5 GT/s, 8b/10b
    case 3: return 8.0 * 128 / 130 / 8;          // 8 GT/s, 128b/130b
    case 4: return 16.0 * 128 / 130 / 8;
    case 5: return 32.0 * 128 / 130 / 8;
    case 6: return 64.0 * 242 / 256 / 8;         // PAM4 with FLIT encoding
    default: return 0;
  }
}

double PcieLink::gbytes_per_s() const { return known() ? width * pcie_lane_gbytes_per_s(generation) : 0; }

std::string PcieLink::speed_string() const {
  static constexpr std::array<const char*, 7> kSpeed = {
      "Unknown", "2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe",
      "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"};
  return generation >= 1 && generation <= 6 ? kSpeed[generation] : kSpeed[0];
}

std::string PcieLink::to_string() const {
  return known() ? fmt::format("x{} Gen{}", width, generation) : "unknown";
}

int pcie_generation_from_speed(std::string_view speed) {
  // The kernel prints "<rate> GT/s PCIe" (>= 5.7) or "<rate> GT/s" (older); compare the rate.
  auto end = speed.find(" GT/s");
  if (end == std::string_view::npos) return 0;
  std::string_view rate = speed.substr(0, end);
  static constexpr std::array<std::string_view, 7> kRates = {"", "2.5", "5", "8", "16", "32", "64"};
  static constexpr std::array<std::string_view, 7> kRatesDotted = {"", "2.5", "5.0", "8.0",
                                                                   "16.0", "32.0", "64.0"};
  for (int g = 1; g <= 6; ++g)
    if (rate == kRates[g] || rate == kRatesDotted[g]) return g;
  return 0;
}

PcieLink pcie_link_from_gbytes_per_s(double gbytes_per_s) {
  if (!(gbytes_per_s > 0)) return {};
  static constexpr int kWidths[] = {16, 8, 4, 2, 1, 32, 12};
  for (int width : kWidths)
    for (int gen = 6; gen >= 1; --gen) {
      double expected = width * pcie_lane_gbytes_per_s(gen);
      if (std::fabs(expected - gbytes_per_s) <= 0.005 * expected) return {gen, width};
    }
  return {};
}

}  // namespace astral::topo
