#include "core/nic_inventory.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "astral/topo/node.hpp"
#include "astral/topo/sysfs.hpp"

namespace astral::plugin {
namespace fs = std::filesystem;
namespace {

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int read_int(const fs::path& path, int fallback) {
  std::string text = read_line(path);
  try {
    return text.empty() ? fallback : std::stoi(text);
  } catch (const std::exception&) {
    return fallback;
  }
}

// "0002:c903:0045:6c20" -> 0x0002c90300456c20
uint64_t parse_guid(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ':'), text.end());
  try {
    return text.empty() ? 0 : std::stoull(text, nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

std::string canonical_or_empty(const fs::path& path) {
  std::error_code ec;
  auto resolved = fs::canonical(path, ec);
  return ec ? std::string() : resolved.string();
}

// "0000:17:00.0": domain:bus:device.function in hex.
bool is_pci_bus_id(const std::string& name) {
  auto hex = [&](size_t from, size_t to) {
    if (to > name.size() || from >= to) return false;
    for (size_t i = from; i < to; ++i) {
      if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
    }
    return true;
  };
  size_t colon = name.find(':');
  return colon != std::string::npos && colon >= 4 && hex(0, colon) && name.size() == colon + 8 &&
         name[colon + 3] == ':' && name[colon + 6] == '.' && hex(colon + 1, colon + 3) &&
         hex(colon + 4, colon + 6) && hex(colon + 7, colon + 8);
}

}  // namespace

std::string nearest_pci_path(const std::string& device_path) {
  fs::path path(device_path);
  while (!path.empty() && path.has_filename()) {
    if (is_pci_bus_id(path.filename().string())) return path.string();
    path = path.parent_path();
  }
  return {};
}

std::vector<RdmaPort> rdma_ports_from(const topo::sysfs::Root& root,
                                      const std::vector<topo::sysfs::IbDevice>& devices,
                                      const topo::Node* node) {
  std::vector<RdmaPort> ports;
  for (const auto& dev : devices) {
    fs::path dir = root.sys("class/infiniband/" + dev.name);
    std::string pci_path;
    if (dev.pci) pci_path = topo::sysfs::read_pci_device(root, *dev.pci).sysfs_path;
    // sys_image_guid names the chip (shared by its ports and functions), as NCCL's IB code uses.
    uint64_t guid = parse_guid(read_line(dir / "sys_image_guid"));
    if (guid == 0) guid = parse_guid(dev.node_guid);
    // Netdevs of the NIC's PCI function, by dev_port (0-based port index).
    std::map<int, std::string> netdevs;
    std::error_code ec;
    for (const auto& net : fs::directory_iterator(dir / "device/net", ec)) {
      netdevs[read_int(net.path() / "dev_port", 0)] = net.path().filename().string();
    }
    const topo::Nic* nic = node ? node->nic_by_name(dev.name) : nullptr;
    for (const auto& p : dev.ports) {
      RdmaPort port;
      port.device = dev.name;
      port.port = p.number;
      port.pci_path = pci_path;
      port.guid = guid;
      port.speed_mbps = static_cast<int>(p.rate_gbps * 1000);
      port.active = p.state_code == 4;
      if (auto it = netdevs.find(p.number - 1); it != netdevs.end()) {
        port.netdev = it->second;
      } else if (netdevs.size() == 1) {
        port.netdev = netdevs.begin()->second;
      } else if (nic) {
        port.netdev = nic->netdev;
      }
      port.rail = nic ? nic->rail : -1;
      ports.push_back(std::move(port));
    }
  }
  std::stable_sort(ports.begin(), ports.end(), [](const RdmaPort& a, const RdmaPort& b) {
    return std::tie(a.pci_path, a.port) < std::tie(b.pci_path, b.port);
  });
  return ports;
}

std::vector<NetInterface> list_interfaces(int family, const std::string& sysfs_root) {
  std::vector<NetInterface> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  std::set<std::string> seen;
  for (int pass_family : {AF_INET, AF_INET6}) {
    if (family != 0 && family != pass_family) continue;
    for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
      if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != pass_family) continue;
      if (!(ifa->ifa_flags & IFF_UP) || !(ifa->ifa_flags & IFF_RUNNING)) continue;
      if (pass_family == AF_INET6) {
        auto* sa6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&sa6->sin6_addr)) continue;  // needs a scope id per peer
      }
      if (!seen.insert(ifa->ifa_name).second) continue;  // first address of each interface
      NetInterface iface;
      iface.name = ifa->ifa_name;
      iface.address_len = pass_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      std::memcpy(&iface.address, ifa->ifa_addr, iface.address_len);
      iface.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      fs::path sys = fs::path(sysfs_root) / "class/net" / iface.name;
      // The PCI function above the netdev (virtio and similar sit one level below it).
      iface.pci_path = nearest_pci_path(canonical_or_empty(sys / "device"));
      iface.speed_mbps = read_int(sys / "speed", -1);
      iface.dev_port = read_int(sys / "dev_port", 0);
      result.push_back(std::move(iface));
    }
  }
  freeifaddrs(list);
  return result;
}

}  // namespace astral::plugin
