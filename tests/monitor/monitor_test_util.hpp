#pragma once
// Helpers shared by the monitor tests: temporary folders and parsing text in memory.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "astral/monitor/parse.hpp"

namespace astral::monitor::testing {

// A folder under the system temp dir, removed when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "astral-monitor-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }
  void write(const std::string& rel, const std::string& content) const {
    std::filesystem::path p = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }

 private:
  std::string path_;
};

inline ParseResult parse_text(const std::string& text, const std::string& host = "node01", bool switch_context = false,
                              int year = 2025) {
  ParseOptions o;
  o.default_host = host;
  o.switch_context = switch_context;
  o.time.year = year;
  o.time.tz_known = true;
  o.file_name = "test.log";
  return parse_buffer(text, detect_file_kind(text, "test.log"), o);
}

inline std::vector<const Event*> kind_of(const ParseResult& r, const std::string& kind) {
  std::vector<const Event*> out;
  for (const auto& e : r.events)
    if (e.kind == kind) out.push_back(&e);
  return out;
}

}  // namespace astral::monitor::testing
