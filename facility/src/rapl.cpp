// powercap/RAPL reader (Documentation/power/powercap/powercap.rst). energy_uj is a counter that
// wraps at max_energy_range_uj and has been root-only since 2020; both are handled per zone.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "astral/facility/local.hpp"
#include "sysfs.hpp"

namespace astral::facility {

namespace fs = std::filesystem;
using detail::read_attribute;
using detail::read_unsigned;

std::uint64_t wrapped_delta(std::uint64_t previous, std::uint64_t current, std::uint64_t range) {
  if (current >= previous) return current - previous;
  // Wrapped at range (RAPL), or reset to zero when the range is unknown.
  return range > previous ? (range - previous) + current : current;
}

std::vector<RaplZone> read_rapl_zones(const std::string& root) {
  std::vector<RaplZone> zones;
  fs::path class_dir = fs::path(root) / "sys/class/powercap";
  std::error_code ec;
  static const std::regex kZone(R"(^intel-rapl(-mmio)?:(\d+)(:(\d+))?$)");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(class_dir, ec)) {
    if (std::regex_match(e.path().filename().string(), kZone)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, std::string> names;  // zone id -> name, for sub-zone naming
  for (const auto& d : dirs) {
    RaplZone z;
    z.id = d.filename().string();
    z.path = d.string();
    z.name = read_attribute((d / "name").string()).text.value_or(z.id);
    names[z.id] = z.name;
    auto parent = z.id.rfind(':');
    if (std::count(z.id.begin(), z.id.end(), ':') == 2 && names.count(z.id.substr(0, parent)))
      z.name = names[z.id.substr(0, parent)] + "/" + z.name;
    int err = 0;
    z.energy_uj = read_unsigned((d / "energy_uj").string(), &err);
    if (!z.energy_uj) {
      z.error = err == EACCES ? "no permission (energy_uj is root-only since 2020; run as root or grant read access)"
                              : fmt::format("energy_uj unreadable: {}", std::strerror(err));
    }
    z.max_energy_range_uj = read_unsigned((d / "max_energy_range_uj").string()).value_or(0);
    for (int c = 0; c < 4; ++c) {
      auto cname = read_attribute((d / fmt::format("constraint_{}_name", c)).string()).text;
      if (!cname) break;
      if (*cname == "long_term") {
        if (auto uw = read_unsigned((d / fmt::format("constraint_{}_power_limit_uw", c)).string()))
          z.power_limit_w = static_cast<double>(*uw) / 1e6;
      }
    }
    zones.push_back(std::move(z));
  }
  return zones;
}

RaplMeter::RaplMeter(std::string root, std::string host) : root_(std::move(root)), host_(std::move(host)) {}

Snapshot RaplMeter::sample(std::chrono::steady_clock::time_point now) {
  Snapshot out;
  SourceStatus status;
  status.reader = "rapl";
  status.name = host_ + ":rapl";
  auto wall = Clock::now();
  auto zones = read_rapl_zones(root_);
  if (zones.empty()) {
    status.error = fmt::format("{}/sys/class/powercap: no RAPL zones", root_ == "/" ? "" : root_);
    out.sources.push_back(std::move(status));
    return out;
  }
  std::size_t readable = 0;
  for (const auto& z : zones) {
    Sample base;
    base.time = wall;
    base.source = "rapl";
    base.host = host_;
    base.kind = EntityKind::cpu;
    base.entity = z.name;
    base.name = z.id;
    base.origin = z.path + "/energy_uj";
    if (z.power_limit_w && *z.power_limit_w > 0) {
      Sample l = base;
      l.quantity = "power_limit", l.unit = Unit::watts, l.value = *z.power_limit_w;
      l.origin = z.path;
      out.samples.push_back(std::move(l));
    }
    if (!z.energy_uj) {
      out.count_quirk(z.error.rfind("no permission", 0) == 0 ? "rapl_no_permission" : "rapl_unreadable");
      out.findings.push_back(Finding{host_, z.name, "rapl", fmt::format("{}: {}", z.path, z.error)});
      continue;
    }
    ++readable;
    Sample e = base;
    e.quantity = "energy", e.unit = Unit::joules, e.counter = true;
    e.value = static_cast<double>(*z.energy_uj) / 1e6;
    out.samples.push_back(e);
    auto it = last_.find(z.path);
    if (it != last_.end()) {
      double dt = std::chrono::duration<double>(now - it->second.at).count();
      if (dt > 0) {
        if (*z.energy_uj < it->second.energy_uj) out.count_quirk("rapl_wrap");
        std::uint64_t delta = wrapped_delta(it->second.energy_uj, *z.energy_uj, z.max_energy_range_uj);
        Sample p = base;
        p.quantity = "power", p.unit = Unit::watts;
        p.value = static_cast<double>(delta) / 1e6 / dt;
        out.samples.push_back(std::move(p));
      }
    }
    last_[z.path] = Last{*z.energy_uj, now};
  }
  status.ok = readable > 0;
  if (!status.ok) status.error = zones.front().error;
  out.sources.push_back(std::move(status));
  return out;
}

}  // namespace astral::facility
