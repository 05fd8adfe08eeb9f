#pragma once
// The narrow view of the node the plugin needs: which network devices exist, which RDMA NIC port
// backs each, their PCI paths, GUIDs, speeds and rails. Everything else in the plugin goes through
// this file, so the source of the facts (sysfs here, topo's node model later) is swapped in one place.
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace astral::plugin {

// One port of an RDMA NIC (/sys/class/infiniband/<device>/ports/<port>).
struct RdmaPort {
  std::string device;    // "mlx5_0"
  int port = 1;          // 1-based port number
  std::string netdev;    // its Ethernet/IPoIB interface, "" when none
  std::string pci_path;  // sysfs path of the NIC's PCI function
  uint64_t guid = 0;     // sys_image_guid: the NIC chip
  int speed_mbps = 0;    // port rate, 0 when unknown
  bool active = false;   // port state ACTIVE
  int rail = -1;         // rail index, stable across identical nodes; -1 unknown
};

// One IP interface that is up and has an address of the requested family.
struct NetInterface {
  std::string name;
  sockaddr_storage address{};
  socklen_t address_len = 0;
  bool loopback = false;
  std::string pci_path;  // nearest PCI device above /sys/class/net/<name>/device, "" if none
  int speed_mbps = -1;   // /sys/class/net/<name>/speed, -1 when unknown
  int dev_port = 0;      // /sys/class/net/<name>/dev_port
};

// RDMA ports under `sysfs_root` (normally "/sys"), ordered by PCI path and port; rails are the
// order of distinct NICs, which is the same on identical nodes.
std::vector<RdmaPort> discover_rdma_ports(const std::string& sysfs_root = "/sys");

// Up interfaces with an address of `family` (AF_INET, AF_INET6, or 0 for both, IPv4 first).
std::vector<NetInterface> list_interfaces(int family, const std::string& sysfs_root = "/sys");

// The sysfs path of the PCI device at or above `device_path` ("" when it is not on PCI).
std::string nearest_pci_path(const std::string& device_path);

}  // namespace astral::plugin
