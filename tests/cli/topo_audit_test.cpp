// `astral topo audit` as operators run it: exit codes, JSON, NCCL topology output, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

using astral::test::fixture;
using astral::test::run_process;

namespace {
const std::string kHgx = fixture("astral/topo/hgx-h100-8x400g");
}

TEST_CASE("topo audit of the bundled HGX node passes and writes a loadable NCCL topology") {
  astral::test::TempDir out;
  auto r = run_process({ASTRAL_CLI, "topo", "audit", "--hwloc-xml", kHgx + "/hwloc.xml", "--sysfs-root", kHgx,
                        "--profile", "hgx-h100-8x400g", "--nccl-topo-out", out / "topo.xml"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Result: 12 passed, 0 warnings, 0 failed, 0 skipped") != std::string::npos);
  CHECK(r.out.find("0000:18:00.0  NVIDIA H100 80GB HBM3") != std::string::npos);
  std::string xml = astral::test::slurp(out / "topo.xml");
  CHECK(xml.rfind("<system version=\"1\">", 0) == 0);
  CHECK(xml.find("busid=\"0000:19:00.0\" class=\"0x020700\"") != std::string::npos);
}

TEST_CASE("topo audit --json follows the documented shape, a failed check exits 1") {
  auto r = run_process({ASTRAL_CLI, "topo", "audit", "--hwloc-xml", fixture("hwloc/nvidiaDGX2.xml"), "--profile",
                        "dgx2", "--json"});
  CHECK(r.exit_code == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpus"].size() == 16);
  CHECK(j["gpus"][0].contains("path_class"));
  bool t2_failed = false;
  for (const auto& c : j["checks"]) {
    CHECK(c.contains("id"));
    CHECK(c.contains("name"));
    CHECK(c.contains("detail"));
    std::string status = c["status"];
    CHECK((status == "pass" || status == "fail" || status == "warn" || status == "skipped"));
    if (c["id"] == "T2") t2_failed = status == "fail";
  }
  CHECK(t2_failed);
}

TEST_CASE("topo audit on this machine (no GPUs) runs and does not fail") {
  auto r = run_process({ASTRAL_CLI, "topo", "audit", "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["node"]["source"] == "live");
}

TEST_CASE("topo audit bad input: one line naming the input, exit 2") {
  astral::test::TempDir dir;
  std::ofstream(dir / "bad.xml") << "<topology version=\"2.0\">";
  auto r = run_process({ASTRAL_CLI, "topo", "audit", "--hwloc-xml", dir / "bad.xml"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("bad.xml: truncated hwloc XML") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);

  r = run_process({ASTRAL_CLI, "topo", "audit", "--hwloc-xml", kHgx + "/hwloc.xml", "--profile", "nope"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nope: neither a bundled profile") != std::string::npos);

  r = run_process({ASTRAL_CLI, "topo", "audit", "--hwloc-xml", kHgx + "/hwloc.xml", "--sysfs-root", dir.path()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no sys/ tree") != std::string::npos);

  r = run_process({ASTRAL_CLI, "topo", "audit", "--bogus-flag"});
  CHECK(r.exit_code == 2);
}
