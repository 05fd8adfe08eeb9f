#pragma once
// The plugin's one error convention. Every entry point of the net, tuner and profiler cores is
// noexcept and returns ncclResult_t, so the ABI layer (plugin/abi) only maps arguments and nothing
// can be thrown into NCCL. Code that may throw (allocation, std::mutex, the transports) runs inside
// guarded(): an exception becomes one WARN naming the call and an ncclResult_t, and the public-API
// value ncclInProgress, which a net plugin must never return, becomes ncclInternalError.
#include <exception>
#include <new>

#include "abi/nccl_common.h"
#include "core/log.hpp"

namespace astral::plugin {

template <typename Call>
ncclResult_t guarded(const char* call_name, Call&& call) noexcept {
  try {
    ncclResult_t result = call();
    return result == ncclInProgress ? ncclInternalError : result;
  } catch (const std::bad_alloc&) {
    ASTRAL_WARN("{}: out of memory", call_name);
    return ncclSystemError;
  } catch (const std::exception& e) {
    ASTRAL_WARN("{}: {}", call_name, e.what());
    return ncclInternalError;
  } catch (...) {
    ASTRAL_WARN("{}: unknown exception", call_name);
    return ncclInternalError;
  }
}

}  // namespace astral::plugin
