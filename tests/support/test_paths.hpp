#pragma once
// Where tests find fixtures and built artefacts (defined per suite by tests/CMakeLists.txt).
#include <string>

namespace astral::test {

// Third-party fixtures copied from ../shared/fixtures (provenance: tests/fixtures/README.md) and
// project-made fixtures under tests/fixtures/astral.
inline std::string fixture(const std::string& relative) {
  std::string path = ASTRAL_FIXTURES_DIR;
  path += '/';
  path += relative;
  return path;
}

inline std::string binary_dir() { return ASTRAL_BINARY_DIR; }

}  // namespace astral::test
