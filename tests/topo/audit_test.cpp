// Every audit check on the healthy synthetic HGX node and on faulty variants of it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "astral/topo/audit.hpp"
#include "hgx_fixture.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

using namespace astral::topo;
using astral::test::HgxSpec;

namespace {

struct Audited {
  astral::test::TempDir dir;
  AuditReport report;
  const CheckResult& check(const std::string& id) const {
    for (const auto& c : report.checks)
      if (c.id == id) return c;
    FAIL("no check " << id);
    throw;
  }
  bool finding(const std::string& id, const std::string& text) const {
    for (const auto& f : check(id).findings)
      if (f.find(text) != std::string::npos) return true;
    return false;
  }
};

std::unique_ptr<Audited> audit(const HgxSpec& spec, bool with_profile = true, bool with_sysfs = true) {
  auto a = std::make_unique<Audited>();
  astral::test::write_hgx_fixture(spec, a->dir.path());
  AuditOptions opt;
  if (with_profile) opt.profile = load_profile_by_name_or_path("hgx-h100-8x400g");
  if (with_sysfs) opt.sysfs.emplace(a->dir.path());
  a->report = run_audit(load_hwloc_xml(a->dir / "hwloc.xml"), opt);
  return a;
}

std::vector<std::string> failing(const AuditReport& r) {
  std::vector<std::string> ids;
  for (const auto& c : r.checks)
    if (c.status == CheckStatus::kFail) ids.push_back(c.id);
  return ids;
}

using Ids = std::vector<std::string>;

}  // namespace

TEST_CASE("healthy HGX node: every check passes, with and without the profile") {
  for (bool profile : {true, false}) {
    auto a = audit({}, profile);
    INFO(a->report.to_text());
    for (const auto& c : a->report.checks) CHECK(c.status == CheckStatus::kPass);
    CHECK_FALSE(a->report.failed());
    CHECK(a->report.checks.size() == 12);
  }
}

TEST_CASE("swapped NIC (seated under another GPU's switch) fails rail alignment") {
  HgxSpec spec;
  spec.moved_nic_from = 0, spec.moved_nic_to = 5;
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T4"});
  CHECK(a->finding("T4", "GPU0 (0000:18:00.0) has no NIC of its own: nearest is mlx5_1 at NODE"));
  CHECK(a->finding("T4", "rail 4 has 1 GPU(s) : 2 NIC(s) (mlx5_5,mlx5_0)"));
  // Without a profile the majority (1:1) is the expectation and the same faults show.
  auto b = audit(spec, false);
  CHECK(failing(b->report) == Ids{"T4"});
}

TEST_CASE("missing NIC fails the inventory and rail alignment") {
  HgxSpec spec;
  spec.missing_nics = {6};
  auto a = audit(spec);
  CHECK(failing(a->report) == (Ids{"T3", "T4"}));
  CHECK(a->finding("T3", "found 7 RDMA NICs, profile hgx-h100-8x400g expects 8"));
  CHECK(a->finding("T4", "GPU6 (0000:ba:00.0) has no NIC of its own"));
}

TEST_CASE("down-trained links: width fails, speed warns, the profile catches a wrong capability") {
  HgxSpec spec;
  spec.gpu_link[2] = {5, 8};   // x8 of x16
  spec.nic_link[7] = {4, 16};  // Gen4 of Gen5
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T6"});
  CHECK(a->finding("T6", "GPU2 (0000:3a:00.0) runs x8 of x16 lanes"));
  CHECK(a->finding("T6", "mlx5_7 runs Gen4 of Gen5"));
  // From the XML alone hwloc's GB/s figure still shows the narrow GPU link.
  auto b = audit(spec, true, false);
  CHECK(b->finding("T6", "GPU2 (0000:3a:00.0) link carries 31.5 GB/s"));
  CHECK(b->check("T6").status == CheckStatus::kFail);
  auto c = audit(spec, false, false);  // no profile: its peers are the expectation
  CHECK(c->finding("T6", "its peers have 63.0 GB/s"));
}

TEST_CASE("ACS redirect on a GPU switch fails T7, unreadable config space skips it") {
  HgxSpec spec;
  spec.acs_enabled_slots = {4};
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T7"});
  CHECK(a->finding("T7", "bridge 0000:97:00.0 redirects P2P"));
  CHECK(a->finding("T7", "ReqRedir+ CmpltRedir+"));
  HgxSpec unprivileged;
  unprivileged.acs_readable = false;
  auto b = audit(unprivileged);
  CHECK(b->check("T7").status == CheckStatus::kSkipped);
  CHECK(b->check("T7").detail.find("needs root") != std::string::npos);
}

TEST_CASE("port down and wrong rate fail T11") {
  HgxSpec spec;
  spec.nic_ports_down = {1};
  spec.nic_rate_gbps[3] = 200;
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T11"});
  CHECK(a->finding("T11", "mlx5_1 port 1 is DOWN / Polling"));
  CHECK(a->finding("T11", "mlx5_3 port 1 runs at 200 Gb/sec (4X HDR) where the profile expects 400"));
  // From the XML alone the hwloc port state still shows the down port.
  auto b = audit(spec, true, false);
  CHECK(b->finding("T11", "mlx5_1 port 1 state 1"));
}

TEST_CASE("mixed and outdated firmware fail T12") {
  HgxSpec spec;
  spec.nic_firmware[5] = "28.38.1002";
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T12"});
  CHECK(a->finding("T12", "mlx5_5 runs firmware 28.38.1002 while 7 other 15b3:1021 NICs run 28.39.1002"));
  CHECK(a->finding("T12", "older than the profile's minimum 28.39.1002"));
}

TEST_CASE("translated IOMMU fails T9, missing GPUDirect fails T10 unless dma-buf is available") {
  HgxSpec spec;
  spec.iommu_translated = true;
  spec.peermem = false;
  spec.open_kernel_module = false;
  auto a = audit(spec);
  CHECK(failing(a->report) == (Ids{"T9", "T10"}));
  CHECK(a->finding("T9", "boot with iommu=pt"));
  CHECK(a->finding("T10", "neither nvidia_peermem nor dma-buf"));
  HgxSpec dmabuf;
  dmabuf.peermem = false;
  auto b = audit(dmabuf);
  CHECK(b->check("T10").status == CheckStatus::kPass);
  CHECK(b->check("T10").detail.find("dma-buf") != std::string::npos);
}

TEST_CASE("a GPU without NUMA locality in sysfs fails T5") {
  HgxSpec spec;
  spec.gpu_numa_sysfs[0] = -1;
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T5"});
  CHECK(a->finding("T5", "GPU0 (0000:18:00.0): sysfs numa_node is -1"));
}

TEST_CASE("wrong GPU model and count fail T1") {
  HgxSpec spec;
  spec.gpu_device_id = 0x20b0;
  spec.gpu_model = "NVIDIA A100-SXM4-40GB";
  auto a = audit(spec);
  CHECK(failing(a->report) == Ids{"T1"});
  CHECK(a->finding("T1", "GPU0 (0000:18:00.0) is 10de:20b0"));
}

TEST_CASE("checks without their data source are skipped with the reason, never passed") {
  auto a = audit({}, true, false);
  for (const char* id : {"T7", "T9", "T10", "T12"}) {
    INFO(id);
    CHECK(a->check(id).status == CheckStatus::kSkipped);
    CHECK(a->check(id).detail.find("sysfs") != std::string::npos);
  }
  CHECK(a->check("T11").detail.find("rate not checked") != std::string::npos);
}

TEST_CASE("DGX-2 fixture against the dgx2 profile: the dead NVSwitch and the absent NICs") {
  AuditOptions opt;
  opt.profile = load_profile_by_name_or_path("dgx2");
  auto r = run_audit(load_hwloc_xml(astral::test::fixture("hwloc/nvidiaDGX2.xml")), opt);
  CHECK(failing(r) == (Ids{"T2", "T3"}));
  CHECK(r.checks[0].status == CheckStatus::kPass);  // 16 V100
}

TEST_CASE("JSON report carries the documented fields") {
  auto a = audit({});
  auto j = a->report.to_json();
  REQUIRE(j["gpus"].size() == 8);
  const auto& g = j["gpus"][3];
  CHECK(g["index"] == 3);
  CHECK(g["pci_bus_id"] == "0000:4b:00.0");
  CHECK(g["model"] == "NVIDIA H100 80GB HBM3");
  CHECK(g["numa"] == 0);
  CHECK(g["rail"] == 3);
  CHECK(g["nics"] == nlohmann::json::array({"mlx5_3"}));
  CHECK(g["path_class"] == "PIX");
  REQUIRE(j["nics"].size() == 8);
  CHECK(j["nics"][0]["name"] == "mlx5_0");
  CHECK(j["nics"][0]["rail"] == 0);
  CHECK(j["nics"][0]["ports"][0]["state"] == "ACTIVE");
  CHECK(j["nics"][0]["ports"][0]["rate_gbps"] == 400);
  REQUIRE(j["checks"].size() == 12);
  CHECK(j["checks"][3]["id"] == "T4");
  CHECK(j["checks"][3]["status"] == "pass");
  CHECK(j["node"]["hostname"] == "hgx-h100-01");
}

TEST_CASE("profiles: bundled ones parse, bad fields are named") {
  for (const auto& name : builtin_profile_names()) CHECK_NOTHROW(load_profile_by_name_or_path(name));
  auto error = [](const char* text) {
    try {
      parse_profile(nlohmann::json::parse(text), "p.json");
    } catch (const TopologyError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(error(R"({"gpus": {"count": -1}})") == "p.json: gpus.count must be a non-negative integer");
  CHECK(error(R"({"gpus": {"link": "sixteen lanes"}})").find("gpus.link") != std::string::npos);
  CHECK(error(R"({"gpu_nic_ratio": "2:2"})").find("gpu_nic_ratio") != std::string::npos);
  CHECK(error(R"({"rail_path": "NVL"})").find("rail_path") != std::string::npos);
  CHECK(error(R"({"iommu": ["sometimes"]})").find("iommu") != std::string::npos);
  CHECK(error(R"([1,2])").find("JSON object") != std::string::npos);
  CHECK_THROWS_AS(load_profile_by_name_or_path("no-such-profile"), TopologyError);
}

TEST_CASE("the committed HGX fixture is what the generator writes") {
  astral::test::TempDir dir;
  astral::test::write_hgx_fixture({}, dir.path());
  namespace fs = std::filesystem;
  std::string committed = astral::test::fixture("astral/topo/hgx-h100-8x400g");
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
    auto rel = e.path().lexically_relative(dir.path());  // fs::relative would resolve symlinks
    INFO(rel.string());
    REQUIRE(fs::exists(fs::symlink_status(fs::path(committed) / rel)));
    if (fs::is_symlink(fs::symlink_status(e.path()))) {
      CHECK(fs::read_symlink(e.path()) == fs::read_symlink(fs::path(committed) / rel));
    } else if (fs::is_regular_file(fs::symlink_status(e.path()))) {
      ++files;
      CHECK(fs::file_size(e.path()) == fs::file_size(fs::path(committed) / rel));
    }
  }
  CHECK(files > 100);
}
