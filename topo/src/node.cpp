#include <algorithm>
#include <numeric>
#include <set>

#include "astral/topo/node.hpp"

namespace astral::topo {

std::string_view to_string(PathClass c) {
  switch (c) {
    case PathClass::PIX: return "PIX";
    case PathClass::PXB: return "PXB";
    case PathClass::PHB: return "PHB";
    case PathClass::NODE: return "NODE";
    case PathClass::SYS: return "SYS";
  }
  return "SYS";
}

std::string_view to_string(NicTransport t) {
  switch (t) {
    case NicTransport::InfiniBand: return "InfiniBand";
    case NicTransport::Ethernet: return "Ethernet";
    case NicTransport::Efa: return "EFA";
    case NicTransport::Other: return "other";
  }
  return "other";
}

namespace {

// Length of the common tail of two bridge chains (both end at their root port).
size_t common_tail(const PciFunction& a, const PciFunction& b) {
  size_t k = 0;
  while (k < a.upstream.size() && k < b.upstream.size() &&
         a.upstream[a.upstream.size() - 1 - k].address ==
             b.upstream[b.upstream.size() - 1 - k].address)
    ++k;
  return k;
}

}  // namespace

PathClass classify_path(const PciFunction& a, const PciFunction& b) {
  if (a.address == b.address) return PathClass::PIX;
  size_t k = common_tail(a, b);
  if (k > 0) {
    // Count the physical switches (root ports count as their own unit) between each device and
    // the common bridge: one unit is "a single PCIe bridge" in nvidia-smi's sense.
    std::set<std::pair<int, PciAddress>> units;
    auto add_side = [&](const PciFunction& f) {
      for (size_t i = 0; i <= f.upstream.size() - k; ++i) {  // up to and including the common bridge
        const auto& br = f.upstream[i];
        units.insert(br.pcie_switch >= 0 ? std::pair{br.pcie_switch, PciAddress{}}
                                         : std::pair{-1, br.address});
      }
    };
    add_side(a);
    add_side(b);
    return units.size() <= 1 ? PathClass::PIX : PathClass::PXB;
  }
  if (a.host_bridge >= 0 && a.host_bridge == b.host_bridge) return PathClass::PHB;
  if (a.package >= 0 && a.package == b.package) return PathClass::NODE;
  return PathClass::SYS;
}

std::vector<PciAddress> bridges_between(const PciFunction& a, const PciFunction& b) {
  size_t k = common_tail(a, b);
  std::vector<PciAddress> out;
  // With a common bridge, stop at it (included once); otherwise walk both chains to the root.
  size_t a_end = k > 0 ? a.upstream.size() - k + 1 : a.upstream.size();
  size_t b_end = k > 0 ? b.upstream.size() - k : b.upstream.size();
  for (size_t i = 0; i < a_end; ++i) out.push_back(a.upstream[i].address);
  for (size_t i = 0; i < b_end; ++i) out.push_back(b.upstream[i].address);
  return out;
}

const Gpu* Node::gpu_by_bus_id(std::string_view bus_id) const {
  auto addr = PciAddress::parse(bus_id);
  if (!addr) return nullptr;
  for (const auto& g : gpus)
    if (g.pci.address == *addr) return &g;
  return nullptr;
}

const Nic* Node::nic_by_name(std::string_view name) const {
  for (const auto& n : nics)
    if (n.name == name || (!n.netdev.empty() && n.netdev == name)) return &n;
  return nullptr;
}

void assign_rails(Node& node) {
  const size_t G = node.gpus.size(), N = node.nics.size();
  node.rails.clear();
  for (auto& g : node.gpus) g.rail = -1, g.nics.clear(), g.nic_path = PathClass::SYS;
  for (auto& n : node.nics) n.rail = -1, n.gpus.clear();
  if (G == 0 || N == 0) return;

  // Union-find over GPUs [0, G) and NICs [G, G+N), linked at each GPU's best path class.
  std::vector<size_t> parent(G + N);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  // A NIC belongs to the GPUs for which it is nearest, and among those only to the closest: a GPU
  // whose own NIC is missing must not swallow a healthy GPU's NIC one PCIe level further away.
  std::vector<PathClass> gpu_best(G), nic_owner_class(N, PathClass::SYS);
  for (size_t g = 0; g < G; ++g) {
    gpu_best[g] = *std::min_element(node.gpu_nic[g].begin(), node.gpu_nic[g].end());
    for (size_t n = 0; n < N; ++n)
      if (node.gpu_nic[g][n] == gpu_best[g]) nic_owner_class[n] = std::min(nic_owner_class[n], gpu_best[g]);
  }
  for (size_t g = 0; g < G; ++g) {
    if (gpu_best[g] == PathClass::SYS) continue;
    for (size_t n = 0; n < N; ++n)
      if (node.gpu_nic[g][n] == gpu_best[g] && gpu_best[g] == nic_owner_class[n]) parent[find(g)] = find(G + n);
  }

  std::vector<Rail> rails;
  for (size_t root = 0; root < G + N; ++root) {
    std::vector<int> gpus, nics;  // already in bus-id order
    for (size_t x = 0; x < G + N; ++x)
      if (find(x) == root) (x < G ? gpus : nics).push_back(int(x < G ? x : x - G));
    if (gpus.empty() || nics.empty()) continue;
    const size_t g_count = gpus.size(), n_count = nics.size();
    auto slice = [](const std::vector<int>& v, size_t from, size_t count) {
      return std::vector<int>(v.begin() + long(from), v.begin() + long(from + count));
    };
    if (n_count % g_count == 0) {  // 1:1, or one GPU with several NICs under its switch
      size_t k = n_count / g_count;
      for (size_t i = 0; i < g_count; ++i) rails.push_back({0, {gpus[i]}, slice(nics, i * k, k)});
    } else if (g_count % n_count == 0) {  // several GPUs sharing one NIC
      size_t k = g_count / n_count;
      for (size_t j = 0; j < n_count; ++j) rails.push_back({0, slice(gpus, j * k, k), {nics[j]}});
    } else {  // irregular: one rail for the whole group; the audit reports the ratio
      rails.push_back({0, gpus, nics});
    }
  }
  std::sort(rails.begin(), rails.end(), [&](const Rail& a, const Rail& b) {
    return node.nics[size_t(a.nics.front())].pci.address < node.nics[size_t(b.nics.front())].pci.address;
  });
  for (size_t r = 0; r < rails.size(); ++r) {
    Rail& rail = rails[r];
    rail.index = int(r);
    rail.path = PathClass::PIX;
    for (int g : rail.gpus)
      for (int n : rail.nics) rail.path = std::max(rail.path, node.gpu_nic[size_t(g)][size_t(n)]);
    for (int g : rail.gpus) {
      auto& gpu = node.gpus[size_t(g)];
      gpu.rail = rail.index;
      gpu.nics = rail.nics;
      gpu.nic_path = PathClass::PIX;
      for (int n : rail.nics) gpu.nic_path = std::max(gpu.nic_path, node.gpu_nic[size_t(g)][size_t(n)]);
    }
    for (int n : rail.nics) {
      node.nics[size_t(n)].rail = rail.index;
      node.nics[size_t(n)].gpus = rail.gpus;
    }
  }
  node.rails = std::move(rails);
}

}  // namespace astral::topo
