#include "ib/vnic.hpp"

#include <fmt/format.h>

#include "ib/wire.hpp"

namespace astral::plugin::ib {

IbDevice single_device(const IbPort& port) {
  IbDevice d;
  d.identity = port;
  d.members = {port};
  d.gdr = port.gdr;
  d.dmabuf = port.dmabuf;
  return d;
}

int fused_plane(const std::vector<IbPort>& members) {
  bool all_same = true, any_unknown = false;
  int mask = 1 << 14;
  for (const IbPort& p : members) {
    all_same &= p.plane == members.front().plane;
    any_unknown |= p.plane < 0;
    if (p.plane >= 0 && p.plane < 14) mask |= 1 << p.plane;
    else if (p.plane >= 14) any_unknown = true;  // beyond the mask: not representable
  }
  if (all_same) return members.front().plane;
  return any_unknown ? -1 : mask;
}

bool fuse_ports(const std::vector<IbPort>& ports, const int* devs, int n, IbDevice* out,
                std::string* why) {
  if (n < 1 || n > kMaxMembers) {
    return *why = fmt::format("{} devices (a virtual NIC fuses 1 to {})", n, kMaxMembers), false;
  }
  IbDevice d;
  std::string names;
  for (int i = 0; i < n; ++i) {
    int dev = devs[i];
    if (dev < 0 || dev >= static_cast<int>(ports.size())) {
      return *why = fmt::format("device {} is not one of the {} physical devices", dev,
                                ports.size()), false;
    }
    for (int j = 0; j < i; ++j) {
      if (devs[j] == dev) return *why = fmt::format("device {} is named twice", dev), false;
    }
    const IbPort& p = ports[size_t(dev)];
    if (!d.members.empty()) {
      const IbPort& first = d.members.front();
      if (p.ethernet != first.ethernet) {
        return *why = fmt::format("{} is {} but {} is {}", first.name,
                                  first.ethernet ? "RoCE" : "InfiniBand", p.name,
                                  p.ethernet ? "RoCE" : "InfiniBand"), false;
      }
      if (p.rail != first.rail) {
        return *why = fmt::format("{} is on rail {} but {} on rail {}: a virtual NIC fuses the "
                                  "ports of one rail", first.name, first.rail, p.name, p.rail),
               false;
      }
    }
    names += (i ? "+" : "") + p.name;
    d.members.push_back(p);
  }
  const IbPort& first = d.members.front();
  d.identity = first;
  d.identity.name = names;
  d.identity.speed_mbps = 0;
  d.gdr = d.dmabuf = true;
  for (const IbPort& p : d.members) {
    d.identity.speed_mbps += p.speed_mbps;
    d.gdr &= p.gdr;
    d.dmabuf &= p.dmabuf;
  }
  d.identity.plane = fused_plane(d.members);
  *out = std::move(d);
  return true;
}

}  // namespace astral::plugin::ib
