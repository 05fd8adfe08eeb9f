// The NCCL topology writer against NCCL's parser rules and the source node's GPU<->NIC pairing.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "astral/topo/nccl_xml.hpp"
#include "hgx_fixture.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

using namespace astral::topo;
using astral::test::fixture;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::string parse_error(const std::string& text) {
  try {
    parse_nccl_topology(text, "t.xml");
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE("published NCCL topology files load under the NCCL parser rules") {
  for (const char* f : {"ndv4-topo.xml", "ndv2-topo.xml", "ncv4-topo.xml", "p4d-24xl-topo.xml", "g5.48xl-topo.xml"}) {
    INFO(f);
    auto path = fixture(std::string("nccl-topo/") + f);
    auto root = parse_nccl_topology(read(path), path);
    CHECK(root.name == "system");
    CHECK_FALSE(root.children.empty());
  }
}

TEST_CASE("the reader rejects what NCCL's parser cannot read, naming the line") {
  CHECK(parse_error("<?xml version=\"1.0\"?>\n<system version=\"1\"/>").find("XML declaration") != std::string::npos);
  CHECK(parse_error("<system version=\"1\">\n\t<cpu numaid=\"0\"/>\n</system>").find("t.xml:2: tab") != std::string::npos);
  CHECK(parse_error("<system version=\"1\">\n  <cpu numaid=\"0\"\n   affinity=\"1\"/>\n</system>").find("spans lines") !=
        std::string::npos);
  std::string many = "<system version=\"1\"><cpu";
  for (int i = 0; i < 17; ++i) many += " a" + std::to_string(i) + "=\"1\"";
  CHECK(parse_error(many + "/></system>").find("more than 16 attributes") != std::string::npos);
  CHECK(parse_error("<system version=\"1\"><cpu x=\"" + std::string(256, 'a') + "\"/></system>").find("255") !=
        std::string::npos);
  CHECK(parse_error("<system version=\"1\"><cpu><pci busid=\"0000:1A:00.0\"/></cpu></system>").find("lower-case") !=
        std::string::npos);
  CHECK(parse_error("<system version=\"1\"><cpu><pci busid=\"0000:1a:00.0\" link_speed=\"fast\"/></cpu></system>")
            .find("unknown to NCCL") != std::string::npos);
  CHECK(parse_error("<system version=\"1\"><cpu></pci></system>").find("closes <cpu>") != std::string::npos);
  CHECK(parse_error("<system version=\"1\"><gpu/></system>").find("<gpu> inside <system>") != std::string::npos);
  CHECK(parse_error("<system version=\"1\"><cpu name=\"a&amp;b\"/></system>").find("entities") != std::string::npos);
  CHECK(parse_error("<system version=\"1\">").find("end of file") != std::string::npos);
  CHECK(parse_error("<!-- ok --><system version=\"1\"><cpu numaid=\"0\"/></system>") == "accepted");
}

TEST_CASE("HGX: one switch per GPU+NIC pair, capability links from sysfs, pairing kept") {
  astral::test::TempDir dir;
  astral::test::HgxSpec spec;
  spec.gpu_link[1] = {5, 8};  // down-trained: NCCL reads capability, so the file still says x16
  astral::test::write_hgx_fixture(spec, dir.path());
  Node node = load_hwloc_xml(dir / "hwloc.xml");
  sysfs::Root root(dir.path());
  std::string xml = write_nccl_topology(node, &root);
  CHECK(xml.find("<?xml") == std::string::npos);
  CHECK(xml.find('\t') == std::string::npos);
  auto system = parse_nccl_topology(xml, "generated");
  REQUIRE(system.children.size() == 2);  // two NUMA nodes
  const auto& cpu0 = system.children[0];
  CHECK(*cpu0.attribute("numaid") == "0");
  CHECK(*cpu0.attribute("affinity") == "00000003");
  REQUIRE(cpu0.children.size() == 4);  // four switches
  const auto& sw = cpu0.children[0];
  CHECK(*sw.attribute("class") == "0x060400");
  CHECK(*sw.attribute("busid") == "0000:16:00.0");  // the upstream port stands for the switch
  REQUIRE(sw.children.size() == 2);
  CHECK(*sw.children[0].attribute("class") == "0x030200");
  CHECK(*sw.children[1].attribute("class") == "0x020700");
  CHECK(*sw.children[1].attribute("link_speed") == "32.0 GT/s PCIe");
  CHECK(*cpu0.children[1].children[0].attribute("link_width") == "16");
  CHECK(check_nccl_pairing(node, system).empty());
}

TEST_CASE("pairing check catches a topology file that moves a NIC away from its GPU") {
  astral::test::TempDir dir;
  astral::test::write_hgx_fixture({}, dir.path());
  Node node = load_hwloc_xml(dir / "hwloc.xml");
  std::string xml = write_nccl_topology(node);
  // Swap the bus ids of NIC 0 and NIC 4: each GPU now finds a NIC of the other socket in its switch.
  auto swap = [&](const std::string& a, const std::string& b) {
    std::string tmp = "@@";
    for (auto [from, to] : {std::pair{a, tmp}, std::pair{b, a}, std::pair{tmp, b}})
      for (size_t p; (p = xml.find(from)) != std::string::npos;) xml.replace(p, from.size(), to);
  };
  swap("0000:19:00.0", "0000:99:00.0");
  auto problems = check_nccl_pairing(node, parse_nccl_topology(xml, "edited"));
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("PIX in the node but SYS") != std::string::npos);
}

TEST_CASE("multi-level switches nest and hwloc-only links are recovered (DGX-2)") {
  Node node = load_hwloc_xml(fixture("hwloc/nvidiaDGX2.xml"));
  auto system = parse_nccl_topology(write_nccl_topology(node), "dgx2");
  const auto& top = system.children[0].children[0];
  CHECK(*top.attribute("busid") == "0000:2c:00.0");
  REQUIRE(top.children.size() == 2);
  CHECK(top.children[0].children.size() == 2);  // two GPUs under the second-level switch
  CHECK(*top.children[0].children[0].attribute("link_speed") == "8.0 GT/s PCIe");
  CHECK(check_nccl_pairing(node, system).empty());
}
