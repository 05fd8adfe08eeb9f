// Rendering of an audit: the JSON contract (`astral topo audit --json`) and the human table.
#include <algorithm>

#include <fmt/format.h>

#include "astral/topo/audit.hpp"

namespace astral::topo {

nlohmann::json AuditReport::to_json() const {
  using nlohmann::json;
  json j;
  j["node"] = {{"hostname", node.hostname},
               {"source", node.source},
               {"numa_nodes", node.numa_nodes.size()},
               {"nvswitches", node.nvswitches.size()},
               {"pcie_switches", node.pcie_switches.size()},
               {"rails", node.rails.size()}};
  j["gpus"] = json::array();
  for (const auto& g : node.gpus) {
    json nics = json::array();
    for (int n : g.nics) nics.push_back(node.nics[size_t(n)].name);
    json link = gpu_links.size() > size_t(g.index) && gpu_links[size_t(g.index)].known()
                    ? json(gpu_links[size_t(g.index)].to_string())
                    : json(nullptr);
    j["gpus"].push_back({{"index", g.index},
                         {"pci_bus_id", g.pci.address.to_string()},
                         {"model", g.model},
                         {"numa", g.pci.numa_node},
                         {"rail", g.rail >= 0 ? json(g.rail) : json(nullptr)},
                         {"nics", nics},
                         {"path_class", g.rail >= 0 ? json(to_string(g.nic_path)) : json(nullptr)},
                         {"link", link}});
  }
  j["nics"] = json::array();
  for (const auto& n : node.nics) {
    json ports = json::array();
    auto dev = std::find_if(ib_devices.begin(), ib_devices.end(), [&](const sysfs::IbDevice& d) {
      return (d.pci && *d.pci == n.pci.address) || d.name == n.name;
    });
    if (dev != ib_devices.end()) {
      for (const auto& p : dev->ports)
        ports.push_back({{"port", p.number}, {"state", p.state}, {"phys_state", p.phys_state},
                         {"rate_gbps", p.rate_gbps}, {"link_layer", p.link_layer}});
    } else {
      for (const auto& p : n.ports)
        ports.push_back({{"port", p.number}, {"state", p.hwloc_state == 4 ? "ACTIVE" : p.hwloc_state < 0 ? "unknown" : "not active"}});
    }
    j["nics"].push_back({{"name", n.name},
                         {"netdev", n.netdev},
                         {"pci_bus_id", n.pci.address.to_string()},
                         {"transport", to_string(n.transport)},
                         {"numa", n.pci.numa_node},
                         {"rail", n.rail >= 0 ? json(n.rail) : json(nullptr)},
                         {"firmware", dev != ib_devices.end() ? json(dev->fw_ver) : json(nullptr)},
                         {"ports", ports}});
  }
  j["checks"] = json::array();
  for (const auto& c : checks)
    j["checks"].push_back({{"id", c.id}, {"name", c.name}, {"status", to_string(c.status)},
                           {"detail", c.detail}, {"findings", c.findings}});
  j["result"] = failed() ? "fail" : "pass";
  return j;
}

std::string AuditReport::to_text() const {
  std::string out = fmt::format("Node {} ({}): {} GPUs, {} RDMA NICs, {} NVSwitches, {} NUMA nodes, {} rails\n\n",
                                node.hostname, node.source, node.gpus.size(), node.nics.size(),
                                node.nvswitches.size(), node.numa_nodes.size(), node.rails.size());
  if (!node.gpus.empty()) {
    out += fmt::format("{:<4} {:<13} {:<28} {:>4} {:>4}  {:<16} {:<5} {}\n", "GPU", "PCI bus id", "Model", "NUMA",
                       "Rail", "Rail NIC(s)", "Path", "Link");
    for (const auto& g : node.gpus) {
      std::vector<std::string> nics;
      for (int n : g.nics) nics.push_back(node.nics[size_t(n)].name);
      std::string model = g.model.size() > 28 ? g.model.substr(0, 27) + "~" : g.model;
      std::string link = size_t(g.index) < gpu_links.size() ? gpu_links[size_t(g.index)].to_string() : "unknown";
      out += fmt::format("{:<4} {:<13} {:<28} {:>4} {:>4}  {:<16} {:<5} {}\n", g.index, g.pci.address.to_string(),
                         model, g.pci.numa_node, g.rail >= 0 ? std::to_string(g.rail) : "-",
                         nics.empty() ? "-" : fmt::format("{}", fmt::join(nics, ",")),
                         g.rail >= 0 ? std::string(to_string(g.nic_path)) : "-", link);
    }
    out += "\n";
  }
  int counts[4] = {};
  out += "Checks\n";
  for (const auto& c : checks) {
    ++counts[int(c.status)];
    std::string status(to_string(c.status));
    if (c.status == CheckStatus::kFail) status = "FAIL";
    out += fmt::format("  {:<4} {:<7} {:<24} {}\n", c.id, status, c.name, c.detail);
    for (const auto& f : c.findings) out += fmt::format("  {:<4} {:<7} {:<24} - {}\n", "", "", "", f);
  }
  out += fmt::format("\nResult: {} passed, {} warnings, {} failed, {} skipped\n", counts[0], counts[1], counts[2],
                     counts[3]);
  return out;
}

}  // namespace astral::topo
