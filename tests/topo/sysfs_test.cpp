// sysfs readers on node_exporter's real fixture tree and on the synthetic HGX root.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "astral/topo/sysfs.hpp"
#include "hgx_fixture.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"
#include "ttar.hpp"

using namespace astral::topo;
using astral::test::TempDir;

namespace {
PciAddress addr(const char* s) { return *PciAddress::parse(s); }
}  // namespace

TEST_CASE("node_exporter fixture: PCIe links, parent bridge, NUMA and IB ports") {
  TempDir dir;
  astral::test::untar_ttar(astral::test::fixture("sysfs/sys.ttar"), dir.path());
  sysfs::Root root(dir.path());
  REQUIRE(root.has_sys());
  auto dev = sysfs::read_pci_device(root, addr("0000:01:00.0"));
  REQUIRE(dev.present);
  CHECK(dev.current_speed == "8.0 GT/s PCIe");
  CHECK(dev.current.generation == 3);
  CHECK(dev.max.width > 0);
  REQUIRE(dev.parent);
  CHECK(dev.parent->to_string() == "0000:00:02.1");
  CHECK_FALSE(sysfs::read_pci_device(root, addr("0000:77:00.0")).present);

  auto ib = sysfs::read_ib_devices(root);
  REQUIRE(ib.size() >= 2);
  auto mlx4 = std::find_if(ib.begin(), ib.end(), [](auto& d) { return d.name == "mlx4_0"; });
  REQUIRE(mlx4 != ib.end());
  CHECK(mlx4->fw_ver == "2.31.5050");
  REQUIRE_FALSE(mlx4->ports.empty());
  CHECK(mlx4->ports[0].state_code == 4);
  CHECK(mlx4->ports[0].state == "ACTIVE");
  CHECK(mlx4->ports[0].phys_state == "LinkUp");
  CHECK(mlx4->ports[0].rate_gbps == 40);
  CHECK(mlx4->ports[0].link_layer == "InfiniBand");

  // The same tree passed as a copy of /sys itself.
  sysfs::Root as_sys(dir / "sys");
  CHECK(sysfs::read_pci_device(as_sys, addr("0000:01:00.0")).present);
}

TEST_CASE("ACS control, IOMMU mode and GPUDirect from the synthetic HGX root") {
  TempDir dir;
  astral::test::HgxSpec spec;
  spec.acs_enabled_slots = {2};
  astral::test::write_hgx_fixture(spec, dir.path());
  sysfs::Root root(dir.path());
  auto clean = sysfs::read_acs(root, addr("0000:17:00.0"));  // slot 0 downstream port
  CHECK(clean.state == sysfs::AcsStatus::State::kRead);
  CHECK_FALSE(clean.redirects_p2p());
  auto dirty = sysfs::read_acs(root, addr("0000:39:00.0"));  // slot 2 downstream port
  CHECK(dirty.redirects_p2p());
  CHECK(dirty.flags() == "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-");
  CHECK(sysfs::read_acs(root, addr("0000:18:00.0")).state == sysfs::AcsStatus::State::kNotPresent);  // GPU

  auto iommu = sysfs::read_iommu(root);
  CHECK(iommu.mode == "passthrough");
  CHECK(iommu.group_count > 8);
  CHECK(iommu.cmdline_flags == "intel_iommu=on iommu=pt");

  auto gdr = sysfs::read_gpudirect(root);
  CHECK(gdr.nvidia_driver);
  CHECK(gdr.nvidia_peermem);
  CHECK(gdr.dmabuf);
  CHECK(gdr.rdma_capable());
}

TEST_CASE("unprivileged config space (64 bytes) reads as needs-root, never as ACS off") {
  TempDir dir;
  astral::test::HgxSpec spec;
  spec.acs_readable = false;
  astral::test::write_hgx_fixture(spec, dir.path());
  auto st = sysfs::read_acs(sysfs::Root(dir.path()), addr("0000:17:00.0"));
  CHECK(st.state == sysfs::AcsStatus::State::kNeedsRoot);
  CHECK_FALSE(st.redirects_p2p());
}

TEST_CASE("odd and unreadable sysfs files are reported, not fatal") {
  TempDir dir;
  astral::test::write_hgx_fixture({}, dir.path());
  sysfs::Root root(dir.path());
  auto dev_dir = std::filesystem::canonical(dir / "sys/bus/pci/devices/0000:18:00.0");
  std::ofstream(dev_dir / "current_link_width") << "sixteen\n";
  std::filesystem::remove(dev_dir / "max_link_speed");
  auto st = sysfs::read_pci_device(root, addr("0000:18:00.0"));
  CHECK(st.present);
  CHECK(st.current.width == 0);
  CHECK(st.problem.find("current_link_width") != std::string::npos);
  CHECK(st.problem.find("max_link_speed") != std::string::npos);

  // A capability list that loops back on itself must end, not spin.
  std::string cfg(4096, '\0');
  cfg[0x100] = 0x01, cfg[0x102] = 0x01, cfg[0x103] = 0x10;  // AER, next = 0x100 (itself)
  std::ofstream(std::filesystem::canonical(dir / "sys/bus/pci/devices/0000:17:00.0") / "config", std::ios::binary)
      << cfg;
  CHECK(sysfs::read_acs(root, addr("0000:17:00.0")).state == sysfs::AcsStatus::State::kNotPresent);

  std::ofstream(std::filesystem::canonical(dir / "sys/class/infiniband/mlx5_0") / "ports/1/rate", std::ios::trunc);
  auto ib = sysfs::read_ib_devices(root);
  CHECK_FALSE(ib.front().problem.empty());

  sysfs::Root nowhere(dir / "does-not-exist");
  CHECK_FALSE(nowhere.has_sys());
  CHECK(sysfs::read_ib_devices(nowhere).empty());
  CHECK(sysfs::read_iommu(nowhere).mode == "unknown");
}
