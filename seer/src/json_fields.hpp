#pragma once
// Typed access to JSON object fields with errors that name the field ("model.heads: ..."), so every
// input problem becomes one line the user can act on.
#include <fmt/format.h>

#include <astral/common/json_number.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <string>

#include "astral/seer/spec.hpp"

namespace astral::seer::detail {

class Fields {
 public:
  Fields(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    if (!j_.is_object()) throw SpecError(fmt::format("{}: expected a JSON object", prefix_));
  }

  std::string path(const std::string& key) const { return prefix_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  Fields object(const std::string& key) const {
    if (!has(key)) return Fields(empty(), path(key));
    return Fields(j_.at(key), path(key));
  }

  // A strictly positive integer (counts and sizes).
  int positive_int(const std::string& key) const {
    if (!has(key)) throw SpecError(fmt::format("{}: missing (a positive integer)", path(key)));
    return checked_int(key, 1);
  }
  int positive_int(const std::string& key, int fallback) const {
    return has(key) ? checked_int(key, 1) : fallback;
  }
  int nonnegative_int(const std::string& key, int fallback) const {
    return has(key) ? checked_int(key, 0) : fallback;
  }

  double number(const std::string& key) const {
    if (!has(key)) throw SpecError(fmt::format("{}: missing (a number)", path(key)));
    return checked_number(key, 0, 1e300);
  }
  double number(const std::string& key, double fallback, double lo = 0, double hi = 1e300) const {
    return has(key) ? checked_number(key, lo, hi) : fallback;
  }
  // A fraction in (0, 1].
  double fraction(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    double v = checked_number(key, 0, 1);
    if (v <= 0) throw SpecError(fmt::format("{}: must be in (0, 1], got {}", path(key), v));
    return v;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& v = j_.at(key);
    if (!v.is_boolean()) throw SpecError(fmt::format("{}: expected true or false", path(key)));
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& v = j_.at(key);
    if (!v.is_string()) throw SpecError(fmt::format("{}: expected a string", path(key)));
    return v.get<std::string>();
  }

 private:
  static const nlohmann::json& empty() {
    static const nlohmann::json e = nlohmann::json::object();
    return e;
  }
  int checked_int(const std::string& key, int min) const {
    const auto& v = j_.at(key);
    // Whole numbers written as floats (8.0) are accepted; the range is checked before any cast.
    const std::optional<int> x = json_integer<int>(v);
    if (!v.is_number() || (v.is_number_float() && std::trunc(v.get<double>()) != v.get<double>()))
      throw SpecError(fmt::format("{}: expected an integer, got {}", path(key), v.dump()));
    if (!x || *x < min || *x > 1'000'000'000)
      throw SpecError(fmt::format("{}: must be an integer >= {}, got {}", path(key), min, v.dump()));
    return static_cast<int>(*x);
  }
  double checked_number(const std::string& key, double lo, double hi) const {
    const auto& v = j_.at(key);
    if (!v.is_number()) throw SpecError(fmt::format("{}: expected a number, got {}", path(key), v.dump()));
    double x = v.get<double>();
    if (!(x >= lo && x <= hi))
      throw SpecError(fmt::format("{}: must be between {} and {}, got {}", path(key), lo, hi, x));
    return x;
  }

  const nlohmann::json& j_;
  std::string prefix_;
};

}  // namespace astral::seer::detail
