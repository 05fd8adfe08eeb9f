#include "netbench/net_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

namespace astral::netbench {

std::unique_ptr<NetPluginLibrary> NetPluginLibrary::open(const std::string& path,
                                                         std::string* why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    *why = fmt::format("cannot load net plugin '{}': {}", path, err ? err : "unknown error");
    return nullptr;
  }
  auto* net = static_cast<const ncclNet_v11_t*>(dlsym(handle, "ncclNetPlugin_v11"));
  if (!net) {
    dlclose(handle);
    *why = fmt::format("'{}' exports no ncclNetPlugin_v11 (not a NCCL 2.28 net plugin)", path);
    return nullptr;
  }
  return std::unique_ptr<NetPluginLibrary>(new NetPluginLibrary(handle, net, path));
}

NetPluginLibrary::~NetPluginLibrary() { dlclose(handle_); }

void* NetPluginLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

std::string default_net_plugin_path() {
  namespace fs = std::filesystem;
  constexpr const char* kName = "libnccl-net-astral.so";
  if (const char* env = std::getenv("ASTRAL_NET_PLUGIN"); env && *env) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& dir : {exe.parent_path(), exe.parent_path().parent_path()}) {
      if (fs::exists(dir / kName, ec)) return (dir / kName).string();
    }
  }
  // Installed (the Debian package puts the CLI in /usr/bin and the plugin on the loader path):
  // the bare name makes dlopen search the loader path, as NCCL_NET_PLUGIN=astral does.
  return kName;
}

}  // namespace astral::netbench
