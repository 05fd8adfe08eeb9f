#pragma once
// A fresh directory under $TMPDIR removed (with its contents) when the test ends.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace astral::test {

class TempDir {
 public:
  TempDir() {
    std::string base = std::filesystem::temp_directory_path() / "astral-test-XXXXXX";
    if (!mkdtemp(base.data())) throw std::runtime_error("mkdtemp failed");
    path_ = base;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

}  // namespace astral::test
