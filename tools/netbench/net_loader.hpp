#pragma once
// Loads a NCCL net plugin library the way NCCL 2.28 does (dlopen RTLD_NOW|RTLD_LOCAL, then the
// newest "ncclNetPlugin_vN" symbol) so tools and tests drive exactly the bytes NCCL would.
#include <memory>
#include <string>

#include "abi/net_v11.h"

namespace astral::netbench {

class NetPluginLibrary {
 public:
  // Null with `why` set (one line naming the path) when the library or its v11 table is missing.
  static std::unique_ptr<NetPluginLibrary> open(const std::string& path, std::string* why);
  ~NetPluginLibrary();  // dlclose
  NetPluginLibrary(const NetPluginLibrary&) = delete;
  NetPluginLibrary& operator=(const NetPluginLibrary&) = delete;

  const ncclNet_v11_t& net() const { return *net_; }
  void* symbol(const char* name) const;  // any other exported symbol, or null
  const std::string& path() const { return path_; }

 private:
  NetPluginLibrary(void* handle, const ncclNet_v11_t* net, std::string path)
      : handle_(handle), net_(net), path_(std::move(path)) {}
  void* handle_;
  const ncclNet_v11_t* net_;
  std::string path_;
};

// Where libnccl-net-astral.so is: $ASTRAL_NET_PLUGIN if set, else next to the running executable
// (or one folder up: a build tree's bench/ and tests/), else the bare file name, which dlopen looks
// up on the loader path (where the package installs it).
std::string default_net_plugin_path();

}  // namespace astral::netbench
