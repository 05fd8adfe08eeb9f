// Which transport runs: ASTRAL_TRANSPORT = tcp, ib or auto (the default). The decision lives here,
// in the core, so that a new transport is one more branch and no change to the ABI layer.
#include <fmt/format.h>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/transport.hpp"

namespace astral::plugin {

std::unique_ptr<Transport> make_transport(const Config& config, const HostView& host,
                                          std::string* why) {
  if (config.transport == "ib") {
    // The RDMA transport (libibverbs, dlopened) is not part of this build yet: refuse cleanly so
    // that NCCL moves on to its next net plugin instead of running on a transport not asked for.
    *why = "ASTRAL_TRANSPORT=ib: the RDMA transport is not in this build of Astral; "
           "set ASTRAL_TRANSPORT=tcp or auto";
    return nullptr;
  }
  if (config.transport == "auto" && host.rdma_usable()) {
    // Where the ib transport will be chosen; until it exists, sockets over the RDMA NICs' netdevs.
    ASTRAL_INFO("ASTRAL_TRANSPORT=auto: RDMA ports are active, but this build has no RDMA "
                "transport; using tcp over their interfaces");
  }
  return tcp::make_tcp_transport(config, host, why);
}

}  // namespace astral::plugin
