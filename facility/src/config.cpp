#include "astral/facility/config.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace astral::facility {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Parser {
  std::string name;
  std::string base;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", name, where, what));
  }
  void known_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) const {
    std::set<std::string> allowed(keys.begin(), keys.end());
    for (const auto& [k, _] : j.items())
      if (!allowed.count(k) && k.rfind("comment", 0) != 0 && k.rfind("$", 0) != 0)
        fail(where, fmt::format("unknown key '{}' (known: {})", k, fmt::join(allowed, ", ")));
  }
  double number(const json& j, const char* key, const std::string& where, double fallback) const {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_number()) fail(where + "." + key, "expected a number");
    return j[key].get<double>();
  }
  std::string string(const json& j, const char* key, const std::string& where, const std::string& fallback = {}) const {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_string()) fail(where + "." + key, "expected a string");
    return j[key].get<std::string>();
  }
  std::string path(const std::string& p) const {
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (fs::path(base) / p).lexically_normal().string();
  }
  std::vector<Selector> selectors(const json& j, const char* key, const std::string& where) const {
    std::vector<Selector> out;
    if (!j.contains(key)) return out;
    if (!j[key].is_array()) fail(where + "." + key, "expected a list of \"host:entity[:quantity]\" selectors");
    for (const auto& s : j[key]) {
      if (!s.is_string()) fail(where + "." + key, "selectors are strings like \"pdu-1:PowerEquipment/RackPDUs/1\"");
      out.push_back(parse_selector(s.get<std::string>()));
    }
    return out;
  }
  std::vector<ChainStage> chain(const json& j, const char* key) const {
    std::vector<ChainStage> out;
    if (!j.contains(key)) return out;
    std::string where = fmt::format("chains.{}", key);
    if (!j[key].is_array()) fail(where, "expected a list of {\"stage\": name, \"efficiency\": 0..1}");
    for (const auto& s : j[key]) {
      if (!s.is_object()) fail(where, "each stage is {\"stage\": name, \"efficiency\": 0..1}");
      known_keys(s, where, {"stage", "efficiency"});
      double eff = number(s, "efficiency", where, -1);
      if (!(eff > 0 && eff <= 1)) fail(where, fmt::format("stage '{}': efficiency must be in (0, 1]", s.value("stage", "?")));
      out.push_back(ChainStage{string(s, "stage", where, "stage"), eff});
    }
    return out;
  }
};

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); }

}  // namespace

FacilityConfig parse_config(const std::string& text, const std::string& base_dir, const std::string& name) {
  Parser p{name, base_dir};
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error(fmt::format("{}: not a JSON object", name));
  p.known_keys(j, "top level", {"interval_s", "poll", "redfish", "hwmon", "rapl", "ipmi", "nvml", "racks", "pue",
                                "chains", "tolerance", "budget_warning_ratio", "site"});
  FacilityConfig c;
  c.interval = seconds(p.number(j, "interval_s", "interval_s", 15));
  if (c.interval.count() < 100) p.fail("interval_s", "must be at least 0.1");
  if (j.contains("poll")) {
    const json& po = j["poll"];
    p.known_keys(po, "poll", {"timeout_s", "connect_timeout_s", "deadline_s", "retries", "backoff_s", "concurrency"});
    c.poll.timeout = seconds(p.number(po, "timeout_s", "poll", 5));
    c.poll.connect_timeout = seconds(p.number(po, "connect_timeout_s", "poll", 2));
    c.poll.deadline = seconds(p.number(po, "deadline_s", "poll", 60));
    c.poll.retries = static_cast<int>(p.number(po, "retries", "poll", 2));
    c.poll.backoff = seconds(p.number(po, "backoff_s", "poll", 0.2));
    double conc = p.number(po, "concurrency", "poll", 16);
    if (conc < 1 || conc > 1024) p.fail("poll.concurrency", "must be between 1 and 1024");
    c.poll.concurrency = static_cast<std::size_t>(conc);
  }
  if (j.contains("redfish")) {
    if (!j["redfish"].is_array()) p.fail("redfish", "expected a list of sources");
    std::set<std::string> names;
    for (std::size_t i = 0; i < j["redfish"].size(); ++i) {
      const json& r = j["redfish"][i];
      std::string where = fmt::format("redfish[{}]", i);
      if (!r.is_object()) p.fail(where, "expected an object with at least \"url\"");
      if (r.contains("password") || r.contains("username") || r.contains("user"))
        p.fail(where, "credentials do not belong in the config: use \"credentials_file\" (mode 600) or \"credentials_env\"");
      p.known_keys(r, where, {"name", "url", "auth", "credentials_file", "credentials_env", "ca_file", "insecure",
                              "sensors", "telemetry", "expand_levels"});
      RedfishEndpoint e;
      try {
        e.url = normalise_base_url(p.string(r, "url", where));
        e.auth = parse_auth_mode(p.string(r, "auth", where, "auto"));
      } catch (const std::invalid_argument& ex) {
        p.fail(where, ex.what());
      }
      e.name = p.string(r, "name", where, e.url.substr(e.url.find("://") + 3));
      if (!names.insert(e.name).second) p.fail(where, fmt::format("duplicate source name '{}'", e.name));
      e.ca_file = p.path(p.string(r, "ca_file", where));
      if (r.contains("insecure")) {
        if (!r["insecure"].is_boolean()) p.fail(where + ".insecure", "expected true or false");
        e.verify_tls = !r["insecure"].get<bool>();
        if (!e.verify_tls) c.warnings.push_back(fmt::format("{}: TLS verification is off for {}", name, e.name));
      }
      std::string sensors = p.string(r, "sensors", where, "auto");
      if (sensors == "auto") e.sensors = SensorPolicy::automatic;
      else if (sensors == "all") e.sensors = SensorPolicy::all;
      else if (sensors == "none") e.sensors = SensorPolicy::none;
      else p.fail(where + ".sensors", "expected auto, all or none");
      if (r.contains("telemetry")) e.telemetry = r["telemetry"].is_boolean() && r["telemetry"].get<bool>();
      if (r.contains("expand_levels")) {
        const json& levels = r["expand_levels"];
        if (!levels.is_number_integer() || levels.get<long long>() < 1 || levels.get<long long>() > 6)
          p.fail(where + ".expand_levels", "expected an integer from 1 (members only) to 6");
        e.expand_levels = levels.get<int>();
      }
      if (r.contains("credentials_file")) {
        std::string warning;
        try {
          e.credentials = credentials_from_file(p.path(p.string(r, "credentials_file", where)), &warning);
        } catch (const std::exception& ex) {
          p.fail(where, ex.what());
        }
        if (!warning.empty()) c.warnings.push_back(warning);
      } else if (r.contains("credentials_env")) {
        std::string prefix = p.string(r, "credentials_env", where);
        e.credentials = credentials_from_env(prefix);
        if (e.credentials.empty())
          c.warnings.push_back(fmt::format("{}: {}: {}_USERNAME/{}_PASSWORD are not set", name, e.name, prefix, prefix));
      }
      c.redfish.push_back(std::move(e));
    }
  }
  auto root_of = [&](const char* key) -> std::optional<std::string> {
    if (!j.contains(key)) return std::nullopt;
    const json& v = j[key];
    if (v.is_boolean()) return v.get<bool>() ? std::optional<std::string>("/") : std::nullopt;
    if (!v.is_object()) p.fail(key, "expected true, false or {\"root\": \"/\"}");
    p.known_keys(v, key, {"root"});
    return p.path(p.string(v, "root", key, "/"));
  };
  c.hwmon_root = root_of("hwmon");
  c.rapl_root = root_of("rapl");
  if (j.contains("ipmi")) {
    const json& v = j["ipmi"];
    if (v.is_object()) {
      p.known_keys(v, "ipmi", {"bmc_host", "username", "zero_is_reading", "files", "ipmitool", "name"});
      if (v.contains("files")) {
        if (!v["files"].is_array()) p.fail("ipmi.files", "expected a list of paths");
        for (const auto& f : v["files"]) c.ipmi_files.push_back(p.path(f.get<std::string>()));
      }
      IpmiOptions o;
      o.bmc_host = p.string(v, "bmc_host", "ipmi");
      o.username = p.string(v, "username", "ipmi");
      o.ipmitool = p.string(v, "ipmitool", "ipmi", "ipmitool");
      o.host = p.string(v, "name", "ipmi");
      o.zero_is_reading = v.value("zero_is_reading", false);
      if (c.ipmi_files.empty() || v.contains("bmc_host")) c.ipmi = o;
      else c.ipmi = o, c.ipmi->ipmitool.clear();  // files only
    } else if (v.is_boolean() && v.get<bool>()) {
      c.ipmi = IpmiOptions{};
    }
  }
  if (j.contains("nvml")) {
    const json& v = j["nvml"];
    if (v.is_boolean() && v.get<bool>()) c.nvml = NvmlOptions{};
    else if (v.is_object()) {
      p.known_keys(v, "nvml", {"library"});
      NvmlOptions o;
      o.library = p.string(v, "library", "nvml", o.library);
      c.nvml = o;
    }
  }
  if (j.contains("racks")) {
    if (!j["racks"].is_array()) p.fail("racks", "expected a list");
    for (std::size_t i = 0; i < j["racks"].size(); ++i) {
      const json& r = j["racks"][i];
      std::string where = fmt::format("racks[{}]", i);
      p.known_keys(r, where, {"name", "budget_watts", "it_power", "facility_power", "total_power", "cooling"});
      RackConfig rc;
      rc.name = p.string(r, "name", where, fmt::format("rack{}", i));
      if (r.contains("budget_watts")) rc.budget_w = p.number(r, "budget_watts", where, 0);
      rc.it_power = p.selectors(r, "it_power", where);
      rc.facility_power = p.selectors(r, "facility_power", where);
      rc.total_power = p.selectors(r, "total_power", where);
      rc.cooling = p.selectors(r, "cooling", where);
      c.derive.racks.push_back(std::move(rc));
    }
  }
  if (j.contains("pue")) {
    const json& v = j["pue"];
    p.known_keys(v, "pue", {"it", "facility", "total"});
    c.derive.pue_it = p.selectors(v, "it", "pue");
    c.derive.pue_facility = p.selectors(v, "facility", "pue");
    c.derive.pue_total = p.selectors(v, "total", "pue");
  }
  if (j.contains("chains")) {
    const json& v = j["chains"];
    p.known_keys(v, "chains", {"ac", "hvdc"});
    c.derive.ac_chain = p.chain(v, "ac");
    c.derive.hvdc_chain = p.chain(v, "hvdc");
  }
  if (j.contains("site")) {
    if (j["site"].is_string()) use_site_layout(c, load_site_layout(p.path(j["site"].get<std::string>())));
    else if (j["site"].is_object()) use_site_layout(c, parse_site_layout(json{{"site", j["site"]}}.dump(), name + ": site"));
    else p.fail("site", "expected a site layout object or the path of a site layout file");
  }
  c.derive.tolerance = p.number(j, "tolerance", "tolerance", 0.05);
  c.derive.budget_warning_ratio = p.number(j, "budget_warning_ratio", "budget_warning_ratio", 0.95);
  return c;
}

FacilityConfig load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open the config file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string base = fs::path(path).parent_path().string();
  return parse_config(ss.str(), base.empty() ? "." : base, path);
}

void use_site_layout(FacilityConfig& c, SiteLayout site) {
  std::set<std::string> sources;
  for (const auto& e : c.redfish) sources.insert(e.name);
  for (const auto& comp : site.components)
    if (!comp.source.empty() && !c.redfish.empty() && !sources.count(comp.source))
      c.warnings.push_back(fmt::format("site component '{}': source '{}' is not one of the configured Redfish sources",
                                       comp.id, comp.source));
  c.site = std::move(site);
}

Snapshot poll_sources(const FacilityConfig& c, RaplMeter* rapl) {
  Snapshot s = c.redfish.empty() ? Snapshot{} : poll_redfish(c.redfish, c.poll);
  if (c.hwmon_root) s.merge(read_hwmon(*c.hwmon_root));
  if (c.rapl_root && rapl) s.merge(rapl->sample());
  for (const auto& f : c.ipmi_files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    IpmiOptions o = c.ipmi.value_or(IpmiOptions{});
    if (!in) {
      s.sources.push_back(SourceStatus{f, "ipmi", false, false, fmt::format("{}: cannot read", f)});
      continue;
    }
    s.merge(ipmi_from_text(ss.str(), o, f));
  }
  if (c.ipmi && !c.ipmi->ipmitool.empty()) s.merge(read_ipmi(*c.ipmi));
  if (c.nvml) s.merge(read_nvml(*c.nvml));
  return s;
}

}  // namespace astral::facility
