#pragma once
// PCI addresses and PCIe link arithmetic shared by the node model, the sysfs readers, the audit and
// the NCCL topology writer.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace astral::topo {

// A PCI function address, printed the way sysfs and NCCL print it: "0000:18:00.0" (lower case).
struct PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;
  uint8_t function = 0;

  // Accepts "dddd:bb:dd.f" and the short "bb:dd.f" (domain 0); nullopt on anything else.
  static std::optional<PciAddress> parse(std::string_view text);
  std::string to_string() const;
  auto operator<=>(const PciAddress&) const = default;
};

// A PCIe link as sysfs reports it: speed string as written by the kernel ("32.0 GT/s PCIe"),
// lane count. Generation 0 / width 0 mean unknown.
struct PcieLink {
  int generation = 0;  // 1..6
  int width = 0;       // lanes

  bool known() const { return generation > 0 && width > 0; }
  // One-direction bandwidth in GB/s, the unit hwloc stores in pcidev.linkspeed.
  double gbytes_per_s() const;
  // The kernel's pci_speed_string() spelling for this generation, e.g. "16.0 GT/s PCIe".
  std::string speed_string() const;
  std::string to_string() const;  // "x16 Gen5" or "unknown"
  auto operator<=>(const PcieLink&) const = default;
};

// Per-lane GB/s for a PCIe generation (after line coding), as hwloc computes it.
double pcie_lane_gbytes_per_s(int generation);

// Parses a kernel speed string ("8.0 GT/s PCIe", the pre-5.6 "8 GT/s", "2.5 GT/s PCIe");
// returns the generation, or 0 for "Unknown" and anything unrecognised.
int pcie_generation_from_speed(std::string_view speed);

// hwloc stores only width x per-lane rate. Recovers a plausible (generation, width) pair from it,
// preferring x16 and then narrower links, newest generation first; unknown for 0 or no match.
PcieLink pcie_link_from_gbytes_per_s(double gbytes_per_s);

}  // namespace astral::topo
