#pragma once
// The sysfs facts behind the host view (core/host_view.hpp): RDMA NIC ports, their PCI paths,
// GUIDs, speeds and rails (from topo's node model), and the host's IP interfaces. The facts come
// from topo's sysfs readers; everything else in the plugin goes through the host view.
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace astral::topo {
struct Node;
namespace sysfs {
class Root;
struct IbDevice;
}  // namespace sysfs
}  // namespace astral::topo

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
  int rail = -1;         // topo's rail (numbered by NIC bus id, so identical on identical
                         // nodes); -1 when the node model has none for this NIC
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

// The RDMA ports under any root laid out like "/" (tests use fixture
// trees): sysfs facts for every port, rails from `node` when given.
std::vector<RdmaPort> rdma_ports_from(const topo::sysfs::Root& root,
                                      const std::vector<topo::sysfs::IbDevice>& devices,
                                      const topo::Node* node);

// Up interfaces with an address of `family` (AF_INET, AF_INET6, or 0 for both, IPv4 first).
std::vector<NetInterface> list_interfaces(int family, const std::string& sysfs_root = "/sys");

// The sysfs path of the PCI device at or above `device_path` ("" when it is not on PCI).
std::string nearest_pci_path(const std::string& device_path);

}  // namespace astral::plugin
