// Fibers on ucontext over one libcurl multi handle. Why fibers and not callbacks: the Redfish
// walker follows links as it reads them (service root, chassis, their subsystems, sensors), and
// written as a state machine it would be several times longer and harder to check against the
// schema; a fiber keeps it straight-line code. ucontext is in glibc and needs no dependency.
#include "poll_loop.hpp"

#include <sys/epoll.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define ASTRAL_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASTRAL_FIBER_ASAN 1
#endif
#endif
#ifdef ASTRAL_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace astral::facility::detail {

namespace {

using Steady = std::chrono::steady_clock;

#ifdef ASTRAL_FIBER_ASAN
constexpr std::size_t kStackBytes = 1u << 20;  // ASan's redzones make frames several times larger
#else
constexpr std::size_t kStackBytes = 256u << 10;  // the walker, nlohmann's parser, fmt: ~30 KiB
#endif

// ASan must be told when the stack changes, or it reports the other stack's frames as overflows.
void start_switch(void** fake_stack, const void* bottom, std::size_t size) {
#ifdef ASTRAL_FIBER_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack, const void** bottom, std::size_t* size) {
#ifdef ASTRAL_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

// A stack with an inaccessible guard page below it: an overflow faults instead of corrupting the
// neighbour's stack.
class Stack {
 public:
  Stack() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kStackBytes + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("poll loop: cannot map a fiber stack");
    base_ = static_cast<char*>(p);
    mprotect(base_, page_, PROT_NONE);
  }
  ~Stack() { munmap(base_, kStackBytes + page_); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  char* bottom() const { return base_ + page_; }
  std::size_t size() const { return kStackBytes; }

 private:
  char* base_ = nullptr;
  std::size_t page_ = 4096;
};

struct Fiber {
  ucontext_t context{};
  Stack stack;
  bool finished = false;
  bool runnable = true;            // false while it waits for a transfer or a pause
  bool pausing = false;
  Steady::time_point wake_at{};
  CURLcode result = CURLE_OK;      // of the transfer it waited for
  void* fake_stack = nullptr;      // ASan's bookkeeping while switched away
};

class Loop;
thread_local Loop* active_loop = nullptr;

class Loop {
 public:
  Loop(std::size_t concurrency, const std::function<bool()>& work)
      : work_(work), multi_(curl_multi_init()), epoll_(epoll_create1(EPOLL_CLOEXEC)) {
    if (!multi_ || epoll_ < 0) {
      if (multi_) curl_multi_cleanup(multi_);
      if (epoll_ >= 0) ::close(epoll_);
      throw std::runtime_error("poll loop: cannot create a libcurl multi handle and an epoll set");
    }
    // Connections and DNS entries are not kept here: each HttpClient keeps its own (one crawl's),
    // because libcurl walks a whole shared cache on lookups and returns (http_client.cpp).
    // The socket interface: curl says which descriptors to watch, epoll says which are ready, and
    // each event costs the same however many transfers are in flight (curl_multi_poll and
    // curl_multi_perform go over all of them every time: at 256 in flight that was most of the CPU).
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &Loop::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &Loop::on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    std::size_t n = std::max<std::size_t>(1, concurrency);
    try {
      for (std::size_t i = 0; i < n; ++i) fibers_.push_back(std::make_unique<Fiber>());
    } catch (...) {
      curl_multi_cleanup(multi_);
      ::close(epoll_);
      throw;
    }
    for (auto& f : fibers_) {
      getcontext(&f->context);
      f->context.uc_stack.ss_sp = f->stack.bottom();
      f->context.uc_stack.ss_size = f->stack.size();
      f->context.uc_link = &scheduler_;
      auto self = reinterpret_cast<std::uintptr_t>(this);
      makecontext(&f->context, reinterpret_cast<void (*)()>(&Loop::entry), 2,
                  static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu));
    }
  }
  ~Loop() {
    curl_multi_cleanup(multi_);
    ::close(epoll_);
  }

  void run() {
    Loop* outer = active_loop;
    active_loop = this;
    while (std::any_of(fibers_.begin(), fibers_.end(), [](const auto& f) { return !f->finished; })) {
      bool ran = false;
      for (auto& f : fibers_) {
        if (f->finished || !f->runnable) continue;
        switch_to(*f);
        ran = true;
      }
      wait_for_sockets(ran ? 0 : poll_timeout_ms());
      collect_transfers();
      wake_pauses();
    }
    active_loop = outer;
  }

  bool on_fiber() const { return current_ != nullptr; }

  CURLcode perform(CURL* curl) {
    Fiber* f = current_;
    curl_easy_setopt(curl, CURLOPT_PRIVATE, f);
    if (curl_multi_add_handle(multi_, curl) != CURLM_OK) return CURLE_FAILED_INIT;
    f->runnable = false;
    yield();
    return f->result;
  }

  void pause(std::chrono::milliseconds wait) {
    Fiber* f = current_;
    f->wake_at = Steady::now() + wait;
    f->pausing = true;
    f->runnable = false;
    yield();
  }

 private:
  static void entry(unsigned high, unsigned low) {
    auto* loop = reinterpret_cast<Loop*>((static_cast<std::uintptr_t>(high) << 32) | low);
    loop->fiber_main();
  }

  void fiber_main() {
    finish_switch(nullptr, &scheduler_bottom_, &scheduler_size_);
    Fiber* f = current_;
    for (;;) {
      try {
        if (!work_()) break;
      } catch (...) {  // an exception must not unwind past the fiber's first frame
      }
    }
    f->finished = true;
    start_switch(nullptr, scheduler_bottom_, scheduler_size_);  // this stack is done with
  }  // returns to uc_link: the scheduler

  void switch_to(Fiber& f) {
    current_ = &f;
    void* fake = nullptr;
    start_switch(&fake, f.stack.bottom(), f.stack.size());
    swapcontext(&scheduler_, &f.context);
    finish_switch(fake, nullptr, nullptr);
    current_ = nullptr;
  }

  void yield() {
    Fiber* f = current_;
    start_switch(&f->fake_stack, scheduler_bottom_, scheduler_size_);
    swapcontext(&f->context, &scheduler_);
    finish_switch(f->fake_stack, &scheduler_bottom_, &scheduler_size_);
  }

  // One round of epoll: curl acts on every ready descriptor, and on its timer when it is due.
  void wait_for_sockets(int timeout_ms) {
    epoll_event events[64];
    int n = epoll_wait(epoll_, events, 64, timeout_ms);
    int running = 0;
    for (int i = 0; i < n; ++i) {
      if (unwatched(events[i].data.fd)) continue;
      int mask = 0;
      if (events[i].events & EPOLLIN) mask |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) mask |= CURL_CSELECT_OUT;
      if (events[i].events & (EPOLLERR | EPOLLHUP)) mask |= CURL_CSELECT_ERR;
      curl_multi_socket_action(multi_, events[i].data.fd, mask, &running);
    }
    if (timer_due_ && *timer_due_ <= Steady::now()) {
      timer_due_.reset();
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
  }

  static int on_socket(CURL*, curl_socket_t fd, int what, void* self, void*) {
    static_cast<Loop*>(self)->watch(fd, what);
    return 0;
  }

  // Keeps the epoll set in step with what curl watches. A socket curl stops watching (its
  // transfer ended) is parked with no events rather than deleted: the crawl's next request on the
  // same connection then re-arms it with one call instead of two, 2 of 5 epoll_ctl calls per
  // request. A closed socket leaves the set by itself, so a stale entry only costs a failed MOD.
  void watch(int fd, int what) {
    if (fd < 0) return;
    if (static_cast<std::size_t>(fd) >= registered_.size()) registered_.resize(fd + 64, Registration::none);
    Registration& r = registered_[fd];
    epoll_event e{};
    e.data.fd = fd;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) e.events |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) e.events |= EPOLLOUT;
    bool parking = what == CURL_POLL_REMOVE;
    if (r != Registration::none && epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &e) == 0) {
      r = parking ? Registration::parked : Registration::armed;
      return;
    }
    r = Registration::none;
    if (!parking && epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e) == 0) r = Registration::armed;
  }

  // epoll reports errors and hang-ups even for no events: a parked socket that reports one
  // leaves the set, or level triggering would wake the loop for it again and again.
  bool unwatched(int fd) {
    if (static_cast<std::size_t>(fd) >= registered_.size() || registered_[fd] != Registration::parked) return false;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    registered_[fd] = Registration::none;
    return true;
  }

  static int on_timer(CURLM*, long timeout_ms, void* self) {
    auto* loop = static_cast<Loop*>(self);
    if (timeout_ms < 0) loop->timer_due_.reset();
    else loop->timer_due_ = Steady::now() + std::chrono::milliseconds(timeout_ms);
    return 0;
  }

  // Hands finished transfers back to their fibers; true when any fiber became runnable.
  bool collect_transfers() {
    bool any = false;
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Fiber* f = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &f);
      CURLcode result = m->data.result;
      curl_multi_remove_handle(multi_, m->easy_handle);  // m is invalid from here on
      if (!f) continue;
      f->result = result;
      f->runnable = any = true;
    }
    return any;
  }

  bool wake_pauses() {
    bool any = false;
    auto now = Steady::now();
    for (auto& f : fibers_) {
      if (f->pausing && f->wake_at <= now) {
        f->pausing = false;
        f->runnable = any = true;
      }
    }
    return any;
  }

  int poll_timeout_ms() const {
    long long ms = 100;  // bounds a missed wake-up
    auto now = Steady::now();
    if (timer_due_) ms = std::min<long long>(ms, std::chrono::ceil<std::chrono::milliseconds>(*timer_due_ - now).count());
    for (const auto& f : fibers_) {
      if (f->pausing)
        ms = std::min<long long>(ms, std::chrono::ceil<std::chrono::milliseconds>(f->wake_at - now).count());
    }
    return static_cast<int>(std::max<long long>(0, ms));
  }

  const std::function<bool()>& work_;
  CURLM* multi_;
  int epoll_;
  enum class Registration : unsigned char { none, armed, parked };
  std::vector<Registration> registered_;         // by descriptor
  std::optional<Steady::time_point> timer_due_;  // when curl wants CURL_SOCKET_TIMEOUT
  std::vector<std::unique_ptr<Fiber>> fibers_;
  ucontext_t scheduler_{};
  const void* scheduler_bottom_ = nullptr;
  std::size_t scheduler_size_ = 0;
  Fiber* current_ = nullptr;
};

}  // namespace

void run_on_fibers(std::size_t fibers, const std::function<bool()>& work) {
  Loop loop(fibers, work);
  loop.run();
}

CURLcode perform(CURL* curl) {
  if (active_loop && active_loop->on_fiber()) return active_loop->perform(curl);
  return curl_easy_perform(curl);
}

void pause_for(std::chrono::milliseconds wait) {
  if (active_loop && active_loop->on_fiber()) active_loop->pause(wait);
  else std::this_thread::sleep_for(wait);
}

}  // namespace astral::facility::detail
