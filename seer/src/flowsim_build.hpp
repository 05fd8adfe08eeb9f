#pragma once
// Turns demands (GPU -> GPU bytes) into connections and QP subflows on the fabric, the way NCCL
// does: intra-host bytes over NVLink; inter-host bytes over the GPU's NIC, or with PXN over NVLink
// to the source host's GPU on the destination's rail and then one shared connection per (NIC,
// destination GPU) for all local senders. Per-resource loads are accumulated as subflows are
// routed; subflows themselves are kept only in store mode.
#include <astral/seer/flowsim.hpp>

#include "flowsim_traffic.hpp"
#include <astral/seer/flowsim_maxmin.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <cstdint>
#include <limits>
#include <vector>

namespace astral::seer::detail {

// Per-resource accumulators, 16 bytes so that adding a subflow touches one cache line per
// resource (10^8 subflows at 16K GPUs): bytes, subflow count, and the size all its subflows share
// (NaN once two differ, i.e. the resource is not uniform).
struct ResourceLoad {
  double bytes = 0;
  std::uint32_t subflows = 0;
  float subflow_size = 0;
  bool uniform() const { return subflow_size == subflow_size; }
};

struct ResourceLoads {
  std::vector<ResourceLoad> at;

  explicit ResourceLoads(size_t n) : at(n) {}
  // `count` subflows of `subflow_bytes` each on resource r.
  void add_many(int r, std::uint32_t count, double subflow_bytes) {
    ResourceLoad& c = at[r];
    const float size = float(subflow_bytes);
    c.bytes += subflow_bytes * count;
    if (c.subflows == 0)
      c.subflow_size = size;
    else if (c.subflow_size != size)
      c.subflow_size = std::numeric_limits<float>::quiet_NaN();
    c.subflows += count;
  }
  void add(std::span<const int> path, double subflow_bytes) {
    const float size = float(subflow_bytes);
    for (int r : path) {
      ResourceLoad& c = at[r];
      c.bytes += subflow_bytes;
      if (c.subflows++ == 0)
        c.subflow_size = size;
      else if (c.subflow_size != size)
        c.subflow_size = std::numeric_limits<float>::quiet_NaN();
    }
  }
};

struct Connection {
  int job = 0;
  bool network = true;  // false: NVLink inside a host
  double bytes = 0;
  std::uint32_t first_flow = 0, flow_count = 0;  // store mode only
  int src_nic = -1, dst_nic = -1;  // global NIC ids (network connections), for endpoint shares
};

class TrafficBuilder final : public DemandSink {
 public:
  enum class Pass { kLoads, kUpperBound };

  TrafficBuilder(const topo::Router& router, const topo::PathSelector& selector,
                 const FlowSimOptions& options, bool store, std::uint64_t salt);

  // Demands of one job, in the order of for_each_demand.
  void begin_job(int job);
  void demand(int src_gpu, int dst_gpu, double bytes) override;
  void host_demand(int src_host, int dst_gpu, double bytes) override;
  void end_job();

  // Second streaming pass: with loads from the first, accumulates max over subflows of
  // bytes x subflows(r) / capacity(r) on its busiest resource (the completion upper bound).
  void set_upper_bound_pass(const ResourceLoads& first_pass, std::span<const double> capacity);
  double upper_bound_s() const { return upper_bound_s_; }

  const ResourceLoads& loads() const { return loads_; }
  const FlowSet& flows() const { return flows_; }
  const std::vector<double>& flow_bytes() const { return flow_bytes_; }
  const std::vector<Connection>& connections() const { return connections_; }
  size_t connection_count() const { return connection_count_; }
  size_t subflow_count() const { return subflow_count_; }
  size_t unroutable() const { return unroutable_; }
  int global_nic(int host, int nic) const { return nic_base_[host] + nic; }
  int nic_count() const { return nic_base_.back(); }
  double nic_gbps(int global_nic) const { return nic_gbps_[global_nic]; }

  // Endpoint demand per GPU (bytes sent/received over the network and over NVLink), for the ideal.
  std::vector<double> net_tx, net_rx, nv_tx, nv_rx;

  // For the class engine (flowsim_classes.cpp), which fills the same accumulators by class:
  const topo::Router& router() const { return router_; }
  const topo::PathSelector& selector() const { return selector_; }
  std::uint64_t salt() const { return salt_; }
  ResourceLoads& loads_to_update() { return loads_; }
  void add_nvlink_bytes(int src_gpu, int dst_local, double bytes) { add_nvlink(src_gpu, dst_local, bytes); }
  // One connection routed QP by QP exactly as demand() would (the fallback for irregular ones).
  void exact_connection(int src_host, int src_nic, int dst_host, int dst_nic, double bytes,
                        std::uint64_t key) {
    network_connection(src_host, src_nic, dst_host, dst_nic, bytes, key);
  }
  void count_routed(size_t connections, size_t subflows, size_t unroutable) {
    connection_count_ += connections;
    subflow_count_ += subflows;
    unroutable_ += unroutable;
  }

 private:
  void add_nvlink(int src_gpu, int dst_local, double bytes);
  void flush_pxn();
  void pxn_bytes(int host, int nic, int dst, double bytes);
  void network_connection(int src_host, int src_nic, int dst_host, int dst_nic, double bytes,
                          std::uint64_t key);
  void nvlink_connection(int src_gpu, int dst_gpu, double bytes);
  void add_subflow(std::span<const int> path, double bytes);

  const topo::Router& router_;
  const topo::Fabric& fabric_;
  const topo::PathSelector& selector_;
  const FlowSimOptions& options_;
  bool store_;
  std::uint64_t salt_;
  int job_ = 0;
  ResourceLoads loads_;
  FlowSet flows_;
  std::vector<double> flow_bytes_;
  std::vector<Connection> connections_;
  size_t connection_count_ = 0, subflow_count_ = 0, unroutable_ = 0;
  std::vector<int> nic_base_;
  std::vector<double> nic_gbps_;
  // Per global GPU: host, local index, NIC and rail (-1 without a NIC); per profile and rail: the
  // local GPU and NIC on that rail (the PXN proxy). Hot-loop lookups for 10^8 demands.
  struct GpuInfo {
    int host, local, nic, rail;
  };
  std::vector<GpuInfo> gpu_;
  std::vector<std::vector<int>> rail_gpu_, rail_nic_;

  // Aggregation: NVLink bytes per (GPU, local destination) until the end of the job; the PXN
  // connection being filled (consecutive demands to one destination from one NIC).
  int max_gpus_per_host_ = 1;
  std::vector<double> nvlink_bytes_;
  std::vector<char> nvlink_touched_;
  int pxn_host_ = -1, pxn_nic_ = -1, pxn_dst_ = -1;
  double pxn_bytes_ = 0;

  // Upper-bound pass.
  const ResourceLoads* first_pass_ = nullptr;
  std::span<const double> capacity_;
  double upper_bound_s_ = 0;
  std::vector<int> path_;
  std::vector<size_t> qp_end_;
};

}  // namespace astral::seer::detail
