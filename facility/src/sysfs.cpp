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

std::optional<long long> read_integer(const std::string& path, int* error) {
  SysfsRead r = read_attribute(path);
  if (!r.text) {
    if (error) *error = r.error;
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(r.text->c_str(), &end, 10);
  if (end == r.text->c_str() || *end != '\0' || errno == ERANGE) {
    if (error) *error = EINVAL;
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> read_unsigned(const std::string& path, int* error) {
  SysfsRead r = read_attribute(path);
  if (!r.text) {
    if (error) *error = r.error;
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(r.text->c_str(), &end, 10);
  if (end == r.text->c_str() || *end != '\0' || errno == ERANGE || r.text->front() == '-') {
    if (error) *error = EINVAL;
    return std::nullopt;
  }
  return v;
}

}  // namespace astral::facility::detail
