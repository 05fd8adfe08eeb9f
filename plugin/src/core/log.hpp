#pragma once
// Messages go through NCCL's logger (subsystem NET), never stdout. Until NCCL hands us its logger
// (init), or when a host program passes none, warnings go to stderr and everything else is dropped.
#include <fmt/format.h>

#include "abi/nccl_common.h"

namespace astral::plugin {

void set_logger(ncclDebugLogger_t logger);
ncclDebugLogger_t logger();

void log_message(ncclDebugLogLevel level, const char* file, int line, const std::string& text);

}  // namespace astral::plugin

#define ASTRAL_LOG(level, ...) \
  ::astral::plugin::log_message(level, __FILE__, __LINE__, fmt::format(__VA_ARGS__))
#define ASTRAL_WARN(...) ASTRAL_LOG(NCCL_LOG_WARN, __VA_ARGS__)
#define ASTRAL_INFO(...) ASTRAL_LOG(NCCL_LOG_INFO, __VA_ARGS__)
#define ASTRAL_TRACE(...) ASTRAL_LOG(NCCL_LOG_TRACE, __VA_ARGS__)
