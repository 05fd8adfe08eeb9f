// hwloc -> Node. Keeps every I/O object (hwloc drops them unless told, also when loading XML),
// identifies devices by PCI class and vendor (real dumps disagree on OS-device types) and records
// each device's bridge chain so path classes can be computed without hwloc afterwards.
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <type_traits>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "astral/topo/node.hpp"
#include "hwloc_xml_probe.hpp"

namespace astral::topo {
namespace {

constexpr uint16_t kVendorNvidia = 0x10de;
constexpr uint16_t kVendorAmd = 0x1002;
constexpr uint16_t kVendorAmazon = 0x1d0f;

struct TopologyHandle {
  hwloc_topology_t topo = nullptr;
  TopologyHandle() {
    if (hwloc_topology_init(&topo) != 0) throw TopologyError("hwloc: cannot initialise a topology");
  }
  ~TopologyHandle() { hwloc_topology_destroy(topo); }
  TopologyHandle(const TopologyHandle&) = delete;
  TopologyHandle& operator=(const TopologyHandle&) = delete;
};

const char* info(hwloc_obj_t o, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(o, name);
  return v ? v : "";
}

// hwloc's XML import stores bridge and OS-device types as the file wrote them, in C enum fields:
// a number outside the enum is a valid int but not a valid C++ enum value to load (UBSan: found
// by fuzz_topo_hwloc_xml), so such fields are read as their integer.
template <typename Enum>
int raw_enum(const Enum& field) {
  std::underlying_type_t<Enum> value;
  std::memcpy(&value, &field, sizeof value);
  return int(value);
}

bool is_pci_bridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE &&
         raw_enum(o->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_PCI;
}

bool is_host_bridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE &&
         raw_enum(o->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
}

// NVIDIA GPUs are 0x0302 (3D) or 0x0300 (VGA). AMD Instinct parts are 0x0380/0x0302/0x1200;
// AMD's 0x0300 VGA functions are consumer or BMC display adapters (ES1000), not training GPUs.
bool is_accelerator(uint16_t vendor, uint16_t class_id) {
  if (vendor == kVendorNvidia) return class_id == 0x0302 || class_id == 0x0300;
  if (vendor == kVendorAmd) return class_id == 0x0380 || class_id == 0x0302 || class_id == 0x1200;
  return false;
}

// hwloc's XML import takes PCI addresses as written; a device above 1f or a function above 7
// exists on no bus, and the NCCL topology written for it would be rejected (found by
// fuzz_topo_hwloc_xml). Thrown as TopologyError; the caller puts the input's name in front.
PciAddress address_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  if (p.dev > 0x1f || p.func > 7)
    throw TopologyError(fmt::format("PCI address {:04x}:{:02x}:{:02x}.{:x} is impossible (device above "
                                    "1f or function above 7)", p.domain, p.bus, p.dev, p.func));
  return PciAddress{p.domain, p.bus, p.dev, p.func};
}

// The node builder's errors (an impossible PCI address) with the input's name in front.
template <typename Build>
Node build_naming(const std::string& what, Build build) {
  try {
    return build();
  } catch (const TopologyError& e) {
    throw TopologyError(what + ": " + e.what());
  }
}

class NodeBuilder {
 public:
  explicit NodeBuilder(hwloc_topology_t topo) : topo_(topo) {}

  Node build(std::string source, bool live) {
    Node node;
    node.source = std::move(source);
    node.live = live;
    read_machine(node);
    identify_switches(node);
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(topo_, o));) classify_device(node, o);
    finish(node);
    return node;
  }

 private:
  void read_machine(Node& node) {
    hwloc_obj_t root = hwloc_get_root_obj(topo_);
    node.hostname = info(root, "HostName");
    node.cpu.arch = info(root, "Architecture");
    if (hwloc_obj_t pkg = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, nullptr)) {
      node.cpu.vendor = info(pkg, "CPUVendor");
      node.cpu.model_name = info(pkg, "CPUModel");
      if (*info(pkg, "CPUFamilyNumber")) node.cpu.family = std::atoi(info(pkg, "CPUFamilyNumber"));
      if (*info(pkg, "CPUModelNumber")) node.cpu.model = std::atoi(info(pkg, "CPUModelNumber"));
    }
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, n));) {
      NumaNode numa;
      numa.os_index = int(n->os_index);
      numa.local_memory_bytes = n->attr ? n->attr->numanode.local_memory : 0;
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, n);
      numa.package = pkg ? int(pkg->os_index) : -1;
      numa.local_cpus = local_cpus_string(n->cpuset);
      node.numa_nodes.push_back(numa);
    }
  }

  // The sysfs local_cpus format: 32-bit hex words, most significant first, comma separated.
  static std::string local_cpus_string(hwloc_const_cpuset_t set) {
    if (!set || hwloc_bitmap_iszero(set)) return "";
    int last = hwloc_bitmap_last(set);
    int words = last < 0 ? 1 : last / 32 + 1;
    std::string out;
    for (int w = words - 1; w >= 0; --w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b)
        if (hwloc_bitmap_isset(set, unsigned(w * 32 + b))) bits |= 1u << b;
      out += fmt::format("{:08x}", bits);
      if (w) out += ',';
    }
    return out;
  }

  // A physical PCIe switch is an upstream port plus its downstream ports. Below a root port the
  // bridges alternate: upstream port, downstream port, upstream port of a nested switch, ...
  void identify_switches(Node& node) {
    for (hwloc_obj_t b = nullptr; (b = hwloc_get_next_bridge(topo_, b));) {
      if (!is_pci_bridge(b)) continue;
      hwloc_obj_t parent = b->parent;
      if (!is_pci_bridge(parent)) {
        root_ports_.insert(b);
        continue;
      }
      bool parent_is_upstream_port = switch_of_.count(parent) && upstream_ports_.count(parent);
      if (parent_is_upstream_port) {
        int sw = switch_of_[parent];
        switch_of_[b] = sw;
        node.pcie_switches[sw].downstream_ports.push_back(address_of(b->attr->bridge.upstream.pci));
      } else {  // parent is a root port or a downstream port: b starts a new switch
        int sw = int(node.pcie_switches.size());
        PcieSwitch s;
        s.upstream_port = address_of(b->attr->bridge.upstream.pci);
        const auto& up = b->attr->bridge.upstream.pci;
        s.vendor_id = up.vendor_id;
        s.device_id = up.device_id;
        s.subsystem_vendor_id = up.subvendor_id;
        s.subsystem_device_id = up.subdevice_id;
        s.hwloc_link_gbytes_per_s = up.linkspeed;
        node.pcie_switches.push_back(s);
        switch_of_[b] = sw;
        upstream_ports_.insert(b);
      }
    }
  }

  PciFunction describe(hwloc_obj_t o) {
    const auto& p = o->attr->pcidev;
    PciFunction f;
    f.address = address_of(p);
    f.class_id = p.class_id;
    f.vendor_id = p.vendor_id;
    f.device_id = p.device_id;
    f.subsystem_vendor_id = p.subvendor_id;
    f.subsystem_device_id = p.subdevice_id;
    f.hwloc_link_gbytes_per_s = p.linkspeed;
    f.vendor_name = info(o, "PCIVendor");
    f.device_name = info(o, "PCIDevice");
    for (hwloc_obj_t a = o->parent; a; a = a->parent) {
      if (is_pci_bridge(a)) {
        auto it = switch_of_.find(a);
        f.upstream.push_back({address_of(a->attr->bridge.upstream.pci),
                              it == switch_of_.end() ? -1 : it->second});
      } else if (is_host_bridge(a)) {
        f.host_bridge = int(a->gp_index);
      } else if (a->type == HWLOC_OBJ_PCI_DEVICE) {
        continue;  // a function nested under another function (rare, e.g. some VFs)
      } else {
        break;  // first non-I/O ancestor
      }
    }
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topo_, o);
    if (local && local->nodeset && hwloc_bitmap_weight(local->nodeset) == 1)
      f.numa_node = hwloc_bitmap_first(local->nodeset);
    if (local) {
      hwloc_obj_t pkg = local->type == HWLOC_OBJ_PACKAGE
                            ? local
                            : hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, local);
      f.package = pkg ? int(pkg->os_index) : -1;
    }
    return f;
  }

  void classify_device(Node& node, hwloc_obj_t o) {
    const auto& p = o->attr->pcidev;
    bool nvswitch_subtype = o->subtype && std::strcmp(o->subtype, "NVSwitch") == 0;
    if (nvswitch_subtype || (p.vendor_id == kVendorNvidia && p.class_id == 0x0680)) {
      NvSwitch s{describe(o), p.vendor_id != 0 && p.class_id != 0};
      node.nvswitches.push_back(std::move(s));
      return;
    }
    if (is_accelerator(p.vendor_id, p.class_id)) {
      Gpu g;
      g.pci = describe(o);
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
        if (g.model.empty() && *info(c, "GPUModel")) g.model = info(c, "GPUModel");
        if (g.uuid.empty() && *info(c, "NVIDIAUUID")) g.uuid = info(c, "NVIDIAUUID");
      }
      if (g.model.empty()) g.model = g.pci.device_name.empty() ? g.pci.id_string() : g.pci.device_name;
      node.gpus.push_back(std::move(g));
      return;
    }
    bool network_class = p.class_id == 0x0207 || p.class_id == 0x0200;
    if (!network_class) return;
    Nic nic;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      if (raw_enum(c->attr->osdev.type) == HWLOC_OBJ_OSDEV_OPENFABRICS && nic.name.empty()) {
        nic.name = c->name ? c->name : "";
        nic.node_guid = info(c, "NodeGUID");
        for (unsigned i = 0; i < c->infos_count; ++i) {  // "Port<N>State" = first digit of ports/N/state
          int port = 0, consumed = 0;
          if (std::sscanf(c->infos[i].name, "Port%dState%n", &port, &consumed) == 1 &&
              c->infos[i].name[consumed] == '\0')
            nic.ports.push_back({port, std::atoi(c->infos[i].value)});
        }
      } else if (raw_enum(c->attr->osdev.type) == HWLOC_OBJ_OSDEV_NETWORK && nic.netdev.empty()) {
        nic.netdev = c->name ? c->name : "";
      }
    }
    if (nic.name.empty()) return;  // Ethernet without RDMA (and SR-IOV VFs without a driver)
    nic.pci = describe(o);
    if (p.vendor_id == kVendorAmazon)
      nic.transport = NicTransport::Efa;
    else
      nic.transport = p.class_id == 0x0207 ? NicTransport::InfiniBand : NicTransport::Ethernet;
    std::sort(nic.ports.begin(), nic.ports.end(),
              [](const NicPort& a, const NicPort& b) { return a.number < b.number; });
    node.nics.push_back(std::move(nic));
  }

  void finish(Node& node) {
    auto by_address = [](const auto& a, const auto& b) { return a.pci.address < b.pci.address; };
    std::sort(node.gpus.begin(), node.gpus.end(), by_address);
    std::sort(node.nics.begin(), node.nics.end(), by_address);
    std::sort(node.nvswitches.begin(), node.nvswitches.end(), by_address);
    for (size_t i = 0; i < node.gpus.size(); ++i) node.gpus[i].index = int(i);
    node.gpu_nic.assign(node.gpus.size(), std::vector<PathClass>(node.nics.size()));
    node.gpu_gpu.assign(node.gpus.size(), std::vector<PathClass>(node.gpus.size()));
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      for (size_t n = 0; n < node.nics.size(); ++n)
        node.gpu_nic[g][n] = classify_path(node.gpus[g].pci, node.nics[n].pci);
      for (size_t h = 0; h < node.gpus.size(); ++h)
        node.gpu_gpu[g][h] = classify_path(node.gpus[g].pci, node.gpus[h].pci);
    }
    assign_rails(node);
  }

  hwloc_topology_t topo_;
  std::map<hwloc_obj_t, int> switch_of_;
  std::set<hwloc_obj_t> upstream_ports_;
  std::set<hwloc_obj_t> root_ports_;
};

void load_or_throw(hwloc_topology_t topo, const std::string& what) {
  if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) != 0)
    throw TopologyError(what + ": hwloc refused the I/O filter");
  if (hwloc_topology_load(topo) != 0)
    throw TopologyError(fmt::format("{}: hwloc could not load it ({})", what, std::strerror(errno)));
}

// hwloc's XML loaders accept surprising things and print their complaints to stderr; check the
// file ourselves first so the user gets one clear line.
void precheck_xml_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw TopologyError(fmt::format("{}: cannot read hwloc XML ({})", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw TopologyError(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TopologyError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw TopologyError(path + ": empty file, expected an hwloc XML topology");
  if (text.find("<topology") == std::string::npos)
    throw TopologyError(path + ": not an hwloc XML topology (no <topology> element)");
  if (text.find("</topology>") == std::string::npos)
    throw TopologyError(path + ": truncated hwloc XML (no closing </topology>)");
  if (text.find("<object") == std::string::npos)
    throw TopologyError(path + ": empty hwloc topology (no objects)");
}

}  // namespace

std::string PciFunction::id_string() const { return fmt::format("{:04x}:{:04x}", vendor_id, device_id); }

Node load_hwloc_xml(const std::string& path, XmlImport import) {
  precheck_xml_file(path);
  // hwloc reports XML syntax errors on stderr only when asked; keep them quiet and say it once.
  setenv("HWLOC_XML_VERBOSE", "0", 0);
  if (import == XmlImport::isolated) detail::probe_hwloc_xml_in_child(path);
  TopologyHandle h;
  if (hwloc_topology_set_xml(h.topo, path.c_str()) != 0)
    throw TopologyError(fmt::format("{}: hwloc cannot use it as XML ({})", path, std::strerror(errno)));
  load_or_throw(h.topo, path);
  Node node = build_naming(path, [&] { return NodeBuilder(h.topo).build(path, false); });
  if (node.hostname.empty()) {
    auto slash = path.rfind('/');
    node.hostname = path.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  return node;
}

Node discover_live() {
  TopologyHandle h;
  // The Linux backend reads PCI from sysfs by itself. The libpciaccess ("pci") component adds only
  // vendor names and leaks, and the OpenCL/GL components would initialise GPU runtimes inside
  // someone's training job; none of them is needed.
  for (const char* component : {"pci", "opencl", "gl"})
    hwloc_topology_set_components(h.topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  load_or_throw(h.topo, "this system");
  Node node = build_naming("this system", [&] { return NodeBuilder(h.topo).build("live", true); });
  if (node.hostname.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    node.hostname = name;
  }
  return node;
}

}  // namespace astral::topo
