#pragma once
// What the plugin's ib tests read from and tell softhca: its RTR path log (one JSON line per QP)
// and its in-process fault entry point; and a verified receive into registered memory.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pattern.hpp"
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

// Sends `bytes` of pattern `seed` from host memory into `data` (registered as `mhandle`).
inline void receive_into(const ncclNet_v11_t& net, CommPair pair, void* data, void* mhandle,
                         size_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  fill_pattern(out.data(), bytes, seed);
  void* send_mh = nullptr;
  REQUIRE(net.regMr(pair.send, out.data(), bytes, NCCL_PTR_HOST, &send_mh) == ncclSuccess);
  size_t size = bytes;
  int tag = 5, received = -1;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(net.irecv(pair.recv, 1, &data, &size, &tag, &mhandle, nullptr, &rreq) == ncclSuccess);
  REQUIRE(net.isend(pair.send, out.data(), bytes, tag, send_mh, nullptr, &sreq) == ncclSuccess);
  REQUIRE(wait_pair(net, rreq, &received, sreq, 20) == ncclSuccess);
  CHECK(received == int(bytes));
  net.deregMr(pair.send, send_mh);
}

}  // namespace astral::test
