// One opened HCA: the registration cache and the async-event thread.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "core/log.hpp"
#include "ib/hca.hpp"

namespace astral::plugin::ib {
namespace {
uintptr_t page_size() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}
}  // namespace

Hca::Hca(std::shared_ptr<const Verbs> verbs, ibv_context* context, ibv_pd* pd, std::string name)
    : verbs_(std::move(verbs)), context_(context), pd_(pd), name_(std::move(name)) {}

Hca::~Hca() {
  stop_events();
  for (auto& entry : mrs_) verbs_->dereg_mr(entry->mr);
  mrs_.clear();
  verbs_->dealloc_pd(pd_);
  verbs_->close_device(context_);
}

std::string Hca::fatal_reason() const {
  std::lock_guard lock(reason_mutex_);
  return reason_;
}

MrEntry* Hca::acquire(void* data, size_t size, std::string* why) {
  // Whole pages: NCCL registers buffers that share pages, and one MR then serves them all.
  uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page_size() - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + std::max<size_t>(size, 1) + page_size() - 1) &
                  ~(page_size() - 1);
  std::lock_guard lock(mr_mutex_);
  for (auto& e : mrs_) {
    if (!e->dmabuf && e->begin <= begin && end <= e->end) {
      ++e->refs;
      return e.get();
    }
  }
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = verbs_->reg_mr(pd_, reinterpret_cast<void*>(begin), end - begin, access);
  if (!mr) {
    *why = fmt::format("ibv_reg_mr of {} bytes at {:#x} on {}: {}", end - begin, begin, name_,
                       std::strerror(errno));
    return nullptr;
  }
  mrs_.push_back(std::make_unique<MrEntry>(MrEntry{mr, begin, end, 1, false}));
  return mrs_.back().get();
}

MrEntry* Hca::acquire_dmabuf(void* data, size_t size, uint64_t offset, int fd, std::string* why) {
  if (!verbs_->reg_dmabuf_mr) {
    *why = fmt::format("{} has no ibv_reg_dmabuf_mr (IBVERBS_1.12)", verbs_->library);
    return nullptr;
  }
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = verbs_->reg_dmabuf_mr(pd_, offset, size, reinterpret_cast<uint64_t>(data), fd, access);
  if (!mr) {
    *why = fmt::format("ibv_reg_dmabuf_mr of {} bytes (fd {}) on {}: {}", size, fd, name_,
                       std::strerror(errno));
    return nullptr;
  }
  std::lock_guard lock(mr_mutex_);
  // DMA-BUF registrations are never shared: their memory is named by (fd, offset), not address.
  mrs_.push_back(std::make_unique<MrEntry>(MrEntry{mr, 0, 0, 1, true}));
  return mrs_.back().get();
}

void Hca::release(MrEntry* entry) {
  std::lock_guard lock(mr_mutex_);
  if (--entry->refs > 0) return;
  for (auto it = mrs_.begin(); it != mrs_.end(); ++it) {
    if (it->get() == entry) {
      verbs_->dereg_mr(entry->mr);
      mrs_.erase(it);
      return;
    }
  }
}

void Hca::start_events() {
  if (events_.joinable()) return;
  // The async fd is polled, never read blocking, so that the thread can be told to stop.
  int flags = fcntl(context_->async_fd, F_GETFL);
  if (flags < 0 || fcntl(context_->async_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    ASTRAL_WARN("NET/IB : {}: cannot make the async event fd non-blocking ({}); async events "
                "(port error, QP fatal) are not watched", name_, std::strerror(errno));
    return;
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return;
  events_ = std::thread([this] { event_loop(); });
}

void Hca::stop_events() {
  if (!events_.joinable()) return;
  uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof one) < 0) {
    // eventfd writes fail only on overflow, which one write cannot cause.
  }
  events_.join();
  ::close(stop_fd_);
  stop_fd_ = -1;
}

void Hca::event_loop() {
  pollfd fds[2] = {{context_->async_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    ibv_async_event event;
    while (verbs_->get_async_event(context_, &event) == 0) {
      handle_event(event);
      // Always acknowledged: ibv_destroy_qp/cq wait for the acks of their events.
      verbs_->ack_async_event(&event);
    }
  }
}

void Hca::handle_event(const ibv_async_event& event) {
  const char* name = verbs_->event_name(event.event_type);
  auto fail = [&](std::string what) {
    std::lock_guard lock(reason_mutex_);
    if (reason_.empty()) reason_ = std::move(what);
  };
  switch (event.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
      if (auto* flag = static_cast<FatalFlag*>(event.element.qp->qp_context)) {
        flag->event.store(event.event_type);
      }
      ASTRAL_WARN("NET/IB : {}: async event {} on QP {:#x}", name_, name, event.element.qp->qp_num);
      break;
    case IBV_EVENT_CQ_ERR:
      if (auto* flag = static_cast<FatalFlag*>(event.element.cq->cq_context)) {
        flag->event.store(event.event_type);
      }
      ASTRAL_WARN("NET/IB : {}: async event {} (completion queue overrun)", name_, name);
      break;
    case IBV_EVENT_PORT_ERR:
      port_down_.fetch_or(1u << (event.element.port_num & 31));
      fail(fmt::format("port {} of {} went down ({})", event.element.port_num, name_, name));
      ASTRAL_WARN("NET/IB : {}:{}: async event {}", name_, event.element.port_num, name);
      break;
    case IBV_EVENT_PORT_ACTIVE:
      port_down_.fetch_and(~(1u << (event.element.port_num & 31)));
      ASTRAL_INFO("NET/IB : {}:{}: async event {}", name_, event.element.port_num, name);
      break;
    case IBV_EVENT_DEVICE_FATAL:
      fail(fmt::format("device {} reported a fatal error ({})", name_, name));
      fatal_.store(true);
      ASTRAL_WARN("NET/IB : {}: async event {}", name_, name);
      break;
    default:
      ASTRAL_INFO("NET/IB : {}: async event {}", name_, name);
      break;
  }
}

}  // namespace astral::plugin::ib
