#pragma once
// A net context: what NCCL's init hands back per communicator (v11) or once per process (older
// versions). Comms keep their context alive with a shared_ptr, so a context outlives finalize
// until its last comm is closed.
#include <cstdint>
#include <memory>
#include <mutex>

#include "abi/nccl_common.h"
#include "core/net.hpp"
#include "astral/plugin/observer.hpp"

namespace astral::plugin {

struct NetContext {
  uint64_t comm_id = 0;
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  ncclProfilerCallback_t profiler = nullptr;  // for net profiler events (NCCL >= 2.24)
  std::shared_ptr<NetObserver> observer;      // null: no tracing

  void set_attr(const net::NetAttr& attr) {
    std::lock_guard lock(attr_mutex_);
    attr_ = attr;
  }
  net::NetAttr attr() const {
    std::lock_guard lock(attr_mutex_);
    return attr_;
  }

 private:
  mutable std::mutex attr_mutex_;
  net::NetAttr attr_;
};

// The observer the installed factory makes for `comm_id` (null without a factory).
std::shared_ptr<NetObserver> make_observer(uint64_t comm_id);

}  // namespace astral::plugin
