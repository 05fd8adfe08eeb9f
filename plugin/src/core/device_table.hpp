#pragma once
// The devices the plugin reports to NCCL: chosen like NCCL's socket transport chooses interfaces,
// described like a NIC port (PCI path, chip GUID, port, speed, rail) so that NCCL pairs each with
// the GPUs next to it and keeps rails apart.
#include <cstdint>
#include <string>
#include <vector>

#include "core/ifname_filter.hpp"
#include "core/nic_inventory.hpp"

namespace astral::plugin {

struct NetDevice {
  std::string name;         // unique: the interface name (NCCL's topology key for the NIC)
  NetInterface iface;       // where we listen and which source address we connect from
  std::string pci_path;     // "" when the interface is not on PCI (loopback, virtual)
  uint64_t guid = 0;        // NIC chip
  int port = 1;             // port of that chip
  int speed_mbps = 10000;
  int rail = -1;            // -1 when no RDMA NIC backs the interface
  std::string rdma_device;  // "mlx5_0" or ""
};

// Applies the selection rules (README "The NCCL plugin"): with a filter, the interfaces it accepts
// (loopback only when an include list names it); without, the netdevs of RDMA NIC ports, else every
// up non-loopback interface except container and virtual bridges. RDMA-backed devices come first,
// in rail order. `why_none` explains an empty result in one line.
std::vector<NetDevice> select_devices(const std::vector<NetInterface>& interfaces,
                                      const std::vector<RdmaPort>& rdma_ports,
                                      const IfnameFilter& filter, std::string* why_none);

// A stable 64-bit hash (FNV-1a), used to derive GUIDs for NICs that do not report one.
uint64_t stable_hash(const std::string& text);

}  // namespace astral::plugin
