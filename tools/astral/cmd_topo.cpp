// astral topo: the node audit and the NCCL topology file (library: topo/).
#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "astral/topo/audit.hpp"
#include "astral/topo/nccl_xml.hpp"
#include "command.hpp"

namespace {

using namespace astral;

struct AuditArgs {
  std::string hwloc_xml, sysfs_root, profile, nccl_topo_out;
  bool json = false;
};

int run_audit(const AuditArgs& a) {
  topo::AuditOptions options;
  topo::Node node;
  try {
    if (!a.profile.empty()) options.profile = topo::load_profile_by_name_or_path(a.profile);
    if (!a.sysfs_root.empty()) {
      options.sysfs.emplace(a.sysfs_root);
      if (!options.sysfs->has_sys())
        throw cli::UsageError(fmt::format("{}: no sys/ tree here (expected a root with sys/, or a copy of /sys)",
                                          a.sysfs_root));
    }
    if (!a.hwloc_xml.empty()) {
      node = topo::load_hwloc_xml(a.hwloc_xml);
    } else {
      node = topo::discover_live();
      if (!options.sysfs) options.sysfs.emplace("/");  // a live audit reads this host's sysfs
    }
  } catch (const topo::TopologyError& e) {
    throw cli::UsageError(e.what());
  }
  auto report = topo::run_audit(std::move(node), options);
  if (!a.nccl_topo_out.empty()) {
    if (report.nccl_topology.empty()) {
      std::fprintf(stderr, "astral: no GPUs on %s: no NCCL topology written to %s\n", report.node.hostname.c_str(),
                   a.nccl_topo_out.c_str());
    } else {
      std::ofstream out(a.nccl_topo_out);
      if (!(out << report.nccl_topology))
        throw cli::UsageError(fmt::format("{}: cannot write the NCCL topology", a.nccl_topo_out));
      std::fprintf(stderr, "astral: NCCL topology written to %s (use NCCL_TOPO_FILE=%s)\n", a.nccl_topo_out.c_str(),
                   a.nccl_topo_out.c_str());
    }
  }
  std::cout << (a.json ? report.to_json().dump(2) + "\n" : report.to_text());
  return report.failed() ? cli::kChecksFailed : cli::kOk;
}

void register_topo(CLI::App& root, cli::Outcome& outcome) {
  auto* topo = root.add_subcommand("topo", "Node topology: audit GPUs, NICs, rails and PCIe links");
  topo->require_subcommand(1);

  static AuditArgs args;
  auto* audit = topo->add_subcommand(
      "audit", "Audit this node (or an hwloc XML): GPU/NIC rails, NUMA, link training, ACS, IOMMU, GPUDirect, IB ports");
  audit->add_option("--hwloc-xml", args.hwloc_xml, "Audit this hwloc 2.x XML export instead of the live system")
      ->check(CLI::ExistingFile);
  audit->add_option("--sysfs-root", args.sysfs_root,
                    "Read sysfs under DIR (a root with sys/ and proc/, or a copy of /sys); default / when live");
  audit->add_option("--profile", args.profile, "Expected node: a bundled profile name or a JSON file");
  audit->add_option("--nccl-topo-out", args.nccl_topo_out, "Write the NCCL topology XML (NCCL_TOPO_FILE) here");
  audit->add_flag("--json", args.json, "JSON output");
  audit->callback([&outcome] { outcome.exit_code = run_audit(args); });

  auto* profiles = topo->add_subcommand("profiles", "List the bundled node profiles");
  profiles->callback([] {
    for (const auto& name : topo::builtin_profile_names()) {
      auto p = topo::load_profile_by_name_or_path(name);
      std::cout << fmt::format("{:<18} {}\n", name, p.description);
    }
  });
}

}  // namespace

ASTRAL_COMMAND(topo, register_topo);
