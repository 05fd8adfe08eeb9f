// Node -> NCCL topology XML in NCCL's own dump style (2-space indent, attributes in NCCL's order,
// "/>" for leaves, no XML declaration).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "astral/topo/nccl_xml.hpp"

namespace astral::topo {
namespace {

// A PCIe switch (collapsed) or the CPU level, holding nested switches and endpoint devices.
struct Level {
  std::map<int, Level> switches;  // keyed by switch index
  std::vector<const PciFunction*> devices;
};

// Switches a device sits under, outermost first (root ports are not NCCL nodes).
std::vector<int> switch_path(const PciFunction& f) {
  std::vector<int> path;
  for (auto it = f.upstream.rbegin(); it != f.upstream.rend(); ++it)
    if (it->pcie_switch >= 0 && (path.empty() || path.back() != it->pcie_switch))
      path.push_back(it->pcie_switch);
  return path;
}

class NcclWriter {
 public:
  NcclWriter(const Node& node, const sysfs::Root* sysfs) : node_(node), sysfs_(sysfs) {}

  std::string write() {
    std::map<int, Level> cpus;  // by NUMA os index
    auto place = [&](const PciFunction& f) {
      Level* level = &cpus[numa_of(f)];
      for (int sw : switch_path(f)) level = &level->switches[sw];
      level->devices.push_back(&f);
    };
    for (const auto& g : node_.gpus) place(g.pci);
    for (const auto& n : node_.nics) place(n.pci);
    if (cpus.empty()) cpus[node_.numa_nodes.empty() ? 0 : node_.numa_nodes.front().os_index];

    out_ = "<system version=\"1\">\n";
    for (auto& [numa, level] : cpus) {
      out_ += "  <cpu" + cpu_attributes(numa) + ">\n";
      emit_level(level, 4);
      out_ += "  </cpu>\n";
    }
    out_ += "</system>\n";
    return out_;
  }

 private:
  int numa_of(const PciFunction& f) const {
    if (f.numa_node >= 0) return f.numa_node;
    for (const auto& n : node_.numa_nodes)  // a device attached at package level: its first node
      if (n.package == f.package && f.package >= 0) return n.os_index;
    return node_.numa_nodes.empty() ? -1 : node_.numa_nodes.front().os_index;
  }

  std::string cpu_attributes(int numa) const {
    std::string a = fmt::format(" numaid=\"{}\"", numa);
    for (const auto& n : node_.numa_nodes)
      if (n.os_index == numa && !n.local_cpus.empty()) a += fmt::format(" affinity=\"{}\"", n.local_cpus);
    const auto& cpu = node_.cpu;
    if (!cpu.arch.empty()) a += fmt::format(" arch=\"{}\"", cpu.arch == "aarch64" ? "arm64" : cpu.arch);
    if (!cpu.vendor.empty()) a += fmt::format(" vendor=\"{}\"", cpu.vendor);
    if (cpu.family >= 0) a += fmt::format(" familyid=\"{}\"", cpu.family);
    if (cpu.model >= 0) a += fmt::format(" modelid=\"{}\"", cpu.model);
    return a;
  }

  // NCCL reads capability values: min(device max, upstream port max).
  PcieLink link_of(const PciAddress& address, double hwloc_gbytes) const {
    if (sysfs_) {
      auto dev = sysfs::read_pci_device(*sysfs_, address);
      if (dev.present && dev.max.known()) {
        PcieLink link = dev.max;
        if (dev.parent) {
          auto up = sysfs::read_pci_device(*sysfs_, *dev.parent);
          if (up.present && up.max.known()) {
            link.generation = std::min(link.generation, up.max.generation);
            link.width = std::min(link.width, up.max.width);
          }
        }
        return link;
      }
    }
    return pcie_link_from_gbytes_per_s(hwloc_gbytes);
  }

  uint32_t class_code(const PciFunction& f) const {
    if (sysfs_) {  // sysfs has the programming interface byte hwloc drops
      auto dev = sysfs::read_pci_device(*sysfs_, f.address);
      if (dev.present && dev.class_code) return dev.class_code;
    }
    return uint32_t(f.class_id) << 8;
  }

  static std::string link_attributes(const PcieLink& link) {
    if (!link.known()) return R"( link_speed="" link_width="0")";
    return fmt::format(R"( link_speed="{}" link_width="{}")", link.speed_string(), link.width);
  }

  void emit_level(const Level& level, int indent) {
    // Children in bus order, switches and endpoints interleaved as NCCL's dump orders them.
    struct Child {
      PciAddress address;
      const Level* level;
      int sw;
      const PciFunction* device;
    };
    std::vector<Child> children;
    for (const auto& [sw, sub] : level.switches)
      children.push_back({node_.pcie_switches[size_t(sw)].upstream_port, &sub, sw, nullptr});
    for (const auto* d : level.devices) children.push_back({d->address, nullptr, -1, d});
    std::sort(children.begin(), children.end(),
              [](const Child& a, const Child& b) { return a.address < b.address; });
    std::string pad(size_t(indent), ' ');
    for (const auto& c : children) {
      if (c.device) {
        const auto& f = *c.device;
        out_ += fmt::format(
            "{}<pci busid=\"{}\" class=\"0x{:06x}\" vendor=\"0x{:04x}\" device=\"0x{:04x}\" "
            "subsystem_vendor=\"0x{:04x}\" subsystem_device=\"0x{:04x}\"{}/>\n",
            pad, f.address.to_string(), class_code(f), f.vendor_id, f.device_id, f.subsystem_vendor_id,
            f.subsystem_device_id, link_attributes(link_of(f.address, f.hwloc_link_gbytes_per_s)));
        continue;
      }
      const auto& sw = node_.pcie_switches[size_t(c.sw)];
      out_ += fmt::format(
          "{}<pci busid=\"{}\" class=\"0x060400\" vendor=\"0x{:04x}\" device=\"0x{:04x}\" "
          "subsystem_vendor=\"0x{:04x}\" subsystem_device=\"0x{:04x}\"{}>\n",
          pad, sw.upstream_port.to_string(), sw.vendor_id, sw.device_id, sw.subsystem_vendor_id,
          sw.subsystem_device_id, link_attributes(link_of(sw.upstream_port, sw.hwloc_link_gbytes_per_s)));
      emit_level(*c.level, indent + 2);
      out_ += pad + "</pci>\n";
    }
  }

  const Node& node_;
  const sysfs::Root* sysfs_;
  std::string out_;
};

}  // namespace

std::string write_nccl_topology(const Node& node, const sysfs::Root* sysfs) {
  return NcclWriter(node, sysfs).write();
}

}  // namespace astral::topo
