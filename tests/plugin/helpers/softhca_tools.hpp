#pragma once
// What the plugin's ib tests read from and tell softhca: its RTR path log (one JSON line per QP)
// and its in-process fault entry point.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "softhca_env.hpp"

namespace astral::test {

// The RTR path log lines softhca wrote since `from` (a byte offset).
inline std::vector<nlohmann::json> path_log_since(std::streamoff from) {
  std::vector<nlohmann::json> out;
  std::ifstream in(softhca_dir() + "/path.jsonl");
  in.seekg(from);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}
inline std::streamoff path_log_size() {
  std::ifstream in(softhca_dir() + "/path.jsonl", std::ios::ate);
  return in ? std::streamoff(in.tellg()) : 0;
}

// SofthcaEnv with the path log on.
struct IbEnv : SofthcaEnv {
  ScopedEnv path_log{"SOFTHCA_PATH_LOG", (softhca_dir() + "/path.jsonl").c_str()};
};

// softhca's in-process fault entry point, from the instance the plugin loaded.
inline int softhca_fault(const std::string& json) {
  void* lib = dlopen(softhca_library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto control = reinterpret_cast<int (*)(const char*)>(dlsym(lib, "softhca_control"));
  REQUIRE(control);
  int rc = control(json.c_str());
  dlclose(lib);
  return rc;
}

}  // namespace astral::test
