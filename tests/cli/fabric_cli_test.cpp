// `astral fabric ...` end to end: generate, show, paths, locate, sim, compare; exit codes and
// one-line errors that name the input.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_process.hpp"

using astral::test::run_process;
using astral::test::slurp;
using nlohmann::json;

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path("fabric_cli_" + name) { std::remove(path.c_str()); }
  ~TempFile() { std::remove(path.c_str()); }
};

// A small fabric: 16 hosts x 8 GPUs on radix-16 switches (8 hosts per leaf, 2 segments).
void generate(const std::string& kind, const std::string& path, const std::string& extra = "") {
  std::vector<std::string> argv = {ASTRAL_CLI, "fabric", "generate", kind, "--gpus", "128",
                                   "--radix", "16", "-o", path};
  if (!extra.empty()) argv.push_back(extra);
  auto r = run_process(argv);
  REQUIRE(r.exit_code == 0);
}

}  // namespace

TEST_CASE("fabric generate writes a fabric that show summarises") {
  TempFile f("gen.json");
  auto r = run_process({ASTRAL_CLI, "fabric", "generate", "same-rail-t2", "--gpus", "128", "--radix",
                        "16", "-o", f.path});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("bisection") != std::string::npos);
  json doc = json::parse(slurp(f.path));
  CHECK(doc["format"] == "astral-fabric");
  CHECK(doc["hosts"].size() == 16);
  auto show = run_process({ASTRAL_CLI, "fabric", "show", f.path, "--json"});
  REQUIRE(show.exit_code == 0);
  json s = json::parse(show.out);
  CHECK(s["gpus"] == 128);
  CHECK(s["tiers"].size() == 3);
  CHECK(s["cross_rail_network"] == true);
}

TEST_CASE("fabric generate rejects bad kinds and impossible sizes with exit 2") {
  TempFile f("bad.json");
  auto r = run_process({ASTRAL_CLI, "fabric", "generate", "torus", "--gpus", "128", "-o", f.path});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("torus") != std::string::npos);
  // Eight same-rail pods of 8,192 GPUs are what a radix-64 core can join.
  r = run_process({ASTRAL_CLI, "fabric", "generate", "same-rail-t2", "--gpus", "131072", "--radix",
                   "64", "-o", f.path});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("at most 65536 GPUs") != std::string::npos);
  std::ifstream none(f.path);
  CHECK_FALSE(none.good());  // nothing half-written
}

TEST_CASE("fabric show names the file and the element of a broken description") {
  auto r = run_process({ASTRAL_CLI, "fabric", "show", "/nonexistent/fabric.json"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("/nonexistent/fabric.json") != std::string::npos);
  TempFile f("broken.json");
  generate("fat-tree", f.path);
  json doc = json::parse(slurp(f.path));
  doc["links"][3]["b"] = "r9-99:1";
  std::ofstream(f.path) << doc.dump();
  r = run_process({ASTRAL_CLI, "fabric", "show", f.path});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("link 3") != std::string::npos);
  CHECK(r.err.find("r9-99") != std::string::npos);
}

TEST_CASE("fabric paths and locate answer what an operator asks") {
  TempFile f("ops.json");
  generate("same-rail-t2", f.path);
  auto p = run_process({ASTRAL_CLI, "fabric", "paths", "--fabric", f.path, "--from", "node0001:0",
                        "--to", "node0016:3", "--json"});
  REQUIRE(p.exit_code == 0);
  json j = json::parse(p.out);
  CHECK(j["total_paths"].get<int>() > 0);
  bool pxn = false;
  for (const auto& path : j["paths"]) pxn |= path["pxn"].get<bool>();
  CHECK(pxn);
  auto l = run_process({ASTRAL_CLI, "fabric", "locate", "--fabric", f.path, "node0016:mlx5_3:1"});
  REQUIRE(l.exit_code == 0);
  CHECK(l.out.find("r3-01:") != std::string::npos);
  auto bad = run_process({ASTRAL_CLI, "fabric", "paths", "--fabric", f.path, "--from", "nodeX:0",
                          "--to", "0"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("nodeX:0") != std::string::npos);
}

TEST_CASE("fabric sim prints JSON and an SVG plot, undeliverable traffic exits 1") {
  TempFile f("sim.json"), plot("sim.svg");
  generate("same-rail-t2", f.path);
  auto r = run_process({ASTRAL_CLI, "fabric", "sim", "--fabric", f.path, "--pattern", "alltoall",
                        "--bytes", "64MiB", "--routing", "same-rail", "--json", "--plot", plot.path,
                        "-q"});
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j["efficiency"].get<double>() > 0.5);
  CHECK(j["bytes_per_gpu"].get<double>() == 64.0 * 1024 * 1024);
  CHECK(slurp(plot.path).rfind("<svg", 0) == 0);

  TempFile rail("railonly.json");
  generate("rail-only", rail.path);
  auto direct = run_process({ASTRAL_CLI, "fabric", "sim", "--fabric", rail.path, "--routing", "ecmp", "-q"});
  CHECK(direct.exit_code == 1);
  CHECK(direct.out.find("unroutable") != std::string::npos);

  auto bad = run_process({ASTRAL_CLI, "fabric", "sim", "--fabric", f.path, "--bytes", "lots", "-q"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--bytes 'lots'") != std::string::npos);
  bad = run_process({ASTRAL_CLI, "fabric", "sim", "--fabric", f.path, "--fail", "r0-77:1", "-q"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("r0-77:1") != std::string::npos);
}

TEST_CASE("fabric compare runs both designs and reports the gain") {
  TempFile plot("cmp.svg");
  auto r = run_process({ASTRAL_CLI, "fabric", "compare", "--gpus", "128", "--radix", "16", "--json",
                        "--plot", plot.path, "-q"});
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["rows"].size() == 4);
  CHECK(j[0]["rows"][0]["fabric_kind"] == "fat-tree");
  CHECK(j[0]["rows"][2]["fabric_kind"] == "same-rail-t2");
  double gain = j[0]["gain"].get<double>();
  double ecmp = j[0]["rows"][0]["efficiency"].get<double>();
  double same_rail = j[0]["rows"][2]["efficiency"].get<double>();
  CHECK(gain == Approx(same_rail / ecmp - 1));
  CHECK(slurp(plot.path).find("same-rail-t2 same-rail") != std::string::npos);
}
