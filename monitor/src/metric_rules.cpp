// The exporter metrics the monitor compares before and after a fault. Names: node_exporter's
// infiniband collector (sysfs counters of each HCA port), its netdev and ethtool collectors
// (mlx5 *_phy counters, per-priority PFC pauses), dcgm-exporter's DCGM_FI_* fields (current and
// pre-3.x spellings, ../shared/reference/facility-formats.md §2.7) and Astral's facility exporter
// (facility/src/prometheus.cpp).
#include "metric_rules.hpp"

namespace astral::monitor {

namespace {

MetricRule rise(std::string_view name, std::string_view exporter, std::vector<std::string_view> metrics,
                std::string_view what, ComponentKind component, double floor_per_min,
                Severity severity = Severity::warning) {
  MetricRule r;
  r.name = name;
  r.exporter = exporter;
  r.metrics = std::move(metrics);
  r.what = what;
  r.rule = ChangeRule::rise;
  r.component = component;
  r.unit = "/min";
  r.floor = floor_per_min;
  r.severity = severity;
  return r;
}

MetricRule level(std::string_view name, std::string_view exporter, std::vector<std::string_view> metrics,
                 std::string_view what, ComponentKind component, std::string_view unit, double abs_delta,
                 double rel_delta, int direction) {
  MetricRule r;
  r.name = name;
  r.exporter = exporter;
  r.metrics = std::move(metrics);
  r.what = what;
  r.rule = ChangeRule::level;
  r.component = component;
  r.unit = unit;
  r.abs_delta = abs_delta;
  r.rel_delta = rel_delta;
  r.direction = direction;
  return r;
}

std::vector<MetricRule> make_rules() {
  using K = ComponentKind;
  const std::string_view node = "node_exporter", dcgm = "dcgm-exporter", facility = "astral-facility";
  std::vector<MetricRule> r;
  // InfiniBand port counters (node_exporter infiniband collector).
  r.push_back(rise("ib_symbol_errors", node, {"node_infiniband_symbol_error_total"}, "symbol errors", K::nic, 1));
  r.push_back(rise("ib_link_downed", node, {"node_infiniband_link_downed_total"}, "link downed", K::nic, 0.2,
                   Severity::error));
  r.push_back(rise("ib_link_error_recovery", node, {"node_infiniband_link_error_recovery_total"},
                   "link error recoveries", K::nic, 0.2));
  r.push_back(rise("ib_port_receive_errors", node,
                   {"node_infiniband_port_receive_errors_total", "node_infiniband_port_errors_received_total"},
                   "port receive errors", K::nic, 1));
  r.push_back(rise("ib_remote_physical_errors", node,
                   {"node_infiniband_port_receive_remote_physical_errors_total"}, "remote physical errors", K::nic, 1));
  // Ethernet / RoCE (netdev and ethtool collectors; also node_exporter on SONiC and Cumulus).
  r.push_back(rise("net_receive_errors", node, {"node_network_receive_errs_total"}, "receive errors", K::nic, 1));
  r.push_back(rise("net_carrier_changes", node, {"node_network_carrier_changes_total"}, "carrier changes", K::nic,
                   0.2, Severity::error));
  r.push_back(rise("eth_symbol_errors", node, {"node_ethtool_rx_symbol_err_phy", "node_ethtool_rx_symbol_err_phy_total"},
                   "symbol errors", K::nic, 1));
  r.push_back(rise("eth_crc_errors", node, {"node_ethtool_rx_crc_errors_phy", "node_ethtool_rx_crc_errors_phy_total"},
                   "CRC errors", K::nic, 1));
  r.push_back(rise("eth_link_down", node,
                   {"node_ethtool_link_down_events_phy", "node_ethtool_link_down_events_phy_total"}, "link down events",
                   K::nic, 0.2, Severity::error));
  // PFC pauses are normal under load: only a large climb counts.
  r.push_back(rise("eth_pfc_pauses", node,
                   {"node_ethtool_rx_pause_ctrl_phy", "node_ethtool_tx_pause_ctrl_phy", "node_ethtool_rx_prio*_pause",
                    "node_ethtool_tx_prio*_pause"},
                   "PFC pause frames", K::nic, 10000));
  // GPUs (dcgm-exporter).
  {
    MetricRule x;
    x.name = "gpu_xid";
    x.exporter = dcgm;
    x.metrics = {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"};
    x.what = "last XID";
    x.rule = ChangeRule::nonzero;
    x.component = K::gpu;
    x.severity = Severity::error;
    r.push_back(x);
  }
  r.push_back(rise("gpu_ecc_dbe", dcgm, {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"},
                   "double-bit ECC errors", K::gpu, 0.01, Severity::error));
  r.push_back(rise("gpu_ecc_sbe", dcgm, {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"}, "single-bit ECC errors", K::gpu, 10));
  r.push_back(rise("gpu_pcie_replays", dcgm, {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"},
                   "PCIe replays", K::gpu, 5));
  r.push_back(level("gpu_temperature", dcgm, {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
                    "GPU temperature", K::gpu, "°C", 10, 0.12, +1));
  r.push_back(level("gpu_memory_temperature", dcgm, {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"},
                    "memory temperature", K::gpu, "°C", 10, 0.12, +1));
  r.push_back(level("gpu_sm_clock", dcgm, {"DCGM_FI_DEV_SM_CLOCK"}, "SM clock", K::gpu, "MHz", 200, 0.2, -1));
  r.push_back(level("gpu_power", dcgm, {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"}, "power",
                    K::gpu, "W", 60, 0.3, 0));
  {
    MetricRule b;
    b.name = "gpu_clock_events";
    b.exporter = dcgm;
    b.metrics = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"};
    b.what = "clock-event reasons";
    b.rule = ChangeRule::bits;
    b.component = K::gpu;
    b.ignore_bits = 0x1 | 0x2 | 0x10 | 0x100;  // idle, application clocks, sync boost, display clock
    r.push_back(b);
  }
  // Facility (Astral's exporter): alarms raised and temperatures that climb.
  {
    MetricRule a;
    a.name = "facility_alarm";
    a.exporter = facility;
    a.metrics = {"astral_facility_alarm"};
    a.what = "facility alarm";
    a.rule = ChangeRule::nonzero;
    a.component = K::none;  // from the kind label
    a.severity = Severity::error;
    r.push_back(a);
  }
  r.push_back(level("facility_temperature", facility, {"astral_facility_*_celsius"}, "temperature", K::none, "°C",
                    8, 0.1, +1));
  r.push_back(level("facility_power", facility, {"astral_facility_*_watts"}, "power", K::none, "W", 500, 0.25, 0));
  return r;
}

bool name_matches(std::string_view pattern, std::string_view metric) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == metric;
  std::string_view head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return metric.size() >= head.size() + tail.size() && metric.starts_with(head) && metric.ends_with(tail);
}

}  // namespace

const std::vector<MetricRule>& metric_rules() {
  static const std::vector<MetricRule> rules = make_rules();
  return rules;
}

const MetricRule* rule_for_metric(std::string_view metric) {
  for (const MetricRule& r : metric_rules())
    for (std::string_view m : r.metrics)
      if (name_matches(m, metric)) return &r;
  return nullptr;
}

// Counters are fetched raw and turned into rates by the monitor: rate() drops the metric name,
// and two counters of one port (rx and tx pauses) would then collide as one label set.
std::string rule_query(const MetricRule& r) {
  std::string names;
  for (std::string_view m : r.metrics) {
    if (!names.empty()) names += '|';
    for (char c : m) names += c == '*' ? std::string(".*") : std::string(1, c);
  }
  return "{__name__=~\"" + names + "\"}";
}

}  // namespace astral::monitor
