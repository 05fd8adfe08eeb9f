#include "sysfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace astral::facility::detail {

SysfsRead read_attribute(const std::string& path) {
  SysfsRead r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.error = errno;
    return r;
  }
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  int err = errno;
  ::close(fd);
  if (n < 0) {
    r.error = err;
    return r;
  }
  std::string s(buf, static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  r.text = std::move(s);
  return r;
}

namespace {

// Reads the attribute and converts all of it with `parse` (strtoll/strtoull); anything left over,
// nothing converted or an overflow is EINVAL.
template <typename T, typename Parse>
std::optional<T> read_number(const std::string& path, int* error, Parse parse) {
  SysfsRead r = read_attribute(path);
  if (!r.text) {
    if (error) *error = r.error;
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  T v = parse(r.text->c_str(), &end);
  if (end == r.text->c_str() || *end != '\0' || errno == ERANGE) {
    if (error) *error = EINVAL;
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<long long> read_integer(const std::string& path, int* error) {
  return read_number<long long>(path, error, [](const char* s, char** e) { return std::strtoll(s, e, 10); });
}

std::optional<std::uint64_t> read_unsigned(const std::string& path, int* error) {
  // strtoull accepts "-1" (as 2^64 - 1): a counter is never negative.
  return read_number<std::uint64_t>(path, error, [](const char* s, char** e) -> std::uint64_t {
    if (*s == '-') {
      *e = const_cast<char*>(s);
      return 0;
    }
    return std::strtoull(s, e, 10);
  });
}

}  // namespace astral::facility::detail
