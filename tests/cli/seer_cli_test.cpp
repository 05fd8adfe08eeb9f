// `astral seer` as users run it: predict (text, JSON, timeline), search, validate, compare,
// calibrate, collective; exit codes and one-line errors for bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

using astral::test::fixture;
using astral::test::run_process;
using nlohmann::json;

TEST_CASE("seer predict prints the step, MFU, memory and breakdown, --json has the documented keys") {
  auto r = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", "a100-80gb", "--gpus", "64",
                        "--config", "korthikanti-175b-selective"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  for (const char* text : {"step time", "MFU", "HFU", "memory", "pipeline bubble", "exposed TP comm"})
    CHECK(r.out.find(text) != std::string::npos);
  auto j = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", "a100-80gb", "--gpus", "64",
                        "--config", "korthikanti-175b-selective", "--json"});
  REQUIRE(j.exit_code == 0);
  json doc = json::parse(j.out);
  for (const char* key : {"step_time_s", "mfu", "hfu", "memory_gib_per_gpu", "breakdown"}) CHECK(doc.contains(key));
  CHECK(doc["step_time_s"].get<double>() == Approx(13.75).epsilon(0.05));
  CHECK(doc["breakdown"]["exposed_comm_s"].contains("tp"));
}

TEST_CASE("seer predict writes a Chrome trace timeline that compare reads back") {
  astral::test::TempDir dir;
  const std::string timeline = dir / "timeline.json";
  auto r = run_process({ASTRAL_CLI, "seer", "predict", "--model", fixture("astral/seer/gpt-small.json"), "--hw",
                        "a100-80gb", "--gpus", "8", "--config", fixture("astral/seer/gpt-small-config.json"),
                        "--timeline", timeline});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(timeline);
  json trace = json::parse(in);
  CHECK(trace["traceEvents"].size() > 100);
  CHECK(trace["otherData"]["seer"]["tp"] == 2);
  auto c = run_process({ASTRAL_CLI, "seer", "compare", "--predicted", timeline, "--measured",
                        fixture("astral/seer/kineto-gpt-small-rank0.json"), "--json"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  json cmp = json::parse(c.out);
  CHECK(cmp["measured_steps"] == 2);
  CHECK(cmp["kinds"].size() >= 8);
}

TEST_CASE("seer predict exits 1 when the layout does not fit in memory") {
  auto r = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", "a100-80gb", "--gpus", "8",
                        "--global-batch", "8", "--tp", "8"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("DOES NOT FIT") != std::string::npos);
}

TEST_CASE("seer rejects inconsistent layouts and bad files with one line naming the field") {
  auto tp = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", "a100-80gb", "--gpus", "56",
                         "--global-batch", "64", "--tp", "7"});
  CHECK(tp.exit_code == 2);
  CHECK(tp.err.find("config.tp: 7 does not divide model.heads 96") != std::string::npos);
  auto pp = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", "a100-80gb", "--gpus", "40",
                         "--global-batch", "64", "--tp", "8", "--pp", "5"});
  CHECK(pp.exit_code == 2);
  CHECK(pp.err.find("model.layers") != std::string::npos);
  astral::test::TempDir dir;
  const std::string bad = dir / "bad-model.json";
  std::ofstream(bad) << R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100})";
  auto m = run_process({ASTRAL_CLI, "seer", "predict", "--model", bad, "--hw", "a100-80gb", "--gpus", "1",
                        "--global-batch", "1"});
  CHECK(m.exit_code == 2);
  CHECK(m.err.find("model.seq_len") != std::string::npos);
  CHECK(m.err.find(bad) != std::string::npos);
  CHECK(std::count(m.err.begin(), m.err.end(), '\n') == 1);  // one line
  auto missing = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt4", "--hw", "a100-80gb", "--gpus", "8",
                              "--global-batch", "8"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("gpt3-175b") != std::string::npos);  // lists the bundled names
}

TEST_CASE("seer search prints ranked layouts and JSON") {
  auto r = run_process({ASTRAL_CLI, "seer", "search", "--model", "korthikanti-22b", "--hw", "a100-80gb", "--gpus",
                        "64", "--global-batch", "128", "--top", "3", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  REQUIRE(doc["top"].size() == 3);
  CHECK(doc["top"][0]["prediction"]["step_time_s"].get<double>() <=
        doc["top"][2]["prediction"]["step_time_s"].get<double>());
  CHECK(r.err.find("layouts") != std::string::npos);  // progress summary on stderr
  auto none = run_process({ASTRAL_CLI, "seer", "search", "--model", "megatron-1t", "--hw", "a100-80gb", "--gpus", "8",
                           "--global-batch", "8", "--no-progress"});
  CHECK(none.exit_code == 1);
  CHECK(none.out.find("no layout fits") != std::string::npos);
}

TEST_CASE("seer validate reproduces the calibration table within its tolerance") {
  auto r = run_process({ASTRAL_CLI, "seer", "validate"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("within") != std::string::npos);
  CHECK(r.out.find("175B seq-par + selective") != std::string::npos);
}

TEST_CASE("seer validate --calibrate-smallest fits one run of a held-out set and predicts the others") {
  auto r = run_process({ASTRAL_CLI, "seer", "validate", "--set", "mt-nlg", "--calibrate-smallest", "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["calibrated_on"].get<std::string>().find("2240 GPUs") != std::string::npos);
  CHECK(doc["steps"].size() == 2);
  CHECK(doc["within_tolerance"] == true);
  auto bundled = run_process({ASTRAL_CLI, "seer", "validate", "--set", "narayanan-sc21"});
  CHECK(bundled.exit_code == 0);
  CHECK(bundled.out.find("1008B on 3072 GPUs") != std::string::npos);
}

TEST_CASE("seer calibrate writes a calibrated hardware profile") {
  astral::test::TempDir dir;
  const std::string csv = dir / "ops.csv", out = dir / "hw.json";
  std::ofstream(csv) << "kind,m,n,k,batch,bytes,dtype,time_us,name\n"
                        "gemm,8192,8192,8192,1,,bf16,1650,square\n"
                        "gemm,8192,3072,8192,1,,bf16,640,qkv\n"
                        "memory,,,,,268435456,bf16,170,layernorm\n";
  auto r = run_process({ASTRAL_CLI, "seer", "calibrate", "--hw", "h100-sxm", "--ops", csv, "--out", out});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out);
  json hw = json::parse(in);
  CHECK(hw["efficiency"]["gemm"].get<double>() < 0.76);  // 8192^3 in 1.65 ms is ~67 % of 989 TFLOP/s
  auto bad = run_process({ASTRAL_CLI, "seer", "calibrate", "--hw", "h100-sxm", "--ops", dir / "nothing.csv"});
  CHECK(bad.exit_code == 2);
}

TEST_CASE("seer collective prints NCCL's algorithm x protocol table") {
  auto r = run_process({ASTRAL_CLI, "seer", "collective", "--hw", "h100-sxm", "--gpus", "8", "--op", "allreduce",
                        "--bytes", "1073741824", "--json"});
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["best"]["algorithm"] == "nvls");
  CHECK(doc["seconds"]["ring"].contains("simple"));
}

TEST_CASE("seer calibrate --steps fits published runs, writes a profile predict accepts, and predicts held-out runs") {
  // Fit set: the four full-recompute rows of Korthikanti et al. Table 3. Held out: the
  // sequence-parallel + selective rows of the same table (never in the fit).
  astral::test::TempDir dir;
  const std::string out = dir / "stack.json";
  const std::string runs = fixture("astral/seer/korthikanti-full-recompute-runs.json");
  // All three factors (the default).
  auto r = run_process({ASTRAL_CLI, "seer", "calibrate", "--steps", runs, "--out", out, "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["fitted"].size() == 3);
  CHECK(doc["rows"].size() == 4);
  CHECK(doc["leave_one_out"]["mean_abs_error_pct"].is_number());
  CHECK(doc["mean_abs_error_pct_after"].get<double>() <= doc["mean_abs_error_pct_before"].get<double>() + 1e-9);
  const std::pair<const char*, double> held_out[] = {{"korthikanti-175b-selective", 13.75}};
  for (const auto& [config, measured] : held_out) {
    auto p = run_process({ASTRAL_CLI, "seer", "predict", "--model", "gpt3-175b", "--hw", out, "--gpus", "64",
                          "--config", config, "--json"});
    INFO(p.err);
    REQUIRE(p.exit_code == 0);
    CHECK(json::parse(p.out)["step_time_s"].get<double>() == Approx(measured).epsilon(0.10));
  }
  auto s = run_process({ASTRAL_CLI, "seer", "search", "--model", "korthikanti-22b", "--hw", out, "--gpus", "8",
                        "--global-batch", "8", "--top", "1", "--no-progress"});
  CHECK(s.exit_code == 0);
  auto text = run_process({ASTRAL_CLI, "seer", "calibrate", "--steps", runs, "--fit", "compute,comm"});
  CHECK(text.out.find("leave-one-out error") != std::string::npos);
}

TEST_CASE("seer calibrate --kineto fits a profiler trace, writes a profile predict accepts, lists unclassified kernels") {
  astral::test::TempDir dir;
  const std::string out = dir / "stack.json";
  const std::string trace = fixture("astral/seer/kineto-shapes-rank0.json");
  auto r = run_process({ASTRAL_CLI, "seer", "calibrate", "--kineto", trace, "--hw", "a100-80gb", "--rank", "0",
                        "--out", out, "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(r.out);
  CHECK(doc["unclassified_kernels"] == 3);
  CHECK(doc["hardware"]["efficiency"]["gemm"].get<double>() == Approx(0.62).epsilon(0.03));
  auto p = run_process({ASTRAL_CLI, "seer", "predict", "--model", "korthikanti-22b", "--hw", out, "--gpus", "8",
                        "--config", "korthikanti-22b-full", "--json"});
  CHECK(p.exit_code == 0);
  auto text = run_process({ASTRAL_CLI, "seer", "calibrate", "--kineto", trace, "--hw", "a100-80gb"});
  CHECK(text.out.find("DeviceSegmentedRadixSortKernel") != std::string::npos);
}

TEST_CASE("seer calibrate --kineto: not Kineto, truncated, another rank: one line, exit 2, no profile written") {
  astral::test::TempDir dir;
  const std::string bad = dir / "bad.json", out = dir / "stack.json";
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "nvjet", "ts": 0, "dur": 5)";
  auto truncated = run_process({ASTRAL_CLI, "seer", "calibrate", "--kineto", bad, "--hw", "a100-80gb", "--out", out});
  CHECK(truncated.exit_code == 2);
  CHECK(truncated.err.find(bad + ": not valid JSON") != std::string::npos);
  CHECK(std::count(truncated.err.begin(), truncated.err.end(), '\n') == 1);
  CHECK_FALSE(std::ifstream(out).good());
  std::ofstream(bad) << R"({"runs": []})";
  auto other = run_process({ASTRAL_CLI, "seer", "calibrate", "--kineto", bad, "--hw", "a100-80gb", "--out", out});
  CHECK(other.exit_code == 2);
  CHECK(other.err.find("traceEvents: missing") != std::string::npos);
  auto rank = run_process({ASTRAL_CLI, "seer", "calibrate", "--kineto", fixture("astral/seer/kineto-shapes-rank0.json"),
                           "--hw", "a100-80gb", "--rank", "5", "--out", out});
  CHECK(rank.exit_code == 2);
  CHECK(rank.err.find("distributedInfo.rank") != std::string::npos);
  CHECK_FALSE(std::ifstream(out).good());
}

TEST_CASE("seer calibrate --steps: too few runs, bad layouts: one line, exit 2, no profile written") {
  astral::test::TempDir dir;
  const std::string runs = dir / "runs.json", out = dir / "stack.json";
  std::ofstream(runs) << R"({"hardware": "a100-80gb", "runs": [
    {"name": "a", "model": "korthikanti-22b", "config": "korthikanti-22b-full", "gpus": 8, "measured_s": 1.42},
    {"name": "b", "model": "gpt3-175b", "config": "korthikanti-175b-full", "gpus": 64, "measured_s": 18.13}]})";
  auto few = run_process({ASTRAL_CLI, "seer", "calibrate", "--steps", runs, "--out", out});
  CHECK(few.exit_code == 2);
  CHECK(few.err.find("2 run(s) cannot determine 3 factors") != std::string::npos);
  CHECK(std::count(few.err.begin(), few.err.end(), '\n') == 1);
  CHECK_FALSE(std::ifstream(out).good());
  std::ofstream(runs) << R"({"hardware": "a100-80gb", "runs": [
    {"name": "a", "model": "gpt3-175b", "config": {"global_batch": 8, "tp": 7}, "gpus": 56, "measured_s": 3}]})";
  auto bad = run_process({ASTRAL_CLI, "seer", "calibrate", "--steps", runs, "--out", out});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("runs[0].config: config.tp") != std::string::npos);
  CHECK(bad.err.find(runs) != std::string::npos);
  CHECK_FALSE(std::ifstream(out).good());
}

TEST_CASE("seer --ecmp-table: collectives across the fabric take the simulated ECMP efficiency") {
  astral::test::TempDir dir;
  const std::string fabric = dir / "fab.json", table = dir / "ecmp.json", other = dir / "other.json";
  REQUIRE(run_process({ASTRAL_CLI, "fabric", "generate", "fat-tree", "--gpus", "256", "--radix", "16", "--tiers", "3",
                       "-o", fabric}).exit_code == 0);
  auto t = run_process({ASTRAL_CLI, "fabric", "ecmp-table", "--fabric", fabric, "--placements", "packed", "-o", table});
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);
  auto seconds = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {ASTRAL_CLI, "seer", "collective", "--hw", "h100-sxm", "--gpus", "256",
                                     "--network", fabric, "--op", "alltoall", "--bytes", "1073741824", "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = run_process(argv);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out)["best"]["seconds"].get<double>();
  };
  // The whole 3-tier fat tree loses to hash collisions (the table's own test shows < 0.95).
  CHECK(seconds({"--ecmp-table", table}) > 1.05 * seconds({}));
  // A table simulated on another fabric is refused in one line naming it.
  REQUIRE(run_process({ASTRAL_CLI, "fabric", "generate", "fat-tree", "--gpus", "512", "--radix", "16", "-o", other})
              .exit_code == 0);
  auto bad = run_process({ASTRAL_CLI, "seer", "collective", "--hw", "h100-sxm", "--gpus", "256", "--network", other,
                          "--ecmp-table", table, "--op", "alltoall"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find(table) != std::string::npos);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
}
