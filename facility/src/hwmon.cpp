// hwmon sysfs reader (Documentation/hwmon/sysfs-interface.rst): <type><n>_<item>, fixed-point
// integers in milli/micro units, one file each.
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "alarm_rules.hpp"
#include "astral/facility/local.hpp"
#include "sysfs.hpp"

namespace astral::facility {

namespace fs = std::filesystem;
using detail::read_attribute;
using detail::read_integer;

std::string local_host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

namespace {

// An ACPI power meter with no reading reports 0xFFFFFFFF × 1000 µW (Kepler #1049).
constexpr long long kPowerSentinelMicroWatts = 4294967295000LL;
// No single hwmon channel draws more than this; beyond it the value is a unit or firmware error.
constexpr double kImplausibleWatts = 100000;

struct Channel {
  std::string type;  // temp, in, curr, power, energy, fan, humidity
  int index = 0;
};

// A stable chip id, "<name>@<device>" (coretemp@coretemp.0, nct6779@nct6775.656): the device the
// chip belongs to, not the hwmonN number, which changes between boots; the name tells chips on one
// device apart (a Wi-Fi card's three radios).
std::string chip_id(const fs::path& hwmon_dir, const std::string& name) {
  std::error_code ec;
  std::string device;
  fs::path link = hwmon_dir / "device";
  if (fs::exists(link, ec)) {
    fs::path real = fs::weakly_canonical(link, ec);
    if (!ec) device = real.filename().string();
  }
  if (device.empty()) {
    // No device link: the platform device the hwmon directory sits in, if it sits in one.
    fs::path real = fs::weakly_canonical(hwmon_dir, ec);
    if (!ec && real.parent_path().filename() == "hwmon" && real.parent_path().parent_path().filename() != "class")
      device = real.parent_path().parent_path().filename().string();
  }
  if (device.empty()) device = hwmon_dir.filename().string();
  return name.empty() ? device : name + "@" + device;
}

}  // namespace

Snapshot read_hwmon(const std::string& root, const std::string& host) {
  Snapshot out;
  SourceStatus status;
  status.reader = "hwmon";
  status.name = host + ":hwmon";
  auto t0 = std::chrono::steady_clock::now();
  auto now = Clock::now();
  fs::path class_dir = fs::path(root) / "sys/class/hwmon";
  std::error_code ec;
  if (!fs::is_directory(class_dir, ec)) {
    status.error = fmt::format("{}: no hwmon class directory", class_dir.string());
    out.sources.push_back(std::move(status));
    return out;
  }
  static const std::regex kFile(R"(^(temp|in|curr|power|energy|fan|humidity)(\d+)_(input|average)$)");
  std::vector<fs::path> chips;
  for (const auto& entry : fs::directory_iterator(class_dir, ec)) chips.push_back(entry.path());
  std::sort(chips.begin(), chips.end());
  for (const auto& dir : chips) {
    std::string chip_name = read_attribute((dir / "name").string()).text.value_or("");
    std::string chip = chip_id(dir, chip_name);
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(dir, ec)) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      std::smatch m;
      std::string fname = file.filename().string();
      if (!std::regex_match(fname, m, kFile)) continue;
      std::string type = m[1], index = m[2], item = m[3];
      if (item == "average" && type != "power") continue;
      std::string base = (dir / (type + index)).string();
      int err = 0;
      auto raw = read_integer(file.string(), &err);
      if (!raw) {
        // ENODATA: a disabled channel; EACCES: not ours to read. Neither stops the reader.
        out.count_quirk(err == EACCES ? "hwmon_no_permission" : "hwmon_unreadable");
        continue;
      }
      Sample s;
      s.time = now;
      s.source = "hwmon";
      s.host = host;
      s.kind = EntityKind::sensor;
      s.entity = fmt::format("{}/{}{}", chip, type, index);
      auto label = read_attribute(base + "_label").text;
      s.name = label ? *label : (chip_name.empty() ? s.entity : chip_name + " " + type + index);
      s.origin = file.string();
      double v = static_cast<double>(*raw);
      auto limit = [&](const char* suffix, double scale) -> std::optional<double> {
        if (auto l = read_integer(base + suffix)) return static_cast<double>(*l) * scale;
        return std::nullopt;
      };
      if (type == "temp") {
        s.quantity = "temperature", s.unit = Unit::celsius, s.value = v / 1000;
        s.limits.upper_caution = limit("_max", 1e-3);
        s.limits.upper_critical = limit("_crit", 1e-3);
        s.limits.upper_fatal = limit("_emergency", 1e-3);
      } else if (type == "in") {
        s.quantity = "voltage", s.unit = Unit::volts, s.value = v / 1000;
      } else if (type == "curr") {
        s.quantity = "current", s.unit = Unit::amperes, s.value = v / 1000;
      } else if (type == "power") {
        if (*raw >= kPowerSentinelMicroWatts || v / 1e6 > kImplausibleWatts || *raw < 0) {
          out.count_quirk("hwmon_power_sentinel");
          out.findings.push_back(Finding{host, s.entity, "implausible_value",
                                         fmt::format("{} reads {} µW: no reading (sentinel or unit error), dropped", file.string(), *raw)});
          continue;
        }
        s.quantity = item == "average" ? "power_average" : "power";
        s.unit = Unit::watts, s.value = v / 1e6;
        s.limits.upper_critical = limit("_crit", 1e-6);
        if (auto cap = limit("_cap", 1e-6)) {
          Sample c = s;
          c.quantity = "power_limit", c.value = *cap, c.limits = {};
          out.samples.push_back(std::move(c));
        }
      } else if (type == "energy") {
        s.quantity = "energy", s.unit = Unit::joules, s.value = v / 1e6, s.counter = true;
      } else if (type == "fan") {
        s.kind = EntityKind::fan;
        s.quantity = "fan_speed_rpm", s.unit = Unit::rpm, s.value = v;
        if (read_integer(base + "_fault").value_or(0) == 1) {
          Alarm a{now, host, EntityKind::fan, s.entity, Severity::error, "fan_failed",
                  fmt::format("{} reports a fault", s.name), s.origin, "hwmon"};
          out.add_alarm(std::move(a));
        }
      } else if (type == "humidity") {
        s.quantity = "humidity", s.unit = Unit::ratio, s.value = v / 100000;  // milli-percent
      }
      out.samples.push_back(std::move(s));
    }
  }
  detail::raise_threshold_alarms(out, host);
  status.ok = true;
  status.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.sources.push_back(std::move(status));
  return out;
}

}  // namespace astral::facility
