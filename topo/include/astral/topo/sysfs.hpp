#pragma once
// Readers for what hwloc does not keep: PCIe link width/speed (current and max), ACS control on
// bridges, InfiniBand port state/rate/firmware, IOMMU mode and GPUDirect RDMA plumbing.
// Every reader takes a root directory so tests point it at fixture trees; nothing here throws
// for odd or unreadable files — the problem is reported in the result instead.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "astral/topo/pci.hpp"

namespace astral::topo::sysfs {

// A filesystem root laid out like "/" (with sys/ and optionally proc/, as hwloc-gather-topology
// saves it), or a copy of /sys itself.
class Root {
 public:
  explicit Root(std::string dir = "/");
  const std::string& dir() const { return dir_; }
  std::string sys(const std::string& relative) const { return sys_ + "/" + relative; }
  std::string proc(const std::string& relative) const { return proc_ + "/" + relative; }
  bool has_sys() const;  // false when nothing sysfs-like is there

 private:
  std::string dir_, sys_, proc_;
};

struct PciDeviceStatus {
  bool present = false;
  PcieLink current, max;                  // unknown parts stay 0
  std::string current_speed, max_speed;   // verbatim kernel strings
  std::optional<int> numa_node;           // -1 when firmware gives no locality
  uint32_t class_code = 0;                // 24-bit class with programming interface (0x030200)
  std::optional<PciAddress> parent;       // the upstream bridge, from the device's sysfs path
  std::string sysfs_path;                 // canonical /sys/devices/... path (NCCL's pciPath)
  std::string problem;                    // why something could not be read; empty when fine
};
PciDeviceStatus read_pci_device(const Root& root, const PciAddress& address);

// ACS control register (PCIe extended capability 0x000D, control at +6).
struct AcsStatus {
  enum class State { kRead, kNotPresent, kNeedsRoot, kUnreadable } state = State::kUnreadable;
  uint16_t control = 0;
  std::string problem;

  static constexpr uint16_t kSourceValidation = 0x01, kTranslationBlocking = 0x02,
                            kRequestRedirect = 0x04, kCompletionRedirect = 0x08,
                            kUpstreamForwarding = 0x10, kEgressControl = 0x20, kDirectTranslated = 0x40;
  // P2P request or completion redirect forces GPU<->NIC traffic up through the root complex.
  bool redirects_p2p() const {
    return state == State::kRead && (control & (kRequestRedirect | kCompletionRedirect));
  }
  std::string flags() const;  // lspci style: "SrcValid+ TransBlk- ReqRedir+ ..."
};
AcsStatus read_acs(const Root& root, const PciAddress& bridge);

struct IbPort {
  int number = 0;
  int state_code = -1;  // 4 = ACTIVE
  std::string state;    // "ACTIVE"
  int phys_state_code = -1;  // 5 = LinkUp
  std::string phys_state;    // "LinkUp"
  double rate_gbps = 0;
  std::string rate;  // "400 Gb/sec (4X NDR)"
  std::string link_layer;  // InfiniBand | Ethernet
};

struct IbDevice {
  std::string name;  // mlx5_0
  std::string fw_ver;
  std::string node_guid;
  std::optional<PciAddress> pci;
  std::vector<IbPort> ports;
  std::string problem;
};
// Every device under sys/class/infiniband, sorted by name.
std::vector<IbDevice> read_ib_devices(const Root& root);

struct IommuStatus {
  bool readable = false;   // sys/kernel/iommu_groups exists
  int group_count = 0;
  int identity_groups = 0;     // passthrough
  int translated_groups = 0;   // DMA / DMA-FQ
  std::string cmdline_flags;   // iommu-related words from /proc/cmdline
  std::string mode;            // off | passthrough | translated | mixed | unknown
};
IommuStatus read_iommu(const Root& root);

struct GpuDirectStatus {
  bool nvidia_driver = false;  // sys/module/nvidia
  bool nvidia_peermem = false; // sys/module/nvidia_peermem (or legacy nv_peer_mem)
  bool memory_peers = false;   // sys/kernel/mm/memory_peers/nv_mem*/version (MLNX_OFED peer memory)
  bool gdrdrv = false;         // GDRCopy
  bool dmabuf = false;         // the kernel exposes dma-buf (the peermem-free GPUDirect path)
  bool rdma_capable() const { return nvidia_peermem || memory_peers || (nvidia_driver && dmabuf); }
};
GpuDirectStatus read_gpudirect(const Root& root);

// Network interfaces under sys/class/net with their PCI device when they have one.
struct NetInterface {
  std::string name;
  std::optional<PciAddress> pci;
  std::string operstate;  // up | down | unknown
  int speed_mbps = -1;
  bool loopback = false;
};
std::vector<NetInterface> read_net_interfaces(const Root& root);

}  // namespace astral::topo::sysfs
