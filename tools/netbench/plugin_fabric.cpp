// netbench over the net plugin: one send comm and one receive comm per peer, driven from this one
// thread with non-blocking isend/irecv/test, like NCCL's proxy progress thread.
#include <sched.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <tuple>

#include "netbench/fabric.hpp"

namespace astral::netbench {
namespace {

using Clock = std::chrono::steady_clock;

class PluginFabric final : public Fabric {
 public:
  PluginFabric(const ncclNet_v11_t& net, void* ctx, int dev, int rank, int ranks,
               BootstrapClient& bootstrap, double timeout_s)
      : net_(net), rank_(rank), send_(ranks, nullptr), recv_(ranks, nullptr),
        timeout_(std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000))) {
    // Listen once per peer, publish the handles, then connect and accept everything
    // interleaved on this thread.
    std::vector<void*> listens(ranks, nullptr);
    std::string mine(size_t(ranks) * NCCL_NET_HANDLE_MAXSIZE, '\0');
    for (int p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      check(net_.listen(ctx, dev, mine.data() + size_t(p) * NCCL_NET_HANDLE_MAXSIZE, &listens[p]),
            "listen");
    }
    std::vector<std::string> all = bootstrap.allgather(mine);
    std::vector<std::string> handles(ranks);
    for (int p = 0; p < ranks; ++p) {
      if (p != rank) handles[p] = all[p].substr(size_t(rank) * NCCL_NET_HANDLE_MAXSIZE, NCCL_NET_HANDLE_MAXSIZE);
    }
    auto deadline = Clock::now() + timeout_;
    for (bool pending = true; pending;) {
      pending = false;
      for (int p = 0; p < ranks; ++p) {
        if (p == rank) continue;
        if (!send_[p]) check(net_.connect(ctx, dev, handles[p].data(), &send_[p], nullptr), "connect");
        if (!recv_[p]) check(net_.accept(listens[p], &recv_[p], nullptr), "accept");
        pending = pending || !send_[p] || !recv_[p];
      }
      if (pending && Clock::now() > deadline) {
        throw std::runtime_error(fmt::format(
            "netbench: rank {} could not connect to every peer through the plugin in time", rank));
      }
    }
    for (void* l : listens) {
      if (l) net_.closeListen(l);
    }
  }

  ~PluginFabric() override {
    for (const auto& [key, mh] : mhandles_) net_.deregMr(std::get<0>(key), mh);
    for (void* c : send_) {
      if (c) net_.closeSend(c);
    }
    for (void* c : recv_) {
      if (c) net_.closeRecv(c);
    }
  }

  const char* name() const override { return "plugin"; }

  // NCCL's proxy posts a receive as soon as its buffer is free, ahead of the data (a raw verbs
  // loop likewise has its RECV posted): each side posts its next receive as soon as the last
  // one completed, so the receiver's clear-to-send is off the round trip's path.
  void pingpong(int peer, bool initiator, void* out, void* in, size_t bytes, int count,
                std::vector<double>* seconds) override {
    Op send{peer, true, out, bytes}, recv{peer, false, in, bytes};
    void* receive = post(recv);
    for (int i = 0; i < count; ++i) {
      bool more = i + 1 < count;
      auto start = Clock::now();
      if (initiator) {
        // Both at once: a send may move only when tested (ib matches it to a clear-to-send then).
        wait({post(send), receive});
        if (more) receive = post(recv);
      } else {
        wait({receive});
        if (more) receive = post(recv);
        wait({post(send)});
      }
      seconds->push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  }

  void exchange(const std::vector<Op>& ops) override {
    std::vector<void*> requests;
    requests.reserve(ops.size());
    for (const Op& op : ops) requests.push_back(post(op));
    wait(std::move(requests));
  }

  void stream(int peer, bool send, void* data, size_t bytes, int count, int window) override {
    std::deque<void*> inflight;
    int posted = 0, completed = 0;
    auto deadline = Clock::now() + timeout_;
    Op op{peer, send, data, bytes};
    while (completed < count) {
      while (posted < count && static_cast<int>(inflight.size()) < window) {
        inflight.push_back(post(op));
        ++posted;
      }
      if (done(inflight.front())) {
        inflight.pop_front();
        ++completed;
        deadline = Clock::now() + timeout_;
      } else {
        idle();
        if (Clock::now() > deadline) timed_out();
      }
    }
  }

 private:
  void check(ncclResult_t res, const char* call) {
    if (res != ncclSuccess) {
      throw std::runtime_error(fmt::format(
          "netbench: rank {}: plugin {} failed with error {} (see the NET/Astral WARN above)",
          rank_, call, static_cast<int>(res)));
    }
  }

  // NCCL's proxy progress thread yields the CPU when a pass over its requests made no progress
  // ("No request progressed. Let others run."); do the same so the peer rank gets to run.
  static void idle() { sched_yield(); }

  [[noreturn]] void timed_out() {
    throw std::runtime_error(fmt::format(
        "netbench: rank {}: a transfer did not complete in time (is a peer stuck?)", rank_));
  }

  void* post(const Op& op) {
    void* request = nullptr;
    auto deadline = Clock::now() + timeout_;
    while (!request) {  // a null request means "not now": retry, as NCCL does
      if (op.send) {
        void* comm = send_[op.peer];
        check(net_.isend(comm, op.data, op.bytes, rank_, mhandle(comm, op.data, op.bytes), nullptr,
                         &request),
              "isend");
      } else {
        void* data = op.data;
        size_t size = op.bytes;
        int tag = op.peer;
        void* comm = recv_[op.peer];
        void* mh = mhandle(comm, op.data, op.bytes);
        check(net_.irecv(comm, 1, &data, &size, &tag, &mh, nullptr, &request), "irecv");
      }
      if (!request && Clock::now() > deadline) timed_out();
    }
    return request;
  }

  // Tests every request until all are done.
  void wait(std::vector<void*> requests) {
    auto deadline = Clock::now() + timeout_;
    for (size_t pending = requests.size(); pending > 0;) {
      size_t before = pending;
      for (void*& r : requests) {
        if (r && done(r)) r = nullptr, --pending;
      }
      if (pending == before) idle();
      if (pending > 0 && Clock::now() > deadline) timed_out();
    }
  }

  // NCCL registers every buffer it hands the plugin, once per comm (regMr); so does netbench.
  void* mhandle(void* comm, void* data, size_t bytes) {
    if (bytes == 0) return nullptr;  // nothing to register; NCCL never registers 0 bytes
    auto key = std::make_tuple(comm, data, bytes);
    if (auto it = mhandles_.find(key); it != mhandles_.end()) return it->second;
    void* mh = nullptr;
    check(net_.regMr(comm, data, bytes, NCCL_PTR_HOST, &mh), "regMr");
    mhandles_.emplace(key, mh);
    return mh;
  }

  bool done(void* request) {
    int finished = 0;
    check(net_.test(request, &finished, nullptr), "test");
    return finished != 0;
  }

  const ncclNet_v11_t& net_;
  int rank_;
  std::vector<void*> send_, recv_;
  std::map<std::tuple<void*, void*, size_t>, void*> mhandles_;  // (comm, buffer, bytes) -> regMr's
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<Fabric> make_plugin_fabric(const ncclNet_v11_t& net, void* ctx, int dev, int rank,
                                           int ranks, BootstrapClient& bootstrap,
                                           double timeout_s) {
  return std::make_unique<PluginFabric>(net, ctx, dev, rank, ranks, bootstrap, timeout_s);
}

}  // namespace astral::netbench
