#include "core/log.hpp"

#include <atomic>
#include <cstdio>

namespace astral::plugin {
namespace {
constinit std::atomic<ncclDebugLogger_t> g_logger{nullptr};
}

void set_logger(ncclDebugLogger_t logger) { g_logger.store(logger, std::memory_order_release); }

ncclDebugLogger_t logger() { return g_logger.load(std::memory_order_acquire); }

void log_message(ncclDebugLogLevel level, const char* file, int line, const std::string& text) {
  if (auto* sink = logger()) {
    // NCCL prefixes host, pid and level itself; we pass a literal format to keep '%' inert.
    sink(level, NCCL_NET, file, line, "NET/Astral: %s", text.c_str());
  } else if (level == NCCL_LOG_WARN) {
    std::fprintf(stderr, "NET/Astral WARN: %s\n", text.c_str());
  }
}

}  // namespace astral::plugin
