#pragma once
// Unpacks a ttar text archive (the format of node_exporter's sysfs fixture, see
// tests/fixtures/README.md) into a directory: "Directory: p", "Path: p" + "Lines: n" + n lines,
// or "Path: p" + "SymlinkTo: target"; each record has "Mode: octal"; "# ttar - - -" separates.
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace astral::test {

inline void untar_ttar(const std::string& archive, const std::string& dest) {
  namespace fs = std::filesystem;
  std::ifstream in(archive);
  if (!in) throw std::runtime_error(archive + ": cannot open ttar archive");
  std::string line, path;
  auto value = [](const std::string& l, const char* key) { return l.substr(std::string(key).size()); };
  while (std::getline(in, line)) {
    if (line.rfind("Directory: ", 0) == 0) {
      fs::create_directories(fs::path(dest) / value(line, "Directory: "));
    } else if (line.rfind("Path: ", 0) == 0) {
      path = value(line, "Path: ");
      fs::create_directories((fs::path(dest) / path).parent_path());
    } else if (line.rfind("Lines: ", 0) == 0) {
      int n = std::stoi(value(line, "Lines: "));
      std::ofstream out(fs::path(dest) / path, std::ios::binary);
      for (int i = 0; i < n && std::getline(in, line); ++i) {
        // ttar marks a file without a trailing newline with a last line ending in "NOEOL".
        bool noeol = i == n - 1 && line.size() >= 5 && line.compare(line.size() - 5, 5, "NOEOL") == 0;
        out << (noeol ? line.substr(0, line.size() - 5) : line + "\n");
      }
    } else if (line.rfind("SymlinkTo: ", 0) == 0) {
      std::error_code ec;
      fs::create_symlink(value(line, "SymlinkTo: "), fs::path(dest) / path, ec);
    }
  }
}

}  // namespace astral::test
