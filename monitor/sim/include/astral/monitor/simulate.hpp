#pragma once
// Scenario generator: writes an incident bundle in the real formats of log-formats.md (NCCL,
// PyTorch of several releases, kernel via syslog/journal/dmesg, SONiC/Cumulus/Onyx switch
// syslog, BMC SEL, Flight Recorder and NCCL Inspector dumps) for a job on a given fabric, with
// one injected fault and realistic noise (benign warnings, clock skew and zones, duplicated and
// truncated lines, unrelated errors on other machines), and the ground truth beside it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/event.hpp"
#include "astral/monitor/fabric_graph.hpp"

namespace astral::monitor {

enum class FaultKind : uint8_t {
  none, nic_down, link_flap, optic_ber, gpu_xid79, gpu_ecc, gpu_straggler, pcie_aer, switch_reboot, app_desync,
  // Plant faults (sim_facility.cpp): the bundle also holds the site layout (site.json) and the
  // plant's alarms as the facility reader writes them from Redfish events.
  cooling_loss, power_capping, leak
};
std::string_view to_string(FaultKind);
std::optional<FaultKind> parse_fault_kind(std::string_view);  // "nic-down", "gpu-xid79", ...
const std::vector<FaultKind>& all_fault_kinds();

struct SimulateOptions {
  FaultKind fault = FaultKind::none;
  int ranks = 16;
  int gpus_per_host = 8;
  uint64_t seed = 1;
  bool noise = true;
  // Wall-clock start of the job (UTC us); 0: chosen from the seed.
  int64_t start_us = 0;
  // Write the fabric into the bundle (as CSV, ibnetdiscover or JSON, chosen from the seed).
  bool include_fabric = true;
};

struct GroundTruth {
  FaultKind fault = FaultKind::none;
  Component component;      // kind none for a healthy run
  int64_t fault_time_us = kUnknownTime;
  std::string description;
  std::vector<std::string> hosts;  // hosts of the job
  int ranks = 0;
  uint64_t seed = 0;
};

nlohmann::json to_json(const GroundTruth&);
GroundTruth ground_truth_from_json(const nlohmann::json&);

// Writes the bundle into `out_dir` (created; must not exist or be empty) and the ground truth to
// `<out_dir>.truth.json`. Throws std::runtime_error on bad arguments (too few hosts in the fabric,
// unwritable output).
GroundTruth simulate(const FabricGraph& fabric, const SimulateOptions& options, const std::string& out_dir);

// A rail-optimised two-tier fabric: `hosts` hosts with `rails` NICs each, one leaf per rail per
// group of `hosts_per_leaf` hosts, `spines` spines per rail. Switch port names vary by leaf
// (SONiC EthernetN, Cumulus swpN, Onyx EthA/B) so generated bundles exercise every style.
FabricGraph make_rail_fabric(int hosts, int rails = 8, int hosts_per_leaf = 16, int spines = 2);
// Fabric writers (the formats load_fabric reads).
std::string fabric_to_ibnetdiscover(const FabricGraph&);
std::string fabric_to_json(const FabricGraph&);

// Whether a diagnosed root cause names the injected fault's component.
bool matches(const RootCause& cause, const GroundTruth& truth);

}  // namespace astral::monitor
