#pragma once
// NCCL topology XML (what NCCL_TOPO_FILE accepts and NCCL_TOPO_DUMP_FILE writes): a writer that
// emits NCCL's own dump style, and a reader that enforces the limits of NCCL's hand-written parser
// (no XML declaration, no tabs, one-line tags, <= 16 attributes, <= 255-character values, ...),
// so a file that passes here is a file NCCL loads.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "astral/topo/node.hpp"
#include "astral/topo/sysfs.hpp"

namespace astral::topo {

struct NcclXmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in file order
  std::vector<NcclXmlElement> children;
  int line = 0;

  const std::string* attribute(std::string_view key) const;
};

// The NCCL topology for a node: one <cpu> per NUMA node, one <pci> per physical PCIe switch (NCCL
// collapses upstream and downstream ports), GPUs and RDMA NICs under their switch. Link speed and
// width are capability values (min of device and upstream port, as NCCL reads them) from sysfs
// when `sysfs` is given, else recovered from hwloc's link figure.
std::string write_nccl_topology(const Node& node, const sysfs::Root* sysfs = nullptr);

// Parses with NCCL's parser rules and checks the content NCCL interprets (bus ids, classes, link
// speed strings). Throws TopologyError "<source>:<line>: <problem>".
NcclXmlElement parse_nccl_topology(std::string_view text, const std::string& source);

// Problems (empty when none) with how a parsed NCCL topology represents the node: every GPU and
// RDMA NIC present once, and each GPU's rail NICs at the same path class as in the source.
std::vector<std::string> check_nccl_pairing(const Node& node, const NcclXmlElement& system);

}  // namespace astral::topo
