// Discovery on the real hwloc fixtures and on the synthetic HGX node.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "astral/topo/node.hpp"
#include "hgx_fixture.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

using namespace astral::topo;
using astral::test::fixture;

namespace {
int count_rail(const Node& n, int rail) {
  int c = 0;
  for (const auto& g : n.gpus) c += g.rail == rail;
  return c;
}
}  // namespace

TEST_CASE("DGX-2: 16 GPUs behind two switch levels, 12 NVSwitches (one dead), no NICs") {
  Node n = load_hwloc_xml(fixture("hwloc/nvidiaDGX2.xml"));
  CHECK(n.gpus.size() == 16);
  CHECK(n.nics.empty());
  CHECK(n.nvswitches.size() == 12);
  CHECK(std::count_if(n.nvswitches.begin(), n.nvswitches.end(), [](auto& s) { return !s.responding; }) == 1);
  CHECK(n.rails.empty());
  CHECK(n.numa_nodes.size() == 2);
  CHECK(n.gpus[0].model == "Tesla V100-SXM3-32GB-H");
  // Measured classes from topology-formats.md §1.5: 34 vs 36 PIX, 34 vs 39 PXB, 34 vs b7 SYS.
  auto* g34 = n.gpu_by_bus_id("0000:34:00.0");
  REQUIRE(g34);
  CHECK(classify_path(g34->pci, n.gpu_by_bus_id("0000:36:00.0")->pci) == PathClass::PIX);
  CHECK(classify_path(g34->pci, n.gpu_by_bus_id("0000:39:00.0")->pci) == PathClass::PXB);
  CHECK(classify_path(g34->pci, n.gpu_by_bus_id("0000:b7:00.0")->pci) == PathClass::SYS);
  CHECK(n.gpus[0].pci.numa_node == 0);
  CHECK(n.gpus[15].pci.numa_node == 1);
}

TEST_CASE("AWS p4d (flat VM PCI): 8 GPUs, 4 EFA NICs each shared by 2 GPUs -> 4 rails at PHB") {
  Node n = load_hwloc_xml(fixture("hwloc/aws-p4d-topology.xml"));
  REQUIRE(n.gpus.size() == 8);
  REQUIRE(n.nics.size() == 4);
  CHECK(n.nvswitches.size() == 6);
  CHECK(n.pcie_switches.empty());
  REQUIRE(n.rails.size() == 4);
  for (int r = 0; r < 4; ++r) CHECK(count_rail(n, r) == 2);
  for (const auto& nic : n.nics) {
    CHECK(nic.transport == NicTransport::Efa);
    CHECK(nic.netdev.empty());  // EFA has no netdev
    CHECK(nic.gpus.size() == 2);
  }
  CHECK(n.gpus[0].nic_path == PathClass::PHB);
  CHECK(n.gpu_nic[0][1] == PathClass::NODE);  // another host bridge, same socket
  CHECK(n.gpu_nic[0][3] == PathClass::SYS);
  CHECK(n.nics[0].name == "rdmap16s27");
  CHECK(n.gpus[0].rail == 0);
  CHECK(n.gpus[7].rail == 3);
}

TEST_CASE("whole-I/O Supermicro: NVIDIA GPUs counted, AMD VGA and Matrox BMC not, one InfiniBand NIC") {
  Node n = load_hwloc_xml(fixture("hwloc/32em64t-2n8c2t-pci-wholeio.xml"));
  CHECK(n.gpus.size() == 3);
  REQUIRE(n.nics.size() == 1);
  CHECK(n.nics[0].name == "mlx5_0");
  CHECK(n.nics[0].netdev == "ib0");
  CHECK(n.nics[0].transport == NicTransport::InfiniBand);
  // Only the GPU under the NIC's bridge owns it; the PHB one must not share its rail.
  REQUIRE(n.rails.size() == 1);
  CHECK(n.rails[0].gpus == std::vector<int>{2});
  CHECK(n.gpus[1].rail == -1);
}

TEST_CASE("SR-IOV virtual functions are not counted as RDMA NICs") {
  Node n = load_hwloc_xml(fixture("hwloc/16intel64-manyVFs.xml"));
  CHECK(n.gpus.empty());
  CHECK(n.nics.size() == 3);  // the usNIC physical functions; 12 VFs and the i350 ports are not RDMA NICs
  for (const auto& nic : n.nics) CHECK(nic.name.rfind("usnic_", 0) == 0);
}

TEST_CASE("IBM x3950 with 4 NUMA nodes and Groups: no GPUs, no RDMA NICs (BMC VGA ignored)") {
  Node n = load_hwloc_xml(fixture("hwloc/96em64t-4n4d3ca2co-pci.xml"));
  CHECK(n.gpus.empty());
  CHECK(n.nics.empty());
  CHECK(n.numa_nodes.size() == 4);
}

TEST_CASE("synthetic HGX: 8 PIX rails numbered by NIC bus id, 4 NVSwitches") {
  astral::test::TempDir dir;
  astral::test::write_hgx_fixture({}, dir.path());
  Node n = load_hwloc_xml(dir / "hwloc.xml");
  REQUIRE(n.gpus.size() == 8);
  REQUIRE(n.nics.size() == 8);
  CHECK(n.nvswitches.size() == 4);
  REQUIRE(n.rails.size() == 8);
  for (int i = 0; i < 8; ++i) {
    CHECK(n.gpus[size_t(i)].rail == i);
    CHECK(n.gpus[size_t(i)].nic_path == PathClass::PIX);
    CHECK(n.nics[size_t(i)].name == "mlx5_" + std::to_string(i));
  }
  CHECK(n.hostname == "hgx-h100-01");
  CHECK(n.cpu.vendor == "GenuineIntel");
  CHECK(n.numa_nodes[1].local_cpus == "0000000c");
}

TEST_CASE("rails: a missing NIC leaves its GPU without a rail instead of merging rails") {
  astral::test::TempDir dir;
  astral::test::HgxSpec spec;
  spec.missing_nics = {3};
  astral::test::write_hgx_fixture(spec, dir.path());
  Node n = load_hwloc_xml(dir / "hwloc.xml");
  CHECK(n.nics.size() == 7);
  CHECK(n.rails.size() == 7);
  CHECK(n.gpus[3].rail == -1);
  CHECK(n.gpus[2].rail == 2);
  CHECK(n.gpus[4].rail == 3);  // numbering follows NIC bus order
}

TEST_CASE("rails: one GPU with several NICs under its switch, and two GPUs sharing one NIC") {
  astral::test::TempDir dir;
  astral::test::HgxSpec spec;
  spec.moved_nic_from = 0;  // slot 0's NIC seated under slot 5's switch
  spec.moved_nic_to = 5;
  astral::test::write_hgx_fixture(spec, dir.path());
  Node n = load_hwloc_xml(dir / "hwloc.xml");
  CHECK(n.gpus[0].rail == -1);
  const Gpu& g5 = n.gpus[5];
  REQUIRE(g5.rail >= 0);
  CHECK(g5.nics.size() == 2);  // 1:2

  // k:1 on a hand-made matrix: two GPUs at PIX to one NIC.
  Node m;
  m.gpus.resize(2);
  m.nics.resize(1);
  m.gpus[0].index = 0, m.gpus[1].index = 1;
  m.gpu_nic = {{PathClass::PIX}, {PathClass::PIX}};
  assign_rails(m);
  REQUIRE(m.rails.size() == 1);
  CHECK(m.rails[0].gpus.size() == 2);
  CHECK(m.nics[0].gpus.size() == 2);
}

TEST_CASE("rail numbers are identical on identical nodes whatever their NIC names") {
  astral::test::TempDir a, b;
  astral::test::write_hgx_fixture({}, a.path());
  astral::test::HgxSpec other;
  other.hostname = "hgx-h100-02";
  astral::test::write_hgx_fixture(other, b.path());
  Node na = load_hwloc_xml(a / "hwloc.xml"), nb = load_hwloc_xml(b / "hwloc.xml");
  for (size_t i = 0; i < na.gpus.size(); ++i) CHECK(na.gpus[i].rail == nb.gpus[i].rail);
}

TEST_CASE("bad hwloc input: one clear error naming the file") {
  astral::test::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  auto message = [](const std::string& path) {
    try {
      load_hwloc_xml(path);
    } catch (const TopologyError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message(dir / "absent.xml").find("absent.xml: cannot read") != std::string::npos);
  CHECK(message(write("empty.xml", "")).find("empty file") != std::string::npos);
  CHECK(message(write("notxml.xml", "{\"json\": true}")).find("not an hwloc XML") != std::string::npos);
  std::ifstream in(fixture("hwloc/nvidiaDGX2.xml"));
  std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(message(write("trunc.xml", full.substr(0, full.size() / 2))).find("truncated") != std::string::npos);
  CHECK(message(write("noobj.xml", "<topology version=\"2.0\"></topology>")).find("no objects") != std::string::npos);
  std::string garbled = full;
  garbled.replace(garbled.find("<object type=\"Package\""), 7, "<objXct");
  CHECK(message(write("garbled.xml", garbled)).find("garbled.xml") != std::string::npos);
  CHECK(message(dir.path()).find("not a regular file") != std::string::npos);
}

// libhwloc 2.9 dereferences NULL importing a root object without complete_nodeset (found by
// fuzz_topo_hwloc_xml). The file must come back as an error naming it, and this process lives on.
TEST_CASE("Fuzz regressions: XML that crashes libhwloc's own import is one error naming the file") {
  astral::test::TempDir dir;
  std::ifstream in(fixture("hwloc/nvidiaDGX2.xml"));
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  xml.replace(xml.find("complete_nodeset="), 16, "complete_renamed");  // the Machine object's
  const std::string handmade = dir / "no-complete-nodeset.xml";
  std::ofstream(handmade) << xml;
  const std::string found = std::string(ASTRAL_FIXTURES_DIR) +
      "/astral/fuzz-regressions/topo_hwloc_xml/crash-e1bdaa33ea216b72a0dc6c6bf63a87a172154891";
  for (const std::string& path : {handmade, found}) {
    INFO(path);
    try {
      load_hwloc_xml(path);
      FAIL("loaded");
    } catch (const TopologyError& e) {
      const std::string what = e.what();
      CHECK(what.rfind(path + ": malformed hwloc XML", 0) == 0);
      CHECK(what.find("crashed") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  // A PCI device number above 1f (crash-681ea089...): the NCCL topology written for it failed
  // our own reader. Now the load says so.
  const std::string impossible = std::string(ASTRAL_FIXTURES_DIR) +
      "/astral/fuzz-regressions/topo_hwloc_xml/crash-681ea089f4b97c0e5672bc16733dbab0a836a7bb";
  try {
    load_hwloc_xml(impossible);
    FAIL("loaded");
  } catch (const TopologyError& e) {
    CHECK(std::string(e.what()).rfind(impossible + ": PCI address ", 0) == 0);
  }
  // The probe costs a child per file, not correctness: a good file still loads fully after it.
  CHECK(load_hwloc_xml(fixture("hwloc/nvidiaDGX2.xml")).gpus.size() == 16);
  CHECK(load_hwloc_xml(fixture("hwloc/nvidiaDGX2.xml"), XmlImport::in_process).gpus.size() == 16);
}

TEST_CASE("live discovery works on this machine without GPUs") {
  Node n = discover_live();
  CHECK(n.live);
  CHECK_FALSE(n.hostname.empty());
  CHECK_FALSE(n.numa_nodes.empty());
}
