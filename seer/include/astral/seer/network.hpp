#pragma once
// Seer's collective cost model on a cluster network. A Network is a small description of what a
// collective sees: hosts with an NVLink domain, one or more NICs (rails) per host, and switch tiers
// above them (how many hosts each tier spans, whether its switches serve one rail, how much it is
// oversubscribed). It is built from the hardware profile (a uniform non-blocking fabric), from its
// own JSON form, or from topo's fabric model; the cost model never looks at individual links.
//
// Costs follow NCCL's own structure (latency = base + steps x hop latency, bandwidth = the
// bottleneck of NVLink and the rail NICs) with the α-β algorithm costs of Thakur et al. for the
// bandwidth terms, composed hierarchically and same-rail aware (performance-models.md §3, §4).
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "astral/seer/spec.hpp"
#include "astral/topo/fabric.hpp"

namespace astral::seer {

struct EcmpTable;  // ecmp_table.hpp

enum class Collective : std::uint8_t {
  kBroadcast = 0,  // ncclFunc_t order, so the tuner can index with NCCL's values
  kReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
  kAllToAll = 5,
  kSendRecv = 6,
};
const char* to_string(Collective c);

// NCCL's algorithm and protocol indices (nccl_tuner.h).
enum class Algorithm : std::uint8_t {
  kTree = 0, kRing = 1, kCollNetDirect = 2, kCollNetChain = 3, kNvls = 4, kNvlsTree = 5, kPat = 6
};
enum class Protocol : std::uint8_t { kLL = 0, kLL128 = 1, kSimple = 2 };
inline constexpr int kAlgorithms = 7;
inline constexpr int kProtocols = 3;
const char* to_string(Algorithm a);
const char* to_string(Protocol p);

// One switch tier above the hosts, leaf first.
struct Tier {
  std::string name;
  int hosts = 0;                // hosts reachable below one switch group of this tier (per rail)
  bool rail_local = true;       // its switches serve a single rail (rail leaf, same-rail spine)
  double oversubscription = 1;  // down:up capacity of this tier's switches (>= 1)
  double hop_latency = 0.6e-6;  // one switch traversal, s
  double ecmp_efficiency = 1;   // goodput of hashed flows on its uplinks (perf-models §9)
};

// Where the members of a communicator sit: `ranks` GPUs, `per_host` of them on each host, hosts
// `host_stride` apart in placement order. Megatron's rank order makes this exact for TP/DP/PP/EP.
struct Group {
  int ranks = 1;
  int per_host = 1;
  int host_stride = 1;
  int hosts() const { return ranks / per_host; }
};

// A group of `size` ranks whose members are `stride` apart in the global rank order.
Group group_of(int size, int stride, int gpus_per_host);

struct Network {
  std::string name = "uniform";
  int hosts = 1;
  int gpus_per_host = 8;
  double nvlink_bandwidth = 0;  // per GPU and direction, bytes/s
  double nvlink_latency = 0;    // s per NVLink step
  bool nvls = false;
  int rails = 8;                // NICs per host, one rail each
  double nic_bandwidth = 0;     // per NIC and direction, bytes/s
  double net_latency = 0;       // s per network step (NIC to NIC, before switch hops)
  bool pxn = true;              // cross-rail traffic moved to the peer's rail over NVLink first
  std::vector<Tier> tiers;      // leaf first; the last spans all hosts
  // The flow simulator's ECMP-efficiency table for this fabric (`astral fabric ecmp-table`), or
  // null. Where it has the collective's pattern, a group spanning hosts gets the simulated
  // efficiency of the nearest group (hosts, QPs) instead of the tiers' ecmp_efficiency and
  // oversubscription, which that simulation already contains.
  std::shared_ptr<const EcmpTable> ecmp_table;
  int ecmp_qps = 1;             // QPs per connection, for the table lookup
  double nvlink_efficiency = 0.775;
  double nvls_efficiency = 0.6;
  double net_efficiency = 0.92;

  // Network bandwidth available to one GPU (its share of the host's NICs), bytes/s.
  double nic_bandwidth_per_gpu() const;
  // The first tier that spans `span_hosts` consecutive hosts; cross_rail forces a tier whose
  // switches join rails. Returns tiers.size() when nothing spans them (treated as the top tier).
  int tier_for(int span_hosts, bool cross_rail) const;
};

// A uniform non-blocking fabric for `gpus` GPUs of this hardware: one rail-local leaf tier of 32
// hosts and a spine joining rails, both 1:1.
Network uniform_network(const HardwareSpec& hw, int gpus);
// Network JSON (docs/seer.md, "network"); hardware fills what the file leaves out.
Network network_from_json(const nlohmann::json& j, const HardwareSpec& hw);
// From topo's fabric model (`astral fabric generate`, docs/fabric.md): tiers with the hosts one
// switch reaches, whether it serves one rail, and its oversubscription; NIC and NVLink speeds from
// the first host's profile, latencies and efficiencies from the hardware.
Network network_from_fabric(const topo::Fabric& fabric, const HardwareSpec& hw);
nlohmann::json to_json(const Network& n);

// NCCL's latency constants in µs, laid out as the tuner v5 interface hands them over
// (ncclTunerConstants_v5_t): base latency per [algorithm][protocol] and per-step hardware latency
// per [link][algorithm][protocol] with links NVLink 0, PCI 1, network 2.
inline constexpr int kHwLinks = 3;
struct LatencyConstants {
  double base[kAlgorithms][kProtocols];
  double hw[kHwLinks][kAlgorithms][kProtocols];
  // NCCL's tuning.cc values (performance-models.md §4.1) for tree and ring; NVLS and PAT are
  // Seer's estimates. The tuner replaces all of them with the running NCCL's constants.
  static LatencyConstants defaults();
};

// The cost of one collective for every algorithm and protocol, in seconds; negative where the
// model has no opinion (algorithm not applicable). Same layout as NCCL's cost table.
using CostTable = std::array<std::array<double, kProtocols>, kAlgorithms>;

struct CollectiveCost {
  double seconds = 0;
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
};

// Precomputed per-communicator constants, so a cost query is a handful of multiply-adds (the
// tuner calls it for every collective).
class CollectiveModel {
 public:
  // `nccl`: NCCL's own latency constants (tuner init); without them the defaults are scaled so
  // that a ring/Simple step costs the network's nvlink_latency and net_latency.
  CollectiveModel(const Network& net, const Group& group, const LatencyConstants* nccl = nullptr);
  // `bytes`: NCCL's convention: the whole buffer for AllReduce/Broadcast/Reduce, the gathered
  // (total) size for AllGather/ReduceScatter, what each rank sends in total for AllToAll, the
  // message for SendRecv.
  void cost_table(Collective c, double bytes, CostTable& out) const;
  CollectiveCost best(Collective c, double bytes) const;
  const Group& group() const { return group_; }
  int hosts() const { return hosts_; }
  // Whether the group's network bandwidths came from the network's ECMP-efficiency table.
  bool uses_ecmp_table() const { return ecmp_from_table_; }

 private:
  Group group_;
  int hosts_ = 1;
  bool nvls_ = false;
  double bw_nvl_ = 0;       // bus bandwidth inside a host
  double bw_nvls_ = 0;      // NVLS algorithm bandwidth
  double bw_net_ = 0;       // bus bandwidth across hosts (the group's rails on one host)
  double bw_net_xrail_ = 0; // per-GPU bandwidth for traffic that must change rails in the fabric
  double bw_gpu_net_ = 0;   // one GPU's NIC share, after tier effects
  double bw_a2a_ = 0;       // per-GPU bandwidth of the all-to-all's cross-host part
  double hops_ = 0;          // switch traversals of one network step, s
  double hops_xrail_ = 0;
  double base_[kAlgorithms][kProtocols] = {};  // s
  double nvl_[kAlgorithms][kProtocols] = {};   // s per NVLink step
  double net_[kAlgorithms][kProtocols] = {};   // s per network step, before switch hops
  bool pxn_ = true;
  bool ecmp_from_table_ = false;  // the bandwidths above came from net.ecmp_table
};

// Convenience: best time of one collective of `bytes` on `group`.
double collective_time(const Network& net, const Group& group, Collective c, double bytes);

}  // namespace astral::seer
