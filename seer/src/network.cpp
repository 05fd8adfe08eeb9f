// Collective cost model: NCCL-shaped latency terms, α-β bandwidth terms, hierarchical and
// same-rail aware placement (performance-models.md §2–§4).
#include "astral/seer/network.hpp"

#include "astral/seer/ecmp_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "units.hpp"

namespace astral::seer {
namespace {

// Share of link bandwidth that carries payload: LL sends 8-byte lines with 4 data bytes and NCCL
// caps it further (x 1/4 of Simple across nodes in tuning.cc); LL128 uses 120 of 128 bytes.
constexpr double kProtoBandwidth[kProtocols] = {0.25, 0.92, 1.0};
constexpr double kProtoBandwidthIntra[kProtocols] = {0.5, 0.92, 1.0};

double ceil_log2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(double(n))); }

}  // namespace

LatencyConstants LatencyConstants::defaults() {
  LatencyConstants c{};
  // [algorithm][protocol]: tree, ring from NCCL's tuning.cc (perf-models §4.1).
  const double base[kAlgorithms][kProtocols] = {{4.4, 4.4, 0}, {3.6, 10.0, 8.4}, {0, 0, 0}, {0, 0, 0},
                                                {0, 0, 25}, {0, 0, 25}, {0, 0, 8.4}};
  const double nvlink[kAlgorithms][kProtocols] = {{0.52, 1.2, 28}, {0.47, 1.9, 3.4}, {0, 0, 0}, {0, 0, 0},
                                                  {0, 0, 3.4}, {0, 0, 3.4}, {0, 0, 3.4}};
  const double net[kAlgorithms][kProtocols] = {{5.0, 8.5, 50}, {2.7, 4.0, 9.6}, {0, 0, 0}, {0, 0, 0},
                                               {0, 0, 9.6}, {0, 0, 9.6}, {0, 0, 9.6}};
  for (int a = 0; a < kAlgorithms; ++a)
    for (int p = 0; p < kProtocols; ++p) {
      c.base[a][p] = base[a][p];
      c.hw[0][a][p] = nvlink[a][p];
      c.hw[1][a][p] = nvlink[a][p];  // PCI: not used by Seer's placements
      c.hw[2][a][p] = net[a][p];
    }
  return c;
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllReduce: return "allreduce";
    case Collective::kAllToAll: return "alltoall";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  static constexpr const char* names[kAlgorithms] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                     "nvls", "nvls_tree", "pat"};
  return names[static_cast<int>(a)];
}

const char* to_string(Protocol p) {
  static constexpr const char* names[kProtocols] = {"ll", "ll128", "simple"};
  return names[static_cast<int>(p)];
}

Group group_of(int size, int stride, int gpus_per_host) {
  Group g;
  g.ranks = std::max(size, 1);
  if (stride >= gpus_per_host) {
    g.per_host = 1;
    g.host_stride = std::max(stride / gpus_per_host, 1);
  } else {
    g.per_host = std::clamp(gpus_per_host / std::max(stride, 1), 1, g.ranks);
    g.host_stride = 1;
  }
  if (g.ranks % g.per_host != 0) g.per_host = 1;
  return g;
}

double Network::nic_bandwidth_per_gpu() const {
  return nic_bandwidth * rails / std::max(gpus_per_host, 1);
}

int Network::tier_for(int span_hosts, bool cross_rail) const {
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].hosts < span_hosts) continue;
    if (cross_rail && tiers[i].rail_local && rails > 1) continue;
    return static_cast<int>(i);
  }
  return static_cast<int>(tiers.size());
}

Network uniform_network(const HardwareSpec& hw, int gpus) {
  Network n;
  n.gpus_per_host = hw.gpus_per_node;
  n.hosts = std::max(1, (gpus + hw.gpus_per_node - 1) / hw.gpus_per_node);
  n.name = fmt::format("uniform non-blocking network, {} hosts", n.hosts);
  n.nvlink_bandwidth = hw.nvlink_bandwidth;
  n.nvlink_latency = hw.nvlink_latency;
  n.nvls = hw.nvls;
  n.rails = hw.nics_per_node;
  n.nic_bandwidth = hw.nic_bandwidth;
  n.net_latency = hw.net_latency;
  n.nvlink_efficiency = hw.eff.nvlink;
  n.nvls_efficiency = hw.eff.nvls;
  n.net_efficiency = hw.eff.net;
  n.tiers = {Tier{"leaf", std::min(n.hosts, 32), true, 1.0, 0.6e-6, 1.0},
             Tier{"spine", std::max(n.hosts, 32), false, 1.0, 0.6e-6, 1.0}};
  return n;
}

Network network_from_json(const nlohmann::json& j, const HardwareSpec& hw) {
  detail::Fields f(j, "network");
  Network n;
  n.name = f.string("name", "network");
  n.gpus_per_host = f.positive_int("gpus_per_host", hw.gpus_per_node);
  n.hosts = f.positive_int("hosts");
  n.nvlink_bandwidth = f.number("nvlink_gbps", hw.nvlink_bandwidth / kGB) * kGB;
  n.nvlink_latency = f.number("nvlink_latency_us", hw.nvlink_latency * 1e6) * 1e-6;
  n.nvls = f.boolean("nvls", hw.nvls);
  n.rails = f.positive_int("rails", hw.nics_per_node);
  n.nic_bandwidth = f.number("nic_gbps", hw.nic_bandwidth / kGB) * kGB;
  n.net_latency = f.number("net_latency_us", hw.net_latency * 1e6) * 1e-6;
  n.pxn = f.boolean("pxn", true);
  n.nvlink_efficiency = f.fraction("nvlink_efficiency", hw.eff.nvlink);
  n.nvls_efficiency = f.fraction("nvls_efficiency", hw.eff.nvls);
  n.net_efficiency = f.fraction("net_efficiency", hw.eff.net);
  if (n.nic_bandwidth <= 0) throw SpecError("network.nic_gbps: must be > 0");
  if (!j.contains("tiers") || !j.at("tiers").is_array() || j.at("tiers").empty())
    throw SpecError("network.tiers: missing (a list of switch tiers, leaf first)");
  int prev = 0;
  for (size_t i = 0; i < j.at("tiers").size(); ++i) {
    detail::Fields t(j.at("tiers")[i], fmt::format("network.tiers[{}]", i));
    Tier tier;
    tier.name = t.string("name", fmt::format("tier{}", i + 1));
    tier.hosts = t.positive_int("hosts");
    tier.rail_local = t.boolean("rail_local", i == 0);
    tier.oversubscription = t.number("oversubscription", 1.0, 1.0, 1e3);
    tier.hop_latency = t.number("hop_latency_us", 0.6, 0, 1e4) * 1e-6;
    tier.ecmp_efficiency = t.fraction("ecmp_efficiency", 1.0);
    if (tier.hosts < prev)
      throw SpecError(fmt::format("network.tiers[{}].hosts: {} is smaller than the tier below ({})", i,
                                  tier.hosts, prev));
    prev = tier.hosts;
    n.tiers.push_back(tier);
  }
  if (n.tiers.back().hosts < n.hosts)
    throw SpecError(fmt::format("network.tiers: the top tier spans {} hosts but network.hosts is {}",
                                n.tiers.back().hosts, n.hosts));
  return n;
}

nlohmann::json to_json(const Network& n) {
  nlohmann::json tiers = nlohmann::json::array();
  for (const auto& t : n.tiers)
    tiers.push_back({{"name", t.name}, {"hosts", t.hosts}, {"rail_local", t.rail_local},
                     {"oversubscription", t.oversubscription}, {"hop_latency_us", t.hop_latency * 1e6},
                     {"ecmp_efficiency", t.ecmp_efficiency}});
  return {{"name", n.name},
          {"hosts", n.hosts},
          {"gpus_per_host", n.gpus_per_host},
          {"nvlink_gbps", n.nvlink_bandwidth / kGB},
          {"nvlink_latency_us", n.nvlink_latency * 1e6},
          {"nvls", n.nvls},
          {"rails", n.rails},
          {"nic_gbps", n.nic_bandwidth / kGB},
          {"net_latency_us", n.net_latency * 1e6},
          {"pxn", n.pxn},
          {"nvlink_efficiency", n.nvlink_efficiency},
          {"nvls_efficiency", n.nvls_efficiency},
          {"net_efficiency", n.net_efficiency},
          {"tiers", tiers}};
}

// ---- the per-communicator model -----------------------------------------------------------------

CollectiveModel::CollectiveModel(const Network& net, const Group& group, const LatencyConstants* nccl)
    : group_(group) {
  const LatencyConstants c = nccl ? *nccl : LatencyConstants::defaults();
  // Without NCCL's constants, the network's per-step latencies (ring/Simple) set the scale.
  const double nvl_scale = nccl ? 1.0 : net.nvlink_latency / 3.4e-6;
  const double net_scale = nccl ? 1.0 : net.net_latency / 9.6e-6;
  for (int a = 0; a < kAlgorithms; ++a)
    for (int p = 0; p < kProtocols; ++p) {
      base_[a][p] = c.base[a][p] * 1e-6;
      nvl_[a][p] = c.hw[0][a][p] * 1e-6 * nvl_scale;
      net_[a][p] = c.hw[2][a][p] * 1e-6 * net_scale;
    }
  hosts_ = std::max(group.hosts(), 1);
  nvls_ = net.nvls && group.per_host > 1;
  pxn_ = net.pxn;
  bw_nvl_ = net.nvlink_bandwidth * net.nvlink_efficiency;
  bw_nvls_ = net.nvlink_bandwidth * net.nvls_efficiency;

  // Which tiers the group's traffic climbs: same-rail traffic (rings, trees, PXN-forwarded
  // all-to-all) stays below the first tier that spans the group; traffic that has to change rail
  // inside the fabric climbs to a tier whose switches join rails.
  int span = (hosts_ - 1) * std::max(group.host_stride, 1) + 1;
  auto tier_effects = [&](int top, double& bw_factor, double& latency) {
    bw_factor = 1.0;
    latency = 0;
    int n = static_cast<int>(net.tiers.size());
    for (int i = 0; i < n && i <= top; ++i) {
      const Tier& t = net.tiers[i];
      // Crossing tier i means traversing its switches up and down; leaving it upward passes its
      // (possibly oversubscribed, hashed) uplinks.
      latency += (i == top ? 1 : 2) * t.hop_latency;
      if (i < top) bw_factor = std::min(bw_factor, t.ecmp_efficiency / t.oversubscription);
    }
  };
  double rail_factor = 1, xrail_factor = 1;
  std::optional<double> a2a_factor;  // from the table
  double tier_rail_factor = 1;        // the tiers' own, for an all-to-all the table does not have
  if (hosts_ > 1) {
    tier_effects(net.tier_for(span, false), rail_factor, hops_);
    tier_effects(net.tier_for(span, true), xrail_factor, hops_xrail_);
    tier_rail_factor = rail_factor;
    if (net.ecmp_table) {
      // Rings and trees stay on their rails (the table's ring pattern); all-to-all is the
      // table's all-to-all, whichever rails it crosses. Looked up by the hosts the group spans,
      // as the table's groups are whole hosts.
      const int table_gpus = hosts_ * std::max(net.gpus_per_host, 1);
      auto ring = nearest_entry(*net.ecmp_table, "ring", table_gpus, net.ecmp_qps);
      auto a2a = nearest_entry(*net.ecmp_table, "alltoall", table_gpus, net.ecmp_qps);
      if (ring) rail_factor = ring->efficiency;
      if (a2a) a2a_factor = a2a->efficiency;
      ecmp_from_table_ = ring || a2a;
    }
  }
  double gpu_nic = net.nic_bandwidth_per_gpu() * net.net_efficiency;
  bw_gpu_net_ = gpu_nic * rail_factor;
  bw_net_xrail_ = gpu_nic * xrail_factor;
  // With a table, all-to-all takes its simulated efficiency whether or not PXN keeps it on rails.
  bw_a2a_ = a2a_factor ? gpu_nic * *a2a_factor : (net.pxn ? gpu_nic * tier_rail_factor : bw_net_xrail_);
  // A ring or tree spanning hosts leaves each host through the NICs of the group's members on it
  // (NCCL aligns its channels with rails), so the host's share is per_host NICs.
  bw_net_ = bw_gpu_net_ * group.per_host;
  if (group.per_host > 1) bw_net_ = std::min(bw_net_, bw_nvl_);
}

void CollectiveModel::cost_table(Collective c, double bytes, CostTable& out) const {
  for (auto& row : out) row.fill(-1.0);
  const int p = group_.ranks;
  if (p <= 1 || bytes <= 0) {
    if (p <= 1) out[int(Algorithm::kRing)][int(Protocol::kSimple)] = 0;
    return;
  }
  const int h = hosts_;
  const int g = group_.per_host;
  const bool multi = h > 1;
  const double bus = multi ? bw_net_ : bw_nvl_;

  // NCCL's latency shape: base + NVLink steps x NVLink latency + network steps x network latency.
  auto lat_steps = [&](int algo, int proto, int intra_steps, int inter_steps) {
    return base_[algo][proto] + intra_steps * nvl_[algo][proto] + inter_steps * (net_[algo][proto] + hops_);
  };
  constexpr int kTree = int(Algorithm::kTree), kRing = int(Algorithm::kRing);
  auto proto_bw = [&](int proto) { return multi ? kProtoBandwidth[proto] : kProtoBandwidthIntra[proto]; };

  switch (c) {
    case Collective::kAllReduce: {
      for (int pr = 0; pr < kProtocols; ++pr) {
        // Ring: reduce-scatter then all-gather around p ranks, 2(p-1) steps, 2(h-1) across hosts.
        double ring_bw = bus * proto_bw(pr);
        out[kRing][pr] = lat_steps(kRing, pr, 2 * (p - h), 2 * (h - 1)) + 2.0 * (p - 1) / p * bytes / ring_bw;
        // Tree (NCCL's double binary tree across hosts, a chain inside each): algorithm bandwidth is
        // half the bus bandwidth (x 0.9, NCCL's tree correction); latency 2((g-1) intra + log2(h) inter).
        double tree_bw = 0.9 * bus * proto_bw(pr) * 0.5;
        out[kTree][pr] = base_[kTree][pr] +
                         2.0 * ((g - 1) * nvl_[kTree][pr] + ceil_log2(h) * (net_[kTree][pr] + hops_)) +
                         bytes / tree_bw;
      }
      if (nvls_) {
        // NVLink SHARP: the switch reduces, each GPU sends and receives the buffer once inside
        // the host; across hosts NCCL pairs it with a tree (NVLS tree).
        double intra = bytes / bw_nvls_;
        if (!multi) {
          out[int(Algorithm::kNvls)][2] = base_[int(Algorithm::kNvls)][2] + nvl_[int(Algorithm::kNvls)][2] + intra;
        } else {
          double inter = 2.0 * (h - 1) / h * bytes / (bw_gpu_net_ * g);
          const int a = int(Algorithm::kNvlsTree);
          out[a][2] = base_[a][2] + nvl_[a][2] + 2 * ceil_log2(h) * (net_[a][2] + hops_) + std::max(intra, inter);
        }
      }
      break;
    }
    case Collective::kAllGather:
    case Collective::kReduceScatter: {
      for (int pr = 0; pr < kProtocols; ++pr)
        out[kRing][pr] = lat_steps(kRing, pr, p - h, h - 1) + double(p - 1) / p * bytes / (bus * proto_bw(pr));
      if (multi && g == 1)  // PAT (NCCL 2.23+): log-step algorithm for one rank per host
        out[int(Algorithm::kPat)][2] = lat_steps(int(Algorithm::kPat), 2, 0, int(ceil_log2(p))) +
                                       double(p - 1) / p * bytes / bus;
      break;
    }
    case Collective::kBroadcast:
    case Collective::kReduce: {
      for (int pr = 0; pr < kProtocols; ++pr)
        out[kRing][pr] = lat_steps(kRing, pr, p - h, h - 1) + bytes / (bus * proto_bw(pr));
      break;
    }
    case Collective::kAllToAll: {
      // Each rank sends bytes*(p-1)/p: (g-1)/p of it to host peers over NVLink, the rest across
      // hosts. With PXN the cross-host part first moves over NVLink to the GPU on the peer's rail
      // and then stays on that rail; without it, it changes rail inside the fabric.
      double intra_share = double(g - 1) / p;
      double inter_share = double(p - g) / p;
      double nvl_bytes = bytes * intra_share + (pxn_ ? bytes * inter_share * (g - 1) / g : 0.0);
      double net_bw = bw_a2a_;
      double net_lat = net_[kRing][2] + (pxn_ ? hops_ : hops_xrail_);
      double t_nvl = g > 1 ? nvl_bytes / bw_nvl_ : 0.0;
      double t_net = multi ? bytes * inter_share / net_bw : 0.0;
      out[kRing][2] = base_[kRing][2] + (multi ? net_lat : nvl_[kRing][2]) + std::max(t_nvl, t_net);
      break;
    }
    case Collective::kSendRecv: {
      double bw = multi ? bw_gpu_net_ : bw_nvl_;
      double lat = multi ? net_[kRing][2] + hops_ : nvl_[kRing][2];
      out[kRing][2] = base_[kRing][2] + lat + bytes / bw;
      break;
    }
  }
}

CollectiveCost CollectiveModel::best(Collective c, double bytes) const {
  CostTable t;
  cost_table(c, bytes, t);
  CollectiveCost best{-1, Algorithm::kRing, Protocol::kSimple};
  for (int a = 0; a < kAlgorithms; ++a)
    for (int p = 0; p < kProtocols; ++p)
      if (t[a][p] >= 0 && (best.seconds < 0 || t[a][p] < best.seconds))
        best = {t[a][p], static_cast<Algorithm>(a), static_cast<Protocol>(p)};
  if (best.seconds < 0) best.seconds = 0;
  return best;
}

double collective_time(const Network& net, const Group& group, Collective c, double bytes) {
  return CollectiveModel(net, group).best(c, bytes).seconds;
}

}  // namespace astral::seer
