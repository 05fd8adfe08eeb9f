// Which transport runs: ASTRAL_TRANSPORT = tcp, ib or auto (the default: ib where sysfs shows an
// ACTIVE RDMA port and libibverbs opens it, else tcp). The decision lives here,
// in the core, so that a new transport is one more branch and no change to the ABI layer.
#include <fmt/format.h>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/transport.hpp"

namespace astral::plugin {

std::unique_ptr<Transport> make_transport(const Config& config, const HostView& host,
                                          std::string* why) {
  if (config.transport == "ib") return ib::make_ib_transport(config, host, why);
  if (config.transport == "auto" && host.rdma_usable()) {
    // Active RDMA ports in sysfs: the ib transport, unless libibverbs cannot use any of them.
    auto ib = ib::make_ib_transport(config, host, why);
    if (ib && ib->device_count() > 0) return ib;
    ASTRAL_INFO("ASTRAL_TRANSPORT=auto: RDMA ports are active but the ib transport has no device; "
                "using tcp over their interfaces");
  }
  return tcp::make_tcp_transport(config, host, why);
}

}  // namespace astral::plugin
