// LD_PRELOAD activation. With LD_PRELOAD=/path/libnccl-net-astral.so alone, NCCL must find this
// library as its net, tuner and profiler plugin: a load-time constructor points NCCL_NET_PLUGIN,
// NCCL_TUNER_PLUGIN and NCCL_PROFILER_PLUGIN at our own path where the user left them unset or
// empty, and does nothing else.
//
// It acts only when the library really is in LD_PRELOAD. Loaded by NCCL itself (dlopen from a
// running, threaded process) it must not call setenv, which races with getenv in other threads;
// NCCL then already knows the net plugin and finds tuner and profiler in the same library.
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace {

// Whether one of LD_PRELOAD's entries (separated by ':' or spaces) resolves to `self`.
bool preloaded(const char* self) {
  const char* list = std::getenv("LD_PRELOAD");
  if (!list) return false;
  char entry[PATH_MAX];
  char resolved[PATH_MAX];
  const char* p = list;
  while (*p) {
    size_t n = std::strcspn(p, ": ");
    if (n > 0 && n < sizeof entry) {
      std::memcpy(entry, p, n);
      entry[n] = '\0';
      if (realpath(entry, resolved) && std::strcmp(resolved, self) == 0) return true;
      // A bare name ("libnccl-net-astral.so") is found by the loader's search path.
      const char* base = std::strrchr(self, '/');
      if (!std::strchr(entry, '/') && base && std::strcmp(entry, base + 1) == 0) return true;
    }
    p += n;
    while (*p == ':' || *p == ' ') ++p;
  }
  return false;
}

void set_if_unset(const char* name, const char* value) {
  const char* current = std::getenv(name);
  if (!current || !*current) setenv(name, value, 1);
}

__attribute__((constructor)) void activate_when_preloaded() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&activate_when_preloaded), &info) || !info.dli_fname) return;
  char self[PATH_MAX];
  if (!realpath(info.dli_fname, self) || !preloaded(self)) return;
  set_if_unset("NCCL_NET_PLUGIN", self);
  set_if_unset("NCCL_TUNER_PLUGIN", self);
  set_if_unset("NCCL_PROFILER_PLUGIN", self);
}

}  // namespace
