// Whole-file helpers shared by the command groups (declared in command.hpp).
#include <fmt/format.h>

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

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot be read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace astral::cli
