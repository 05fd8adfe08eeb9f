#pragma once
// Requests of one comm live in a deque (stable addresses: NCCL holds pointers to them) and are
// recycled. Shared by the transports; each chooses its limit.
#include <cstddef>
#include <deque>
#include <vector>

namespace astral::plugin {

template <typename T, std::size_t kMaxInUse>
class RequestPool {
 public:
  // A fresh request, or null when kMaxInUse are in use (NCCL then retries).
  T* acquire() {
    T* r = nullptr;
    if (!free_.empty()) {
      r = free_.back();
      free_.pop_back();
    } else if (all_.size() < kMaxInUse) {
      r = &all_.emplace_back();
    }
    if (r) *r = T{};
    return r;
  }
  void release(T* r) { free_.push_back(r); }

 private:
  std::deque<T> all_;
  std::vector<T*> free_;
};

}  // namespace astral::plugin
