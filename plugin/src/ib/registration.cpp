// Memory registration on every member port of a connection end's device, and the registrations
// a comm makes itself when NCCL passed no mhandle.
#include <algorithm>
#include <fmt/format.h>

#include "ib/comms.hpp"

namespace astral::plugin::ib {

MemberMrs& MemberMrs::operator=(MemberMrs&& other) noexcept {
  if (this == &other) return *this;
  release();
  count_ = other.count_;
  for (int m = 0; m < count_; ++m) {
    hca_[m] = std::move(other.hca_[m]);
    entry_[m] = other.entry_[m];
    other.entry_[m] = nullptr;
  }
  other.count_ = 0;
  return *this;
}

bool MemberMrs::acquire(const Queues& queues, const net::MemoryRegion& region, std::string* why) {
  release();
  for (int m = 0; m < queues.member_count(); ++m) {
    std::shared_ptr<Hca> hca = queues.port(m).hca;
    MrEntry* e = region.dmabuf
                     ? hca->acquire_dmabuf(region.data, region.size, region.dmabuf_offset,
                                           region.dmabuf_fd, why)
                     : hca->acquire(region.data, region.size, why);
    if (!e) {
      if (queues.member_count() > 1) *why = fmt::format("{}: {}", queues.port(m).name, *why);
      release();
      return false;
    }
    hca_[m] = std::move(hca);
    entry_[m] = e;
    count_ = m + 1;
  }
  return true;
}

void MemberMrs::release() {
  for (int m = 0; m < count_; ++m) {
    if (entry_[m]) hca_[m]->release(entry_[m]);
    entry_[m] = nullptr;
    hca_[m].reset();
  }
  count_ = 0;
}

bool MemberMrs::on(const Queues& queues) const {
  if (count_ != queues.member_count()) return false;
  for (int m = 0; m < count_; ++m) {
    if (hca_[m] != queues.port(m).hca) return false;
  }
  return true;
}

ImplicitMrs::~ImplicitMrs() = default;

const MemberMrs* ImplicitMrs::find(void* mhandle, void* data, size_t size, std::string* why) {
  if (auto* mr = static_cast<IbMr*>(mhandle); mr && mr->magic == IbMr::kMagic) {
    if (mr->mrs.on(queues_)) return &mr->mrs;
    *why = fmt::format("mhandle registered on another device than {}", queues_.identity().name);
    return nullptr;
  }
  // NCCL registers every buffer it passes; tests and tools may not. Register once, keep one
  // reference per registration for the comm's life (not one per message).
  auto held = std::make_unique<MemberMrs>();
  if (!held->acquire(queues_, net::MemoryRegion{data, size, NCCL_PTR_HOST, false, 0, -1}, why)) {
    return nullptr;
  }
  for (const auto& h : held_) {
    if (h->entry(0) == held->entry(0)) return h.get();  // the cache gave a range already held
  }
  held_.push_back(std::move(held));
  return held_.back().get();
}

}  // namespace astral::plugin::ib
