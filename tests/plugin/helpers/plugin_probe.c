/* A plain C program for two checks that need a process of their own:
 *   plugin_probe env            prints NCCL_{NET,TUNER,PROFILER}_PLUGIN (run with LD_PRELOAD)
 *   plugin_probe load <lib.so>  dlopens the plugin from C, resolves every net table, prints names
 * Including abi/net_v*.h here also proves the ABI headers are valid C. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/net_v10.h"
#include "abi/net_v11.h"
#include "abi/net_v8.h"
#include "abi/net_v9.h"

static const char* show(const char* s) { return s ? s : "(unset)"; }

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
  fprintf(stderr, "usage: plugin_probe env | load <lib.so>\n");
  return 2;
}
