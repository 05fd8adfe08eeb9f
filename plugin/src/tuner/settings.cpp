#include "tuner/settings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace astral::plugin::tuner {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

Settings parse_settings(const EnvLookup& env, std::vector<std::string>* warnings) {
  Settings s;
  auto value = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v ? std::string(v) : std::string();
  };
  if (std::string mode = lower(value("ASTRAL_TUNER")); !mode.empty()) {
    if (mode == "off" || mode == "0" || mode == "false" || mode == "no" || mode == "none") {
      s.enabled = false;
    } else if (mode != "on" && mode != "1" && mode != "true" && mode != "yes") {
      warnings->push_back("ASTRAL_TUNER='" + mode + "' is not on or off; using on");
    }
  }
  if (std::string hw = value("ASTRAL_TUNER_HW"); !hw.empty()) s.hardware = hw;
  s.network = value("ASTRAL_TUNER_NETWORK");
  if (std::string host = value("ASTRAL_TUNER_HOST"); !host.empty()) {
    std::string l = lower(host);
    s.host = l == "live" || l == "off" ? l : host;
  }
  s.ecmp_table = value("ASTRAL_TUNER_ECMP_TABLE");
  // NCCL's own variable: the table is looked up at the QPs NCCL opens per connection.
  if (std::string qps = value("NCCL_IB_QPS_PER_CONNECTION"); !qps.empty()) {
    char* end = nullptr;
    long n = std::strtol(qps.c_str(), &end, 10);
    if (end != qps.c_str() && *end == '\0' && n >= 1 && n <= 128)
      s.qps = int(n);
    else if (!s.ecmp_table.empty())
      warnings->push_back("NCCL_IB_QPS_PER_CONNECTION='" + qps +
                          "' is not a QP count; the ECMP table is read at 1 QP");
  }
  return s;
}

}  // namespace astral::plugin::tuner
