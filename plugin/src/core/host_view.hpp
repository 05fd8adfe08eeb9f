#pragma once
// One view of this host for every part of the plugin: the NIC ports (RDMA devices with their PCI
// paths, GUIDs, speeds and topo's rails) and topo's node model. Discovered once per process
// (per load of the library) on first use and shared by the net side and the tuner; a transport
// turns it into its devices, the tuner reads the node's GPU and rail counts from it.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/nic_inventory.hpp"

namespace astral::topo {
struct Node;
}

namespace astral::plugin {

// A NIC port as NCCL sees a device, whichever transport drives it.
struct NicPort {
  std::string name;         // unique among the transport's devices (NCCL's topology key)
  std::string pci_path;     // sysfs path of the PCI function, "" when not on PCI
  uint64_t guid = 0;        // NIC chip: ports of one chip share it
  int port = 1;             // port of that chip
  int speed_mbps = 10000;
  int rail = -1;            // topo's rail, numbered the same on identical nodes; -1 unknown
  int plane = -1;           // fabric plane where the fabric has separate planes; -1 unknown
  std::string rdma_device;  // "mlx5_0" or ""
  std::string netdev;       // its IP interface ("ens1f0") or ""
};

class HostView {
 public:
  // The RDMA NIC ports of the host, in PCI order, with rails from the node model.
  const std::vector<RdmaPort>& rdma_ports() const { return rdma_ports_; }
  // Why ports exist but have no rails ("" when they have them or there are no ports).
  const std::string& why_no_rails() const { return why_no_rails_; }
  // Whether an RDMA transport could run here: some RDMA port is ACTIVE. (The ib transport
  // confirms with libibverbs when it opens the device.)
  bool rdma_usable() const;
  // topo's node model (hwloc), built on first use; null with *why set when it cannot be built.
  std::shared_ptr<const topo::Node> node(std::string* why) const;

  // A view of given facts (tests, tools): no discovery happens.
  static std::shared_ptr<const HostView> from(std::vector<RdmaPort> ports,
                                              std::shared_ptr<const topo::Node> node);

 private:
  std::vector<RdmaPort> rdma_ports_;
  std::string why_no_rails_;
  mutable std::mutex node_mutex_;
  mutable bool node_tried_ = false;
  mutable std::shared_ptr<const topo::Node> node_;
  mutable std::string why_no_node_;

  friend std::shared_ptr<const HostView> discover_host_view();
};

// This process's host view: discovered on the first call, the same object afterwards.
std::shared_ptr<const HostView> host_view();

// Discovery itself (host_view() calls it once).
std::shared_ptr<const HostView> discover_host_view();

}  // namespace astral::plugin
