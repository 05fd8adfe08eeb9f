#pragma once
// Reading sysfs attributes: one small text file each, where a failed read means something
// (permission, no data) and must not stop the reader.
#include <cstdint>
#include <optional>
#include <string>

namespace astral::facility::detail {

struct SysfsRead {
  std::optional<std::string> text;  // trimmed
  int error = 0;                    // errno when text is empty
};
SysfsRead read_attribute(const std::string& path);
// The attribute as a signed integer, or nullopt (error in *error when given).
std::optional<long long> read_integer(const std::string& path, int* error = nullptr);
std::optional<std::uint64_t> read_unsigned(const std::string& path, int* error = nullptr);

}  // namespace astral::facility::detail
