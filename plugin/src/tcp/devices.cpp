#include "tcp/devices.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace astral::plugin {
namespace {

// Interfaces that never carry job traffic unless the user names them.
bool is_virtual_default_excluded(const std::string& name) {
  for (const char* prefix : {"docker", "virbr", "veth", "cni", "flannel", "cali", "ifb"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

TcpDevice plain_device(const NetInterface& iface) {
  TcpDevice dev;
  dev.name = iface.name;
  dev.netdev = iface.name;
  dev.iface = iface;
  dev.pci_path = iface.pci_path;
  dev.speed_mbps = iface.speed_mbps > 0 ? iface.speed_mbps : 10000;
  if (!iface.pci_path.empty()) {
    // Functions of one PCI device are one chip: hash the path without the function digit, and
    // number ports by function so that (guid, port) names one physical port.
    const std::string& pci = iface.pci_path;
    dev.guid = stable_hash(pci.substr(0, pci.size() - 1));
    dev.port = 1 + (pci.back() - '0') + iface.dev_port;
  } else {
    dev.guid = stable_hash(iface.name);
  }
  return dev;
}

}  // namespace

uint64_t stable_hash(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::vector<TcpDevice> select_devices(const std::vector<NetInterface>& interfaces,
                                      const std::vector<RdmaPort>& rdma_ports,
                                      const IfnameFilter& filter, std::string* why_none) {
  std::vector<TcpDevice> rdma_backed, plain;
  for (const auto& iface : interfaces) {
    auto port = std::find_if(rdma_ports.begin(), rdma_ports.end(),
                             [&](const RdmaPort& p) { return p.netdev == iface.name; });
    bool wanted;
    if (!filter.empty()) {
      wanted = filter.accepts(iface.name) && (!iface.loopback || filter.names(iface.name));
    } else {
      wanted = !iface.loopback && !is_virtual_default_excluded(iface.name);
    }
    if (!wanted) continue;
    TcpDevice dev = plain_device(iface);
    if (port != rdma_ports.end()) {
      dev.pci_path = port->pci_path;
      dev.guid = port->guid ? port->guid : dev.guid;
      dev.port = port->port;
      if (iface.speed_mbps <= 0 && port->speed_mbps > 0) dev.speed_mbps = port->speed_mbps;
      dev.rail = port->rail;
      dev.rdma_device = port->device;
      rdma_backed.push_back(std::move(dev));
    } else {
      plain.push_back(std::move(dev));
    }
  }
  std::stable_sort(rdma_backed.begin(), rdma_backed.end(),
                   [](const TcpDevice& a, const TcpDevice& b) { return a.rail < b.rail; });
  std::stable_sort(plain.begin(), plain.end(),
                   [](const TcpDevice& a, const TcpDevice& b) { return a.name < b.name; });
  std::vector<TcpDevice> chosen;
  if (filter.empty() && !rdma_backed.empty()) {
    chosen = std::move(rdma_backed);  // default: the RDMA NICs' netdevs only
  } else {
    chosen = std::move(rdma_backed);
    chosen.insert(chosen.end(), plain.begin(), plain.end());
  }
  if (chosen.empty() && why_none) {
    std::string names;
    for (const auto& iface : interfaces) names += (names.empty() ? "" : ",") + iface.name;
    *why_none = filter.empty()
                    ? fmt::format("no up non-loopback interface with an address (found: {}); set "
                                  "ASTRAL_SOCKET_IFNAME (e.g. =lo for loopback)",
                                  names.empty() ? "none" : names)
                    : fmt::format("ASTRAL_SOCKET_IFNAME matches no up interface with an address "
                                  "(found: {})",
                                  names.empty() ? "none" : names);
  }
  return chosen;
}

}  // namespace astral::plugin
