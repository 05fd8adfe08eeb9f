#pragma once
// Where tests find fixtures and built artefacts (defined per suite by tests/CMakeLists.txt).
#include <string>

namespace astral::test {

// Third-party fixtures copied from ../shared/fixtures (provenance: tests/fixtures/README.md) and
// project-made fixtures under tests/fixtures/astral.
inline std::string fixture(const std::string& relative) {
  return std::string(ASTRAL_FIXTURES_DIR) + "/" + relative;
}

inline std::string binary_dir() { return ASTRAL_BINARY_DIR; }

}  // namespace astral::test
