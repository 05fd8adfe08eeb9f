/* A plain C program for two checks that need a process of their own:
 *   plugin_probe env            prints NCCL_{NET,TUNER,PROFILER}_PLUGIN (run with LD_PRELOAD)
 *   plugin_probe load <lib.so>  dlopens the plugin from C, resolves every net table, prints names
 *   plugin_probe nccl230 <lib.so>  looks the tables up as NCCL 2.30 does (newest first, first
 *                                  found wins) and prints the version each interface binds
 * Including the abi headers here also proves they are valid C. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/net_v10.h"
#include "abi/net_v11.h"
#include "abi/net_v8.h"
#include "abi/net_v9.h"
#include "abi/net_v12.h"
#include "abi/profiler_v6.h"
#include "abi/tuner_v6.h"

static const char* show(const char* s) { return s ? s : "(unset)"; }

/* NCCL 2.30's lookup: each interface's symbols newest first (src/plugin/{net,tuner,profiler}.cc);
 * prints "net=v12 tuner=v6 profiler=v6" for the versions that bind. */
static int probe_nccl230(const char* path) {
  static const char* const net[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                    "ncclNetPlugin_v9", "ncclNetPlugin_v8", "ncclNetPlugin_v7",
                                    "ncclNetPlugin_v6"};
  static const char* const tuner[] = {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                      "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};
  static const char* const profiler[] = {"ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4",
                                         "ncclProfiler_v3", "ncclProfiler_v2", "ncclProfiler_v1"};
  const char* const* lists[3] = {net, tuner, profiler};
  const size_t counts[3] = {sizeof net / sizeof *net, sizeof tuner / sizeof *tuner,
                            sizeof profiler / sizeof *profiler};
  const char* labels[3] = {"net", "tuner", "profiler"};
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  for (int i = 0; i < 3; ++i) {
    const char* bound = NULL;
    for (size_t k = 0; k < counts[i] && !bound; ++k) {
      if (dlsym(lib, lists[i][k])) bound = strrchr(lists[i][k], '_') + 1;
    }
    printf("%s%s=%s", i ? " " : "", labels[i], bound ? bound : "none");
  }
  printf("\n");
  const ncclNet_v12_t* v12 = (const ncclNet_v12_t*)dlsym(lib, "ncclNetPlugin_v12");
  const ncclTuner_v6_t* t6 = (const ncclTuner_v6_t*)dlsym(lib, "ncclTunerPlugin_v6");
  const ncclProfiler_v6_t* p6 = (const ncclProfiler_v6_t*)dlsym(lib, "ncclProfiler_v6");
  /* 2.30 calls finalize unconditionally; getChunkSize is optional but ours is set. */
  if (!v12 || !v12->finalize || !t6 || !t6->getChunkSize || !p6 || !p6->startEvent) return 1;
  return dlclose(lib) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "env") == 0) {
    printf("NCCL_NET_PLUGIN=%s\n", show(getenv("NCCL_NET_PLUGIN")));
    printf("NCCL_TUNER_PLUGIN=%s\n", show(getenv("NCCL_TUNER_PLUGIN")));
    printf("NCCL_PROFILER_PLUGIN=%s\n", show(getenv("NCCL_PROFILER_PLUGIN")));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "load") == 0) {
    void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    const ncclNet_v11_t* v11 = (const ncclNet_v11_t*)dlsym(lib, "ncclNetPlugin_v11");
    const ncclNet_v10_t* v10 = (const ncclNet_v10_t*)dlsym(lib, "ncclNetPlugin_v10");
    const ncclNet_v9_t* v9 = (const ncclNet_v9_t*)dlsym(lib, "ncclNetPlugin_v9");
    const ncclNet_v8_t* v8 = (const ncclNet_v8_t*)dlsym(lib, "ncclNetPlugin_v8");
    if (!v11 || !v10 || !v9 || !v8) {
      fprintf(stderr, "missing net table\n");
      return 1;
    }
    printf("v11=%s v10=%s v9=%s v8=%s\n", v11->name, v10->name, v9->name, v8->name);
    return dlclose(lib) == 0 ? 0 : 1;
  }
  if (argc == 3 && strcmp(argv[1], "nccl230") == 0) return probe_nccl230(argv[2]);
  fprintf(stderr, "usage: plugin_probe env | load <lib.so> | nccl230 <lib.so>\n");
  return 2;
}
