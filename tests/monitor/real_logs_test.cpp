// Real log excerpts from public issue threads (tests/fixtures/real-logs, a copy of
// ../shared/fixtures/real-logs): every case must meet its cases.json expectations, read as
// predicates on the events' JSON (`astral monitor events --json`), and its diagnosis expectation.
// Also the families added beyond the fixtures (real-logs-extra/), each with its source thread.
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kRealLogs = std::string(ASTRAL_FIXTURES_DIR) + "/real-logs";

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

const json* at_path(const json& j, const std::string& dotted) {
  const json* cur = &j;
  std::stringstream ss(dotted);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return nullptr;
    cur = &(*cur)[part];
  }
  return cur;
}

// Attribute values are strings, keys are numbers, comm hashes hex strings: compare as text, and
// hex-looking values as numbers.
std::string as_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
bool value_equal(const json& actual, const json& expected) {
  std::string a = as_text(actual), e = as_text(expected);
  if (a == e) return true;
  auto hex = [](const std::string& s) -> std::optional<unsigned long long> {
    if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
    return std::stoull(s, nullptr, 16);
  };
  auto ha = hex(a), he = hex(e);
  return ha && he && *ha == *he;
}
bool value_matches(const json& actual, const json& expected) {
  if (expected.is_array()) {
    for (const auto& one : expected)
      if (value_equal(actual, one)) return true;
    return false;
  }
  return value_equal(actual, expected);
}

bool kind_in(const std::string& kind, const json& list) {
  if (list.is_string()) return kind == list.get<std::string>();
  for (const auto& k : list)
    if (k.get<std::string>() == kind) return true;
  return false;
}

bool event_matches(const json& ev, const json& pred) {
  if (pred.contains("file") && ev["source"]["file"] != pred["file"]) return false;
  const int line = ev["source"]["line"].get<int>();
  if (pred.contains("line") && line != pred["line"].get<int>()) return false;
  if (pred.contains("lines")) {
    bool in = false;
    for (const auto& l : pred["lines"]) in = in || l.get<int>() == line;
    if (!in) return false;
  }
  const std::string kind = ev["kind"].get<std::string>();
  if (pred.contains("kind") && !kind_in(kind, pred["kind"])) return false;
  if (pred.contains("kind_not") && kind_in(kind, pred["kind_not"])) return false;
  if (pred.contains("contains"))
    for (const auto& [path, want] : pred["contains"].items()) {
      const json* got = at_path(ev, path);
      if (!got || !value_matches(*got, want)) return false;
    }
  if (pred.contains("any_attr_value")) {
    bool any = false;
    if (ev.contains("attrs"))
      for (const auto& [k, v] : ev["attrs"].items()) any = any || v == pred["any_attr_value"];
    if (!any) return false;
  }
  return true;
}

struct Loaded {
  Bundle bundle;
  json events = json::array();
};

Loaded load_case(const std::string& dir) {
  Loaded l;
  BundleOptions o;
  o.jobs = 1;
  l.bundle = load_bundle(dir, o);
  for (const Event& e : l.bundle.events) l.events.push_back(to_json(e, l.bundle.file_name(e.file)));
  return l;
}

std::string describe(const json& events) {
  std::string out;
  for (const auto& e : events)
    out += e["source"]["file"].get<std::string>() + ":" + std::to_string(e["source"]["line"].get<int>()) + " " +
           e["kind"].get<std::string>() + " " + e["component"].dump() + " " + e["keys"].dump() + " " +
           (e.contains("attrs") ? e["attrs"].dump() : "") + "\n";
  return out;
}

void check_diagnosis(Loaded& l, const json& want) {
  Diagnosis d = diagnose(l.bundle);
  const std::string expect = want.value("expect", "any");
  const RootCause* top = d.root_causes.empty() ? nullptr : &d.root_causes.front();
  const std::string top_kind = top ? std::string(to_string(top->component.kind)) : "";
  INFO("top root cause: " << (top ? top->summary : "(none)"));
  if (expect == "none") CHECK(top == nullptr);
  if (expect == "kinds") {
    if (want.value("required", false)) REQUIRE(top != nullptr);
    if (top) CHECK(kind_in(top_kind, want["kinds"]));
  }
  if (want.contains("forbid_kinds"))
    for (const RootCause& c : d.root_causes) {
      INFO("root cause: " << c.summary);
      CHECK_FALSE(kind_in(std::string(to_string(c.component.kind)), want["forbid_kinds"]));
    }
}

void check_case(const std::string& root, const json& c) {
  const std::string id = c["id"].get<std::string>();
  INFO("case " << id << " (" << c.value("url", "") << ")");
  Loaded l = load_case(root + "/cases/" + id);
  INFO("events:\n" << describe(l.events));
  for (const auto& pred : c.value("expected_events", json::array())) {
    INFO("expectation " << pred.dump());
    bool met = false;
    for (const auto& ev : l.events) met = met || event_matches(ev, pred);
    CHECK(met);
  }
  for (const auto& pred : c.value("misread_checks", json::array())) {
    INFO("misread check " << pred.dump());
    for (const auto& ev : l.events) CHECK_FALSE(event_matches(ev, pred));
  }
  check_diagnosis(l, c.value("diagnosis", json::object()));
}

}  // namespace

TEST_CASE("real-world logs: every case meets its cases.json expectations", "[monitor][real-logs]") {
  json cases = read_json_file(kRealLogs + "/cases.json");
  REQUIRE(cases["cases"].size() >= 17);
  for (const auto& c : cases["cases"]) {
    DYNAMIC_SECTION(c["id"].get<std::string>()) { check_case(kRealLogs, c); }
  }
}

TEST_CASE("real-world logs: families added from public threads", "[monitor][real-logs]") {
  const std::string root = std::string(ASTRAL_FIXTURES_DIR) + "/astral/monitor/real-logs-extra";
  json cases = read_json_file(root + "/cases.json");
  REQUIRE(!cases["cases"].empty());
  for (const auto& c : cases["cases"]) {
    DYNAMIC_SECTION(c["id"].get<std::string>()) { check_case(root, c); }
  }
}

TEST_CASE("real-world logs: a year-less date does not depend on the other hosts of the bundle",
          "[monitor][real-logs]") {
  // The DGX Station's syslog lines carry no year. Alone, and next to hosts whose files date
  // themselves (2019 mpirun stamps, 2023 torchrun summaries), each line must get the same time.
  testing::TempDir dir;
  const std::string cases = kRealLogs + "/cases/";
  auto copy_host = [&](const std::string& from, const std::string& to) {
    fs::create_directories(fs::path(dir.path()) / to);
    fs::copy(cases + from, fs::path(dir.path()) / to, fs::copy_options::recursive);
  };
  const std::string dgx = "27-ogkm688-gpu-lost-rpc/abggdna-DGX-Station-A100";
  copy_host(dgx, "alone/abggdna-DGX-Station-A100");
  copy_host(dgx, "mixed/abggdna-DGX-Station-A100");
  copy_host("03-nccl230-catastrophic-mpirun-ts/container-e275-1553839402050-12124-01-000057", "mixed/container");
  copy_host("19-mmseg3106-childfailed/neptun.informatik.uni-kl.de", "mixed/neptun");
  copy_host("05-nccl957-cuda-invalid-arg-mpirun/tomte401", "mixed/tomte401");
  // The copies' mtimes differ from run to run; pin them so that the reference time is the same.
  const auto pinned = fs::file_time_type::clock::now() - std::chrono::hours(24 * 30);
  for (auto& p : fs::recursive_directory_iterator(dir.path()))
    if (p.is_regular_file()) fs::last_write_time(p.path(), pinned);
  auto times_of_dgx = [](const std::string& path) {
    BundleOptions o;
    o.jobs = 1;
    Bundle b = load_bundle(path, o);
    std::map<uint32_t, int64_t> by_line;
    for (const Event& e : b.events)
      if (b.file_name(e.file).find("abggdna") != std::string::npos) by_line[e.line] = e.time_us;
    return by_line;
  };
  auto alone = times_of_dgx(dir / "alone");
  auto mixed = times_of_dgx(dir / "mixed");
  REQUIRE(alone.size() >= 2);
  CHECK(alone == mixed);
}
