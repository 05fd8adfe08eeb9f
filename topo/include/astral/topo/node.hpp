#pragma once
// The node model: which GPUs, RDMA NICs, NVSwitches and PCIe switches a host has, where each sits
// in the PCIe tree, how every GPU reaches every NIC (PIX/PXB/PHB/NODE/SYS) and which rail each GPU
// and NIC belongs to. Built with hwloc from the live system or from an hwloc 2.x XML export.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "astral/topo/pci.hpp"

namespace astral::topo {

// Bad or unreadable topology input; the message names the input and the problem on one line.
struct TopologyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How two PCI devices reach each other, by their lowest common ancestor (nvidia-smi's legend).
enum class PathClass : uint8_t {
  PIX,   // through at most one PCIe switch
  PXB,   // through several PCIe switches, not the host bridge
  PHB,   // through a PCIe host bridge
  NODE,  // between host bridges within one NUMA node / package
  SYS,   // across the SMP interconnect between packages
};
std::string_view to_string(PathClass c);

// One bridge on a device's way up to its root port.
struct UpstreamBridge {
  PciAddress address;
  int pcie_switch = -1;  // index into Node::pcie_switches; -1 for a root port
};

struct PciFunction {
  PciAddress address;
  uint16_t class_id = 0;  // base class + subclass, e.g. 0x0302
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  double hwloc_link_gbytes_per_s = 0;  // hwloc's current-link figure; 0 when unknown
  int numa_node = -1;                  // from hwloc locality; -1 when the device spans or lacks one
  int package = -1;                    // package (socket) of its locality; -1 when machine-wide
  int host_bridge = -1;                // an id unique per host bridge within the node
  std::vector<UpstreamBridge> upstream;  // nearest bridge first, root port last
  std::string vendor_name;               // pci.ids names when the source had them
  std::string device_name;

  std::string id_string() const;  // "10de:2330"
};

struct Gpu {
  int index = 0;  // order by PCI bus id (the order NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID use)
  PciFunction pci;
  std::string model;  // from the NVML/CUDA OS device when present, else the PCI device name
  std::string uuid;
  int rail = -1;           // -1: no rail (no RDMA NIC close to it)
  std::vector<int> nics;   // indices into Node::nics of its rail NIC(s)
  PathClass nic_path = PathClass::SYS;  // class of the path to its rail NIC(s)
};

enum class NicTransport : uint8_t { InfiniBand, Ethernet, Efa, Other };
std::string_view to_string(NicTransport t);

struct NicPort {
  int number = 1;
  int hwloc_state = -1;  // hwloc Port<N>State: 4 = ACTIVE; -1 unknown
};

// An RDMA-capable NIC function (one per mlx5_N / rdmap* device).
struct Nic {
  std::string name;    // RDMA device: mlx5_0, rdmap16s27
  std::string netdev;  // ibp25s0, ens1f0np0; empty when none (EFA has none)
  PciFunction pci;
  NicTransport transport = NicTransport::Other;
  std::string node_guid;
  std::vector<NicPort> ports;
  int rail = -1;
  std::vector<int> gpus;  // indices into Node::gpus sharing this NIC's rail
};

struct NvSwitch {
  PciFunction pci;
  bool responding = true;  // false when the device reads back as vendor/class 0 (dead or hung)
};

struct PcieSwitch {
  PciAddress upstream_port;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  double hwloc_link_gbytes_per_s = 0;  // the upstream port's link
  std::vector<PciAddress> downstream_ports;
};

struct NumaNode {
  int os_index = 0;
  int package = -1;
  uint64_t local_memory_bytes = 0;
  std::string local_cpus;  // the sysfs local_cpus format NCCL uses: "00000000,0000ffff"
};

struct CpuInfo {
  std::string arch;    // x86_64, aarch64
  std::string vendor;  // GenuineIntel, AuthenticAMD
  int family = -1;
  int model = -1;
  std::string model_name;
};

// A rail: the NIC(s) and GPU(s) that must meet the same rail on every other host. Rails are
// numbered by their lowest NIC bus id, so identical nodes number them identically.
struct Rail {
  int index = 0;
  std::vector<int> gpus;
  std::vector<int> nics;
  PathClass path = PathClass::SYS;
};

struct Node {
  std::string hostname;
  std::string source;  // "live" or the XML path
  bool live = false;   // false for XML: this host's sysfs says nothing about it
  CpuInfo cpu;
  std::vector<NumaNode> numa_nodes;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<NvSwitch> nvswitches;
  std::vector<PcieSwitch> pcie_switches;
  std::vector<Rail> rails;
  std::vector<std::vector<PathClass>> gpu_nic;  // [gpu][nic]
  std::vector<std::vector<PathClass>> gpu_gpu;  // [gpu][gpu]

  const Gpu* gpu_by_bus_id(std::string_view bus_id) const;
  const Nic* nic_by_name(std::string_view name) const;
};

// Classifies the path between two devices from their upstream chains and locality.
PathClass classify_path(const PciFunction& a, const PciFunction& b);

// Bridges on the path between two devices (both sides up to and including their common bridge, or
// up to their root ports when they meet above PCIe): where ACS redirection would bite.
std::vector<PciAddress> bridges_between(const PciFunction& a, const PciFunction& b);

// How load_hwloc_xml runs hwloc's XML import. libhwloc 2.9 crashes on some malformed files, so
// by default the file is first imported in a short-lived child process and a crash there becomes a
// TopologyError. Code inside someone's training job (the plugin) must not fork: registered RDMA
// memory, CUDA contexts and other threads' locks do not survive it; it imports in process.
enum class XmlImport { isolated, in_process };

// Discovery. Both throw TopologyError with a one-line message naming the input.
Node discover_live();
Node load_hwloc_xml(const std::string& path, XmlImport import = XmlImport::isolated);

// Assigns rails from gpu_nic (called by discovery; exposed for tests of odd layouts):
// each GPU's rail NICs are the NICs at its best path class, unless that is SYS (another socket) or
// another GPU reaches that NIC more closely; GPUs and NICs linked that way form groups that pair
// 1:1, 1:k or k:1 in bus-id order (an irregular group becomes one rail, which the audit flags).
void assign_rails(Node& node);

}  // namespace astral::topo
