#pragma once
// The node audit: checks T1..T23 of topology-formats.md §5.3 on a node model plus, where given, a
// sysfs root. A check without its data source says `skipped` and why; nothing passes silently.
// Without a profile, expectations are inferred from the node's own symmetry and outliers flagged.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "astral/topo/node.hpp"
#include "astral/topo/sysfs.hpp"

namespace astral::topo {

// What a node should have (JSON; documented in topo/profiles/README.md). Unset = not checked
// against the profile (symmetry still applies).
struct Profile {
  std::string name;
  std::string description;
  std::optional<int> gpu_count;
  std::vector<std::string> gpu_device_ids;  // "10de:2330"; any listed id is fine
  std::optional<PcieLink> gpu_link;
  std::optional<int> nvswitch_count;
  std::optional<PcieLink> nvswitch_link;
  std::optional<int> rdma_nic_count;
  std::optional<PcieLink> nic_link;
  std::optional<double> port_rate_gbps;
  std::string min_firmware;  // dotted version; empty = only uniformity is checked
  int gpus_per_rail = 1;     // "gpu_nic_ratio": "1:1", "1:4", "2:1"
  int nics_per_rail = 1;
  PathClass worst_rail_path = PathClass::PIX;
  std::string acs = "off";                                  // off | on | any
  std::vector<std::string> iommu_modes = {"off", "passthrough"};
  bool gpudirect_required = true;
};

// Throws TopologyError naming the file and the offending field.
Profile load_profile(const std::string& path);
// A bundled profile by name (topo/profiles/<name>.json), else a file path.
Profile load_profile_by_name_or_path(const std::string& name_or_path);
std::vector<std::string> builtin_profile_names();
Profile parse_profile(const nlohmann::json& j, const std::string& source);

enum class CheckStatus { kPass, kWarn, kFail, kSkipped };
std::string_view to_string(CheckStatus s);

struct CheckResult {
  std::string id;    // "T4"
  std::string name;  // "Rail alignment"
  CheckStatus status = CheckStatus::kSkipped;
  std::string detail;                 // one line
  std::vector<std::string> findings;  // one line per offending device
};

struct AuditOptions {
  std::optional<Profile> profile;
  std::optional<sysfs::Root> sysfs;  // unset: static checks only (auditing an XML file)
};

struct AuditReport {
  Node node;
  std::vector<CheckResult> checks;
  std::string nccl_topology;  // the XML T23 validated
  std::vector<sysfs::IbDevice> ib_devices;  // port details when a sysfs root was given
  std::vector<PcieLink> gpu_links;          // current link per GPU (sysfs, else hwloc's figure)

  bool failed() const;
  nlohmann::json to_json() const;
  std::string to_text() const;  // the GPU -> rail table, then the findings
};

AuditReport run_audit(Node node, const AuditOptions& options);

}  // namespace astral::topo
