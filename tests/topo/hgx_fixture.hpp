#pragma once
// Builds a synthetic HGX-class node (2 sockets x 4 Broadcom PCIe switches, each with one H100 and
// one 400G ConnectX-7; four NVSwitches) as an hwloc 2.x XML plus a matching fake root (sys/, proc/),
// following the template in topology-formats.md §1.6. Mutations produce the faulty nodes the audit
// must catch. The committed fixture tests/fixtures/astral/topo/hgx-h100-8x400g was written by
// make_topo_fixture from the default spec.
#include <map>
#include <set>
#include <string>

#include "astral/topo/pci.hpp"

namespace astral::test {

struct HgxSpec {
  std::string hostname = "hgx-h100-01";
  std::string gpu_model = "NVIDIA H100 80GB HBM3";
  uint16_t gpu_device_id = 0x2330;
  std::set<int> missing_nics;               // slots whose NIC is absent
  int moved_nic_from = -1, moved_nic_to = -1;  // a NIC seated under another slot's switch
  std::map<int, topo::PcieLink> gpu_link;   // slot -> current link of that GPU (down-training)
  std::map<int, topo::PcieLink> nic_link;   // slot -> current link of that NIC
  std::set<int> acs_enabled_slots;          // slots whose switch downstream ports redirect P2P
  std::set<int> nic_ports_down;             // slots whose NIC port is DOWN / Polling
  std::map<int, std::string> nic_firmware;  // slot -> fw_ver (default 28.39.1002)
  std::map<int, int> nic_rate_gbps;         // slot -> port rate (default 400)
  std::map<int, int> gpu_numa_sysfs;        // slot -> numa_node in sysfs (e.g. -1)
  bool iommu_translated = false;            // DMA groups instead of identity (iommu=pt)
  bool peermem = true;                      // nvidia_peermem loaded
  bool open_kernel_module = true;           // NVIDIA open kernel module (dma-buf capable)
  bool acs_readable = true;                 // config files carry extended space
};

// Writes <dir>/hwloc.xml and <dir>/{sys,proc}/... (dir is created).
void write_hgx_fixture(const HgxSpec& spec, const std::string& dir);

}  // namespace astral::test
