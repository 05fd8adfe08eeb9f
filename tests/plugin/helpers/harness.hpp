#pragma once
// Drives the built libnccl-net-astral.so the way NCCL does: dlopen, resolve ncclNetPlugin_v11,
// init a context per "communicator", poll connect/accept and test. Plus helpers for logs,
// environment and waiting with a deadline (a hang fails the test instead of blocking CI).
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi/net_v11.h"
#include "netbench/net_loader.hpp"

namespace astral::test {

inline std::string plugin_path() { return ASTRAL_NET_PLUGIN_SO; }

// Everything the plugin logged through the NCCL logger we gave it.
class LogCapture {
 public:
  static void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt,
                     ...) {
    char text[2048];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    std::lock_guard lock(mutex());
    lines().emplace_back(level, text);
    if (std::getenv("ASTRAL_TEST_VERBOSE")) std::fprintf(stderr, "[plugin %d] %s\n", level, text);
  }
  static void clear() {
    std::lock_guard lock(mutex());
    lines().clear();
  }
  static int count(int level, const std::string& substring) {
    std::lock_guard lock(mutex());
    int n = 0;
    for (const auto& [l, text] : lines()) n += l == level && text.find(substring) != std::string::npos;
    return n;
  }
  static std::string dump() {
    std::lock_guard lock(mutex());
    std::string all;
    for (const auto& [l, text] : lines()) all += std::to_string(l) + " " + text + "\n";
    return all;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::pair<int, std::string>>& lines() {
    static std::vector<std::pair<int, std::string>> l;
    return l;
  }
};

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The library loaded with dlopen; contexts created through it are finalized by the caller.
class LoadedPlugin {
 public:
  LoadedPlugin() {
    std::string why;
    lib_ = netbench::NetPluginLibrary::open(plugin_path(), &why);
    if (!lib_) throw std::runtime_error(why);
  }
  const ncclNet_v11_t& net() const { return lib_->net(); }
  void* symbol(const char* name) const { return lib_->symbol(name); }

  void* init(uint64_t comm_id = 0x1234) {
    void* ctx = nullptr;
    ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    if (net().init(&ctx, comm_id, &config, &LogCapture::logger, nullptr) != ncclSuccess) {
      throw std::runtime_error("init failed: " + LogCapture::dump());
    }
    return ctx;
  }

 private:
  std::unique_ptr<netbench::NetPluginLibrary> lib_;
};

// One initialised context on the loopback device; finalized on destruction.
struct PluginContext {
  ScopedEnv ifname{"ASTRAL_SOCKET_IFNAME", "lo"};
  LoadedPlugin plugin;
  void* ctx = plugin.init();
  const ncclNet_v11_t& net = plugin.net();
  ~PluginContext() { net.finalize(ctx); }
};

using Clock = std::chrono::steady_clock;

// Whether the suite runs over the ib transport (the "plugin: ib: " entries: ib_env.cpp).
inline bool ib_run() {
  const char* transport = std::getenv("ASTRAL_TRANSPORT");
  return transport && std::string(transport) == "ib";
}
// Device 0's name: loopback over tcp, softhca's IB port (ASTRAL_IB_HCA==mlx5_0) over ib.
inline std::string device0_name() { return ib_run() ? "mlx5_0:1" : "lo"; }

// Polls test() until done or an error; a request still pending at the deadline is a hang.
inline ncclResult_t wait_request(const ncclNet_v11_t& net, void* request, int* sizes,
                                 double timeout_s = 60) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int done = 0;
    ncclResult_t res = net.test(request, &done, sizes);
    if (res != ncclSuccess || done) return res;
    if (Clock::now() > deadline) throw std::runtime_error("request still pending at deadline");
  }
}

// Completes a receive and the send that feeds it, testing both as NCCL's progress thread does: a
// transport may move a send only when its request is tested (ib waits for the receiver's
// clear-to-send there). Returns the first error, or ncclSuccess once both are done.
inline ncclResult_t wait_pair(const ncclNet_v11_t& net, void* rreq, int* rsizes, void* sreq,
                              double timeout_s = 60) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  bool rdone = false, sdone = false;
  while (!rdone || !sdone) {
    int done = 0;
    if (!rdone) {
      if (ncclResult_t res = net.test(rreq, &done, rsizes); res != ncclSuccess) return res;
      rdone = done != 0;
    }
    if (!sdone) {
      done = 0;
      if (ncclResult_t res = net.test(sreq, &done, nullptr); res != ncclSuccess) return res;
      sdone = done != 0;
    }
    if (Clock::now() > deadline) throw std::runtime_error("request still pending at deadline");
  }
  return ncclSuccess;
}

struct CommPair {
  void* send = nullptr;
  void* recv = nullptr;
};

// listen, then connect and accept interleaved on this one thread (NCCL's GDR self-test does the
// same), each polled until it yields its comm.
inline CommPair connect_pair(const ncclNet_v11_t& net, void* ctx, int dev = 0,
                             double timeout_s = 20) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen_comm = nullptr;
  if (net.listen(ctx, dev, handle, &listen_comm) != ncclSuccess || !listen_comm) {
    throw std::runtime_error("listen failed: " + LogCapture::dump());
  }
  CommPair pair;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!pair.send || !pair.recv) {
    if (!pair.send && net.connect(ctx, dev, handle, &pair.send, nullptr) != ncclSuccess) {
      throw std::runtime_error("connect failed: " + LogCapture::dump());
    }
    if (!pair.recv && net.accept(listen_comm, &pair.recv, nullptr) != ncclSuccess) {
      throw std::runtime_error("accept failed: " + LogCapture::dump());
    }
    if (Clock::now() > deadline) throw std::runtime_error("connect/accept did not finish");
  }
  net.closeListen(listen_comm);
  return pair;
}

// Closes both comms of `pair`; throws unless both closes succeed.
inline void close_pair(const ncclNet_v11_t& net, CommPair pair) {
  ncclResult_t send = net.closeSend(pair.send), recv = net.closeRecv(pair.recv);
  if (send != ncclSuccess || recv != ncclSuccess) {
    throw std::runtime_error("closeSend/closeRecv failed: " + LogCapture::dump());
  }
}

// One 8-byte message through `pair`, checked; throws on any failure.
inline void exchange_one_message(const ncclNet_v11_t& net, CommPair pair) {
  uint64_t out = 0xfeedface12345678ULL, in = 0;
  void* data = &in;
  size_t size = sizeof in;
  int tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  if (net.irecv(pair.recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq) != ncclSuccess ||
      net.isend(pair.send, &out, sizeof out, 0, nullptr, nullptr, &sreq) != ncclSuccess ||
      !rreq || !sreq || wait_pair(net, rreq, nullptr, sreq) != ncclSuccess || in != out) {
    throw std::runtime_error("one message did not make it: " + LogCapture::dump());
  }
}

inline std::string to_hex(const void* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    uint8_t b = static_cast<const uint8_t*>(data)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

inline bool from_hex(const std::string& text, void* data, size_t size) {
  if (text.size() < size * 2) return false;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < size; ++i) {
    static_cast<uint8_t*>(data)[i] =
        static_cast<uint8_t>(nibble(text[2 * i]) << 4 | nibble(text[2 * i + 1]));
  }
  return true;
}

}  // namespace astral::test
