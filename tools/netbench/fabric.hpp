#pragma once
// Point-to-point transfers between netbench ranks, over the plugin (as NCCL's proxy drives it) or
// over plain TCP sockets (the baseline). A pattern is written once against this interface.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "abi/net_v11.h"
#include "netbench/bootstrap.hpp"

namespace astral::netbench {

struct Op {
  int peer = 0;
  bool send = false;
  void* data = nullptr;
  size_t bytes = 0;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual const char* name() const = 0;
  // Posts every op at once and returns when all are complete.
  virtual void exchange(const std::vector<Op>& ops) = 0;
  // `count` messages of `bytes` to or from `peer`, up to `window` in flight.
  virtual void stream(int peer, bool send, void* data, size_t bytes, int count, int window) = 0;
  // `count` round trips of `bytes` with `peer`: the initiator sends `out` and receives into `in`,
  // the other side receives then answers. `seconds` gets each round trip's time. This default
  // posts each receive when it is reached (a kernel socket has buffered what came before).
  virtual void pingpong(int peer, bool initiator, void* out, void* in, size_t bytes, int count,
                        std::vector<double>* seconds);
};

// Connects every pair of ranks through the plugin's device `dev`.
std::unique_ptr<Fabric> make_plugin_fabric(const ncclNet_v11_t& net, void* ctx, int dev, int rank,
                                           int ranks, BootstrapClient& bootstrap,
                                           double timeout_s);

// Connects every pair of ranks with TCP sockets listening on `address` (an IP literal).
std::unique_ptr<Fabric> make_socket_fabric(const std::string& address, int rank, int ranks,
                                           BootstrapClient& bootstrap, double timeout_s);

}  // namespace astral::netbench
