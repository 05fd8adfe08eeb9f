// One "host" of the multi-rail tests, run inside a network namespace: it loads the plugin with
// dlopen (NCCL 2.30's v12 table) and drives one connection per device at once, as NCCL drives
// one per rail:
//   rail_peer recv SIZE COUNT   listen on every device, print "handle D <hex>" per device and
//                               "ready", accept, receive COUNT messages per rail and verify them
//   rail_peer send SIZE COUNT   read the handles from stdin, connect device D to handle D, print
//                               "streaming" after the first completions (with a full window still
//                               in flight on every rail), wait for "go" on stdin, then send the
//                               rest: COUNT per rail. The pause lets the test cut a rail while its
//                               requests are pending, however fast the machine.
// Rails fail independently: a failed request ends its rail only. At the end one line per rail:
// "rail D NAME ok N" or "rail D NAME failed after N result R stalled_ms T" (T: time since that
// rail last completed a request), then "done". Exit 0 when every rail finished one way or the other.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "abi/net_v12.h"
#include "harness.hpp"
#include "pattern.hpp"

namespace {
using namespace astral::test;

constexpr int kWindow = 4;

struct Rail {
  int dev = 0;
  std::string name;
  void* comm = nullptr;
  int posted = 0, completed = 0;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<void*> requests;  // per window slot, null when free
  std::vector<int> index;       // message number in each slot
  ncclResult_t failure = ncclSuccess;
  Clock::time_point last_progress = Clock::now();
};

// One polling pass over a rail: test what is in flight, post what the window allows.
void progress(const ncclNet_v12_t& net, Rail& r, bool send, size_t size, int count) {
  if (r.failure != ncclSuccess) return;
  for (int slot = 0; slot < kWindow; ++slot) {
    if (r.requests[slot]) {
      int done = 0, got = 0;
      ncclResult_t res = net.test(r.requests[slot], &done, &got);
      if (res != ncclSuccess) {
        r.failure = res;
        return;
      }
      if (!done) continue;
      if (!send && check_pattern(r.buffers[slot].data(), size, uint64_t(r.index[slot])) != SIZE_MAX) {
        r.failure = ncclRemoteError;  // corrupted data: reported like a failure
        return;
      }
      r.requests[slot] = nullptr;
      ++r.completed;
      r.last_progress = Clock::now();
    }
    if (r.requests[slot] || r.posted >= count) continue;
    void* data = r.buffers[slot].data();
    ncclResult_t res;
    if (send) {
      fill_pattern(r.buffers[slot].data(), size, uint64_t(r.posted));
      res = net.isend(r.comm, data, size, 0, nullptr, nullptr, &r.requests[slot]);
    } else {
      size_t sz = size;
      int tag = 0;
      res = net.irecv(r.comm, 1, &data, &sz, &tag, nullptr, nullptr, &r.requests[slot]);
    }
    if (res != ncclSuccess) {
      r.failure = res;
      return;
    }
    if (r.requests[slot]) r.index[slot] = r.posted++;
  }
}

int run(bool send, size_t size, int count) {
  LoadedPlugin plugin;
  const auto& net = *static_cast<const ncclNet_v12_t*>(plugin.symbol("ncclNetPlugin_v12"));
  void* ctx = nullptr;
  ncclNetCommConfig_v12_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (net.init(&ctx, 0x4a11, &config, &LogCapture::logger, nullptr) != ncclSuccess) {
    std::printf("error init\n%s", LogCapture::dump().c_str());
    return 1;
  }
  int ndev = 0;
  net.devices(&ndev);
  std::vector<Rail> rails(size_t(ndev > 0 ? ndev : 0));
  std::vector<void*> listens(rails.size());
  for (int d = 0; d < ndev; ++d) {
    Rail& r = rails[size_t(d)];
    r.dev = d;
    ncclNetProperties_v12_t props;
    net.getProperties(d, &props);
    r.name = props.name;
    r.buffers.assign(kWindow, std::vector<uint8_t>(size));
    r.requests.assign(kWindow, nullptr);
    r.index.assign(kWindow, 0);
  }
  // Connection set-up, every rail at once.
  std::vector<std::vector<char>> handles(rails.size(), std::vector<char>(NCCL_NET_HANDLE_MAXSIZE));
  if (!send) {
    for (auto& r : rails) {
      net.listen(ctx, r.dev, handles[size_t(r.dev)].data(), &listens[size_t(r.dev)]);
      std::printf("handle %d %s\n", r.dev, to_hex(handles[size_t(r.dev)].data(), NCCL_NET_HANDLE_MAXSIZE).c_str());
    }
    std::printf("ready\n");
    std::fflush(stdout);
  } else {
    for (size_t i = 0; i < rails.size(); ++i) {
      std::string word, hex;
      int dev = -1;
      std::cin >> word >> dev >> hex;
      if (word != "handle" || dev < 0 || size_t(dev) >= rails.size() ||
          !from_hex(hex, handles[size_t(dev)].data(), NCCL_NET_HANDLE_MAXSIZE)) {
        std::printf("error bad handle line\n");
        return 1;
      }
    }
  }
  auto deadline = Clock::now() + std::chrono::seconds(30);
  for (bool pending = true; pending;) {
    pending = false;
    for (auto& r : rails) {
      if (r.comm) continue;
      pending = true;
      ncclResult_t res = send ? net.connect(ctx, r.dev, handles[size_t(r.dev)].data(), &r.comm, nullptr)
                              : net.accept(listens[size_t(r.dev)], &r.comm, nullptr);
      if (res != ncclSuccess) {
        std::printf("error connect rail %d\n%s", r.dev, LogCapture::dump().c_str());
        return 1;
      }
    }
    if (Clock::now() > deadline) {
      std::printf("error connect timed out\n");
      return 1;
    }
  }
  for (void* l : listens)
    if (l) net.closeListen(l);
  // Stream on every rail; tell the test once data flows everywhere, so it can cut a rail.
  bool announced = false;
  for (bool active = true; active;) {
    active = false;
    bool all_flowing = true;
    for (auto& r : rails) {
      progress(net, r, send, size, count);
      if (r.failure == ncclSuccess && r.completed < count) active = true;
      all_flowing = all_flowing && r.completed >= 2;
    }
    if (!announced && all_flowing) {
      std::printf("streaming\n");
      std::fflush(stdout);
      announced = true;
      if (send) {
        std::string go;
        std::cin >> go;  // the test changes the fabric, then says "go"
      }
    }
  }
  for (auto& r : rails) {
    if (r.failure == ncclSuccess) {
      std::printf("rail %d %s ok %d\n", r.dev, r.name.c_str(), r.completed);
    } else {
      auto stalled = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - r.last_progress);
      std::printf("rail %d %s failed after %d result %d stalled_ms %lld\n", r.dev, r.name.c_str(), r.completed,
                  int(r.failure), static_cast<long long>(stalled.count()));
    }
    send ? net.closeSend(r.comm) : net.closeRecv(r.comm);
  }
  std::printf("done\n");
  std::fflush(stdout);
  net.finalize(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::string(argv[1]) != "send" && std::string(argv[1]) != "recv")) {
    std::fprintf(stderr, "usage: rail_peer send|recv SIZE COUNT\n");
    return 2;
  }
  try {
    return run(std::string(argv[1]) == "send", std::stoull(argv[2]), std::stoi(argv[3]));
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}
