#include <catch2/catch.hpp>

#include "astral/topo/pci.hpp"

using namespace astral::topo;

TEST_CASE("PCI addresses parse in sysfs and short forms and print canonically") {
  auto a = PciAddress::parse("0000:18:00.0");
  REQUIRE(a);
  CHECK(a->bus == 0x18);
  CHECK(a->to_string() == "0000:18:00.0");
  auto b = PciAddress::parse("AF:1f.7");
  REQUIRE(b);
  CHECK(b->to_string() == "0000:af:1f.7");
  CHECK(PciAddress::parse("ffff:ff:01.0")->domain == 0xffff);
  for (const char* bad : {"", "0000:18:00", "0000:18:20.0", "0000:118:00.0", "0000:18:00.8", "xx:00.0", "pci0000:00"})
    CHECK_FALSE(PciAddress::parse(bad));
  CHECK(*PciAddress::parse("0000:18:00.0") < *PciAddress::parse("0000:19:00.0"));
}

TEST_CASE("PCIe link arithmetic matches hwloc's figures and the kernel's strings") {
  CHECK(PcieLink{5, 16}.gbytes_per_s() == Approx(63.015385));
  CHECK(PcieLink{4, 16}.gbytes_per_s() == Approx(31.507692));
  CHECK(PcieLink{3, 16}.gbytes_per_s() == Approx(15.753846));
  CHECK(PcieLink{4, 2}.gbytes_per_s() == Approx(3.938462));
  CHECK(PcieLink{5, 16}.speed_string() == "32.0 GT/s PCIe");
  CHECK(PcieLink{1, 1}.speed_string() == "2.5 GT/s PCIe");
  CHECK(pcie_generation_from_speed("8.0 GT/s PCIe") == 3);
  CHECK(pcie_generation_from_speed("8 GT/s") == 3);  // kernels <= 5.6
  CHECK(pcie_generation_from_speed("2.5 GT/s PCIe") == 1);
  CHECK(pcie_generation_from_speed("64.0 GT/s PCIe") == 6);
  CHECK(pcie_generation_from_speed("Unknown") == 0);
  CHECK(pcie_generation_from_speed("") == 0);
  CHECK(pcie_link_from_gbytes_per_s(63.015385) == PcieLink{5, 16});
  CHECK(pcie_link_from_gbytes_per_s(31.507692) == PcieLink{4, 16});
  CHECK(pcie_link_from_gbytes_per_s(0).known() == false);
  CHECK(pcie_link_from_gbytes_per_s(0.7).known() == false);  // no width x generation gives 0.7 GB/s
  CHECK(pcie_link_from_gbytes_per_s(1.0) == PcieLink{1, 4});
}
