#include "hgx_fixture.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include <fmt/format.h>

namespace astral::test {
namespace fs = std::filesystem;
using topo::PcieLink;

namespace {

constexpr int kSlots = 8;
constexpr uint8_t kSlotBus[kSlots] = {0x15, 0x26, 0x37, 0x48, 0x95, 0xa6, 0xb7, 0xc8};
constexpr uint8_t kNvSwitchBus = 0x04;
const PcieLink kGen5x16{5, 16};
const PcieLink kGen4x2{4, 2};

// One PCI function in both views: an hwloc object and a sysfs directory.
struct Function {
  std::string busid;
  std::string pci_type;  // "0302 [10de:2330] [10de:16c1] a1"
  uint32_t class_code;   // sysfs class, e.g. 0x030200
  uint16_t vendor, device;
  PcieLink current, max;
  bool bridge = false;
  bool acs_redirect = false;
  int numa = 0;
  std::string xml_extra;  // bridge attributes or OS devices
  std::vector<std::string> osdevs;
  std::vector<Function> children;
};

std::string bdf(uint8_t bus, uint8_t dev = 0, uint8_t fn = 0) {
  return fmt::format("0000:{:02x}:{:02x}.{:x}", bus, dev, fn);
}

class Writer {
 public:
  Writer(const HgxSpec& spec, std::string dir) : spec_(spec), dir_(std::move(dir)) {}

  void write() {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::vector<std::vector<Function>> sockets(2);
    for (int s = 0; s < kSlots; ++s) sockets[size_t(s / 4)].push_back(slot(s));
    sockets[1].push_back(nvswitch_complex());
    write_xml(sockets);
    for (auto& socket : sockets)
      for (auto& host_bridge_child : socket) write_sysfs_tree(host_bridge_child, "");
    write_system_files();
  }

 private:
  Function bridge(uint8_t bus, uint8_t dev, uint8_t secondary, uint8_t subordinate, uint16_t vendor,
                  uint16_t device, int depth, PcieLink link, int numa) {
    Function f;
    f.busid = bdf(bus, dev);
    f.pci_type = vendor == 0x8086 ? fmt::format("0604 [{:04x}:{:04x}] [0000:0000] 04", vendor, device)
                                  : fmt::format("0604 [{:04x}:{:04x}] [15d9:1d25] 00", vendor, device);
    f.class_code = 0x060400;
    f.vendor = vendor, f.device = device;
    f.current = f.max = link;
    f.bridge = true;
    f.numa = numa;
    f.xml_extra = fmt::format(R"(bridge_type="1-1" depth="{}" bridge_pci="0000:[{:02x}-{:02x}]")", depth,
                              secondary, subordinate);
    return f;
  }

  Function gpu(int s, uint8_t bus) {
    Function f;
    f.busid = bdf(bus);
    f.pci_type = fmt::format("0302 [10de:{:04x}] [10de:16c1] a1", spec_.gpu_device_id);
    f.class_code = 0x030200;
    f.vendor = 0x10de, f.device = spec_.gpu_device_id;
    f.max = kGen5x16;
    f.current = spec_.gpu_link.count(s) ? spec_.gpu_link.at(s) : kGen5x16;
    f.numa = s / 4;
    f.osdevs.push_back(fmt::format(
        R"(<object type="OSDev" gp_index="{{gp}}" name="nvml{}" subtype="NVML" osdev_type="1">
  <info name="Backend" value="NVML"/>
  <info name="GPUVendor" value="NVIDIA Corporation"/>
  <info name="GPUModel" value="{}"/>
  <info name="NVIDIAUUID" value="GPU-{:08x}-0000-0000-0000-00000000000{}"/>
</object>)",
        s, spec_.gpu_model, 0xa5a50000 + s, s));
    return f;
  }

  Function nic(int s, uint8_t bus, int seated_slot) {
    Function f;
    f.busid = bdf(bus);
    f.pci_type = "0207 [15b3:1021] [15b3:0023] 00";
    f.class_code = 0x020700;
    f.vendor = 0x15b3, f.device = 0x1021;
    f.max = kGen5x16;
    f.current = spec_.nic_link.count(s) ? spec_.nic_link.at(s) : kGen5x16;
    f.numa = seated_slot / 4;
    bool down = spec_.nic_ports_down.count(s);
    f.osdevs.push_back(fmt::format(R"(<object type="OSDev" gp_index="{{gp}}" name="ibp{}s0" osdev_type="2">
  <info name="Port" value="1"/>
</object>)",
                                   bus));
    f.osdevs.push_back(fmt::format(R"(<object type="OSDev" gp_index="{{gp}}" name="mlx5_{}" osdev_type="3">
  <info name="NodeGUID" value="a088:c203:00aa:{:04x}"/>
  <info name="SysImageGUID" value="a088:c203:00aa:{:04x}"/>
  <info name="Port1State" value="{}"/>
  <info name="Port1LID" value="0x{:x}"/>
  <info name="Port1LMC" value="0"/>
</object>)",
                                   s, s, s, down ? 1 : 4, 0x10 + s));
    nic_slots_[f.busid] = s;
    return f;
  }

  // Host bridge child: root port -> switch upstream port -> downstream ports -> GPU and NIC.
  Function slot(int s) {
    uint8_t b = kSlotBus[s];
    int numa = s / 4;
    Function root = bridge(b, 1, b + 1, b + 5, 0x8086, 0x352a, 1, kGen5x16, numa);
    Function up = bridge(b + 1, 0, b + 2, b + 5, 0x1000, 0xc030, 2, kGen5x16, numa);
    Function ds_gpu = bridge(b + 2, 0, b + 3, b + 3, 0x1000, 0xc030, 3, kGen5x16, numa);
    Function ds_nic = bridge(b + 2, 1, b + 4, b + 4, 0x1000, 0xc030, 3, kGen5x16, numa);
    ds_gpu.acs_redirect = ds_nic.acs_redirect = spec_.acs_enabled_slots.count(s) > 0;
    ds_gpu.children.push_back(gpu(s, b + 3));
    bool nic_here = !spec_.missing_nics.count(s) && spec_.moved_nic_from != s;
    if (nic_here) ds_nic.children.push_back(nic(s, b + 4, s));
    up.children.push_back(ds_gpu);
    up.children.push_back(ds_nic);
    if (spec_.moved_nic_to == s && spec_.moved_nic_from >= 0) {
      Function ds_extra = bridge(b + 2, 2, b + 5, b + 5, 0x1000, 0xc030, 3, kGen5x16, numa);
      ds_extra.acs_redirect = spec_.acs_enabled_slots.count(s) > 0;
      ds_extra.children.push_back(nic(spec_.moved_nic_from, b + 5, s));
      up.children.push_back(ds_extra);
    }
    root.children.push_back(up);
    host_bridge_ranges_.push_back(fmt::format("0000:[{:02x}-{:02x}]", b, b + 5));
    return root;
  }

  Function nvswitch_complex() {
    uint8_t b = kNvSwitchBus;
    Function root = bridge(b, 1, b + 1, b + 6, 0x8086, 0x352a, 1, kGen5x16, 1);
    Function up = bridge(b + 1, 0, b + 2, b + 6, 0x1000, 0xc030, 2, kGen4x2, 1);
    for (uint8_t i = 0; i < 4; ++i) {
      Function ds = bridge(b + 2, i, b + 3 + i, b + 3 + i, 0x1000, 0xc030, 3, kGen4x2, 1);
      Function sw;
      sw.busid = bdf(b + 3 + i);
      sw.pci_type = "0680 [10de:22a3] [10de:1796] a1";
      sw.class_code = 0x068000;
      sw.vendor = 0x10de, sw.device = 0x22a3;
      sw.current = sw.max = kGen4x2;
      sw.numa = 1;
      ds.children.push_back(sw);
      up.children.push_back(ds);
    }
    root.children.push_back(up);
    host_bridge_ranges_.push_back(fmt::format("0000:[{:02x}-{:02x}]", b, b + 6));
    return root;
  }

  void emit(std::string& out, const Function& f, int indent) {
    std::string pad(size_t(indent), ' ');
    out += fmt::format(R"({}<object type="{}" gp_index="{}" {}{}pci_busid="{}" pci_type="{}" pci_link_speed="{:.6f}")",
                       pad, f.bridge ? "Bridge" : "PCIDev", gp_++, f.xml_extra,
                       f.xml_extra.empty() ? "" : " ", f.busid, f.pci_type, f.current.gbytes_per_s());
    if (f.children.empty() && f.osdevs.empty()) {
      out += "/>\n";
      return;
    }
    out += ">\n";
    for (const auto& c : f.children) emit(out, c, indent + 2);
    for (std::string os : f.osdevs) {
      auto at = os.find("{gp}");
      os.replace(at, 4, std::to_string(gp_++));
      size_t start = 0;
      while (start < os.size()) {
        size_t nl = os.find('\n', start);
        if (nl == std::string::npos) nl = os.size();
        out += pad + "  " + os.substr(start, nl - start) + "\n";
        start = nl + 1;
      }
    }
    out += pad + "</object>\n";
  }

  void write_xml(const std::vector<std::vector<Function>>& sockets) {
    std::string out = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <info name="DMIProductName" value="SYNTHETIC-HGX-H100-8GPU"/>
    <info name="Architecture" value="x86_64"/>
)";
    out += fmt::format("    <info name=\"HostName\" value=\"{}\"/>\n", spec_.hostname);
    size_t hb = 0;
    for (int p = 0; p < 2; ++p) {
      uint32_t cpus = 0x3u << (2 * p);
      out += fmt::format(
          R"(    <object type="Package" os_index="{0}" cpuset="0x{1:08x}" complete_cpuset="0x{1:08x}" nodeset="0x{2:08x}" complete_nodeset="0x{2:08x}" gp_index="{3}">
      <info name="CPUVendor" value="GenuineIntel"/>
      <info name="CPUFamilyNumber" value="6"/>
      <info name="CPUModelNumber" value="143"/>
      <info name="CPUModel" value="Intel(R) Xeon(R) Platinum 8480+"/>
      <object type="NUMANode" os_index="{0}" cpuset="0x{1:08x}" complete_cpuset="0x{1:08x}" nodeset="0x{2:08x}" complete_nodeset="0x{2:08x}" gp_index="{4}" local_memory="1099511627776"/>
)",
          p, cpus, 1u << p, gp_, gp_ + 1);
      gp_ += 2;
      for (int c = 0; c < 2; ++c) {
        int pu = 2 * p + c;
        out += fmt::format(
            R"(      <object type="Core" os_index="{0}" cpuset="0x{1:08x}" complete_cpuset="0x{1:08x}" nodeset="0x{2:08x}" complete_nodeset="0x{2:08x}" gp_index="{3}">
        <object type="PU" os_index="{0}" cpuset="0x{1:08x}" complete_cpuset="0x{1:08x}" nodeset="0x{2:08x}" complete_nodeset="0x{2:08x}" gp_index="{4}"/>
      </object>
)",
            pu, 1u << pu, 1u << p, gp_, gp_ + 1);
        gp_ += 2;
      }
      for (const auto& root_port : sockets[size_t(p)]) {
        out += fmt::format("      <object type=\"Bridge\" gp_index=\"{}\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"{}\">\n",
                           gp_++, host_bridge_ranges_[hb++]);
        emit(out, root_port, 8);
        out += "      </object>\n";
      }
      out += "    </object>\n";
    }
    out += "  </object>\n</topology>\n";
    std::ofstream(dir_ + "/hwloc.xml") << out;
  }

  static void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  // A 4 KiB config space: capability list at 0x100 with ACS on bridges (control word set when the
  // slot has ACS redirect on), AER on everything so the walker has to skip a capability.
  std::string config_space(const Function& f) {
    std::string cfg(spec_.acs_readable ? 4096 : 64, '\0');
    cfg[0] = char(f.vendor & 0xff), cfg[1] = char(f.vendor >> 8);
    cfg[2] = char(f.device & 0xff), cfg[3] = char(f.device >> 8);
    if (!spec_.acs_readable) return cfg;
    auto put32 = [&](size_t off, uint32_t v) {
      for (int i = 0; i < 4; ++i) cfg[off + size_t(i)] = char((v >> (8 * i)) & 0xff);
    };
    put32(0x100, 0x0001u | (1u << 16) | (f.bridge ? 0x148u << 20 : 0u));  // AER, next = ACS or end
    if (f.bridge) {
      put32(0x148, 0x000du | (1u << 16));                      // ACS, last in the list
      put32(0x14c, 0x007fu | (f.acs_redirect ? 0x001du << 16 : 0u));  // capability | control
    }
    return cfg;
  }

  void write_sysfs_tree(const Function& f, const std::string& parent_rel) {
    std::string host = "pci0000:" + f.busid.substr(5, 2);
    std::string rel = (parent_rel.empty() ? "devices/" + host : parent_rel) + "/" + f.busid;
    fs::path dev = fs::path(dir_) / "sys" / rel;
    put(dev / "vendor", fmt::format("0x{:04x}\n", f.vendor));
    put(dev / "device", fmt::format("0x{:04x}\n", f.device));
    put(dev / "class", fmt::format("0x{:06x}\n", f.class_code));
    put(dev / "current_link_speed", f.current.speed_string() + "\n");
    put(dev / "current_link_width", fmt::format("{}\n", f.current.width));
    put(dev / "max_link_speed", f.max.speed_string() + "\n");
    put(dev / "max_link_width", fmt::format("{}\n", f.max.width));
    int numa = f.numa;
    if (f.class_code == 0x030200) {
      for (auto [slot, value] : spec_.gpu_numa_sysfs)
        if (f.busid == bdf(uint8_t(kSlotBus[slot] + 3))) numa = value;
    }
    put(dev / "numa_node", fmt::format("{}\n", numa));
    put(dev / "config", config_space(f));
    fs::create_directories(fs::path(dir_) / "sys/bus/pci/devices");
    fs::create_symlink("../../../" + rel, fs::path(dir_) / "sys/bus/pci/devices" / f.busid);
    if (f.class_code == 0x020700) write_rdma(f, rel);
    if (!f.bridge) iommu_group(rel);
    for (const auto& c : f.children) write_sysfs_tree(c, rel);
  }

  void write_rdma(const Function& f, const std::string& rel) {
    int s = nic_slots_.at(f.busid);
    std::string name = fmt::format("mlx5_{}", s);
    fs::path ib = fs::path(dir_) / "sys" / rel / "infiniband" / name;
    std::string fw = spec_.nic_firmware.count(s) ? spec_.nic_firmware.at(s) : "28.39.1002";
    put(ib / "fw_ver", fw + "\n");
    put(ib / "node_guid", fmt::format("a088:c203:00aa:{:04x}\n", s));
    bool down = spec_.nic_ports_down.count(s);
    int rate = spec_.nic_rate_gbps.count(s) ? spec_.nic_rate_gbps.at(s) : 400;
    put(ib / "ports/1/state", down ? "1: DOWN\n" : "4: ACTIVE\n");
    put(ib / "ports/1/phys_state", down ? "2: Polling\n" : "5: LinkUp\n");
    put(ib / "ports/1/rate", fmt::format("{} Gb/sec (4X {})\n", rate, rate >= 400 ? "NDR" : "HDR"));
    put(ib / "ports/1/link_layer", "InfiniBand\n");
    fs::create_symlink("../../../" + f.busid, ib / "device");
    fs::create_directories(fs::path(dir_) / "sys/class/infiniband");
    fs::create_symlink("../../" + rel + "/infiniband/" + name, fs::path(dir_) / "sys/class/infiniband" / name);
    std::string netdev = fmt::format("ibp{}s0", std::stoi(f.busid.substr(5, 2), nullptr, 16));
    fs::path net = fs::path(dir_) / "sys" / rel / "net" / netdev;
    put(net / "operstate", down ? "down\n" : "up\n");
    put(net / "type", "32\n");
    put(net / "speed", fmt::format("{}\n", down ? -1 : rate * 1000));
    fs::create_symlink("../../../" + f.busid, net / "device");
    fs::create_directories(fs::path(dir_) / "sys/class/net");
    fs::create_symlink("../../" + rel + "/net/" + netdev, fs::path(dir_) / "sys/class/net" / netdev);
  }

  void iommu_group(const std::string& rel) {
    fs::path group = fs::path(dir_) / "sys/kernel/iommu_groups" / std::to_string(iommu_groups_++);
    put(group / "type", spec_.iommu_translated ? "DMA-FQ\n" : "identity\n");
    fs::create_directories(group / "devices");
    std::string busid = rel.substr(rel.rfind('/') + 1);
    fs::create_symlink("../../../../" + rel, group / "devices" / busid);
  }

  void write_system_files() {
    fs::path root(dir_);
    put(root / "proc/cmdline", std::string("BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=/dev/md0 ro ") +
                                   (spec_.iommu_translated ? "intel_iommu=on\n" : "intel_iommu=on iommu=pt\n"));
    put(root / "proc/sys/kernel/osrelease", "6.8.0-45-generic\n");
    put(root / "proc/driver/nvidia/version",
        spec_.open_kernel_module ? "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build\n"
                                 : "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Release Build\n");
    put(root / "sys/module/nvidia/version", "550.90.07\n");
    if (spec_.peermem) put(root / "sys/module/nvidia_peermem/version", "550.90.07\n");
  }

  const HgxSpec& spec_;
  std::string dir_;
  int gp_ = 2;
  int iommu_groups_ = 0;
  std::vector<std::string> host_bridge_ranges_;
  std::map<std::string, int> nic_slots_;
};

}  // namespace

void write_hgx_fixture(const HgxSpec& spec, const std::string& dir) { Writer(spec, dir).write(); }

}  // namespace astral::test
