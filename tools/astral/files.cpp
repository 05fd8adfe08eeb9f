// Whole-file helpers shared by the command groups (declared in command.hpp).
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "command.hpp"

namespace astral::cli {

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(fmt::format("{}: cannot be written; check the directory exists and is writable", path));
  out << text;
  if (!out.flush()) throw UsageError(fmt::format("{}: write failed (disk full?)", path));
}

void write_text_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    write_text_file(temporary, text);
  } catch (const UsageError&) {
    std::remove(temporary.c_str());
    throw UsageError(fmt::format("{}: cannot be written; check the directory exists and is writable", path));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw UsageError(fmt::format("{}: cannot be replaced ({})", path, std::strerror(errno)));
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot be read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace astral::cli
