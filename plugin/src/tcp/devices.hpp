#pragma once
// The TCP transport's devices: IP interfaces chosen like NCCL's socket transport chooses them
// (ASTRAL_SOCKET_IFNAME), each described as the NIC port behind it (PCI path, chip GUID, port,
// speed, rail) so that NCCL pairs each with the GPUs next to it and keeps rails apart.
#include <cstdint>
#include <string>
#include <vector>

#include "core/host_view.hpp"
#include "core/nic_inventory.hpp"
#include "tcp/ifname_filter.hpp"

namespace astral::plugin {

// The neutral NIC port (name = netdev = the interface name) plus what sockets need.
struct TcpDevice : NicPort {
  NetInterface iface;  // where we listen and which source address we connect from
};

// Applies the selection rules (README "The NCCL plugin"): with a filter, the interfaces it accepts
// (loopback only when an include list names it); without, the netdevs of RDMA NIC ports, else every
// up non-loopback interface except container and virtual bridges. RDMA-backed devices come first,
// in rail order. `why_none` explains an empty result in one line.
std::vector<TcpDevice> select_devices(const std::vector<NetInterface>& interfaces,
                                      const std::vector<RdmaPort>& rdma_ports,
                                      const IfnameFilter& filter, std::string* why_none);

// A stable 64-bit hash (FNV-1a), used to derive GUIDs for NICs that do not report one.
uint64_t stable_hash(const std::string& text);

}  // namespace astral::plugin
