// Demands -> connections -> routed QP subflows, with NCCL's PXN aggregation.
#include "flowsim_build.hpp"

#include <algorithm>

namespace astral::seer::detail {

TrafficBuilder::TrafficBuilder(const topo::Router& router, const topo::PathSelector& selector,
                               const FlowSimOptions& options, bool store, std::uint64_t salt)
    : router_(router),
      fabric_(router.fabric()),
      selector_(selector),
      options_(options),
      store_(store),
      salt_(salt),
      loads_(size_t(router.resource_count())) {
  size_t gpus = size_t(fabric_.gpu_count());
  net_tx.assign(gpus, 0);
  net_rx.assign(gpus, 0);
  nv_tx.assign(gpus, 0);
  nv_rx.assign(gpus, 0);
  nic_base_.assign(fabric_.hosts().size() + 1, 0);
  for (size_t h = 0; h < fabric_.hosts().size(); ++h)
    nic_base_[h + 1] = nic_base_[h] + int(fabric_.profile_of(int(h)).nics.size());
  nic_gbps_.assign(nic_base_.back(), 0.0);
  for (size_t h = 0; h < fabric_.hosts().size(); ++h) {
    const auto& nics = fabric_.profile_of(int(h)).nics;
    for (size_t n = 0; n < nics.size(); ++n)
      for (int port = 1; port <= nics[n].ports; ++port)
        if (router_.port_link(int(h), int(n), port) >= 0)
          nic_gbps_[nic_base_[h] + n] += fabric_.links()[router_.port_link(int(h), int(n), port)].gbps;
  }
}

void TrafficBuilder::set_upper_bound_pass(const ResourceLoads& first_pass,
                                          std::span<const double> capacity) {
  first_pass_ = &first_pass;
  capacity_ = capacity;
  upper_bound_s_ = 0;
}

void TrafficBuilder::begin_job(int job) {
  job_ = job;
  host_ = -1;
}

void TrafficBuilder::end_job() {
  flush_pxn();
  flush_host();
}

void TrafficBuilder::demand(int src, int dst, double bytes) {
  topo::GpuRef s = fabric_.gpu(src), d = fabric_.gpu(dst);
  if (s.host != host_) {
    flush_pxn();
    flush_host();
    host_ = s.host;
    int g = fabric_.profile_of(host_).gpus;
    nvlink_matrix_.assign(size_t(g) * g, 0.0);
  }
  const int g = fabric_.profile_of(s.host).gpus;
  if (s.host == d.host) {
    nv_tx[src] += bytes;
    nv_rx[dst] += bytes;
    nvlink_matrix_[size_t(s.gpu) * g + d.gpu] += bytes;
    return;
  }
  net_tx[src] += bytes;
  net_rx[dst] += bytes;
  int dst_nic = fabric_.nic_of_gpu(d.host, d.gpu);
  int src_nic = fabric_.nic_of_gpu(s.host, s.gpu);
  if (options_.routing.pxn && dst_nic >= 0) {
    int rail = fabric_.profile_of(d.host).nics[dst_nic].rail;
    int proxy = fabric_.gpu_on_rail(s.host, rail);
    if (proxy >= 0 && (src_nic < 0 || fabric_.profile_of(s.host).nics[src_nic].rail != rail)) {
      // PXN: NVLink to the proxy, then the proxy NIC's shared connection to dst.
      nvlink_matrix_[size_t(s.gpu) * g + proxy] += bytes;
      int proxy_nic = fabric_.nic_on_rail(s.host, rail);
      if (proxy_nic != pxn_nic_ || dst != pxn_dst_) {
        flush_pxn();
        pxn_nic_ = proxy_nic;
        pxn_dst_ = dst;
      }
      pxn_bytes_ += bytes;
      return;
    }
    if (src_nic >= 0 && fabric_.profile_of(s.host).nics[src_nic].rail == rail) {
      // Already on the right rail: shares the connection with the PXN senders of this host.
      if (src_nic != pxn_nic_ || dst != pxn_dst_) {
        flush_pxn();
        pxn_nic_ = src_nic;
        pxn_dst_ = dst;
      }
      pxn_bytes_ += bytes;
      return;
    }
  }
  if (src_nic < 0 || dst_nic < 0) {
    ++unroutable_;
    return;
  }
  std::uint64_t key = topo::mix64((std::uint64_t(std::uint32_t(src)) << 32 | std::uint32_t(dst)) ^ salt_);
  network_connection(s.host, src_nic, d.host, dst_nic, bytes, key);
}

void TrafficBuilder::flush_pxn() {
  if (pxn_dst_ < 0) return;
  topo::GpuRef d = fabric_.gpu(pxn_dst_);
  std::uint64_t key = topo::mix64(((std::uint64_t(0x80000000u | std::uint32_t(host_ * 64 + pxn_nic_)))
                                   << 32 | std::uint32_t(pxn_dst_)) ^ salt_);
  network_connection(host_, pxn_nic_, d.host, fabric_.nic_of_gpu(d.host, d.gpu), pxn_bytes_, key);
  pxn_dst_ = -1;
  pxn_nic_ = -1;
  pxn_bytes_ = 0;
}

void TrafficBuilder::flush_host() {
  if (host_ < 0) return;
  int g = fabric_.profile_of(host_).gpus;
  for (int a = 0; a < g; ++a)
    for (int b = 0; b < g; ++b) {
      double bytes = nvlink_matrix_[size_t(a) * g + b];
      if (bytes > 0 && a != b)
        nvlink_connection(fabric_.global_gpu(host_, a), fabric_.global_gpu(host_, b), bytes);
    }
  host_ = -1;
}

void TrafficBuilder::nvlink_connection(int src_gpu, int dst_gpu, double bytes) {
  ++connection_count_;
  int path[2] = {router_.nvlink_out(src_gpu), router_.nvlink_in(dst_gpu)};
  Connection c;
  c.job = job_;
  c.network = false;
  c.bytes = bytes;
  c.first_flow = std::uint32_t(flows_.size());
  c.flow_count = 1;
  add_subflow(path, bytes);
  if (store_) connections_.push_back(c);
}

void TrafficBuilder::network_connection(int src_host, int src_nic, int dst_host, int dst_nic,
                                        double bytes, std::uint64_t key) {
  ++connection_count_;
  const auto& snic = fabric_.profile_of(src_host).nics[src_nic];
  const auto& dnic = fabric_.profile_of(dst_host).nics[dst_nic];
  // NCCL opens QPS_PER_CONNECTION QPs per fused port (vNIC), round-robin over the ports.
  int qps = std::max(1, options_.qps) * std::min(snic.ports, dnic.ports);
  Connection c;
  c.job = job_;
  c.bytes = bytes;
  c.first_flow = std::uint32_t(flows_.size());
  c.src_nic = global_nic(src_host, src_nic);
  c.dst_nic = global_nic(dst_host, dst_nic);
  // Route every QP first: bytes are split over the QPs that have a path.
  path_.clear();
  qp_end_.clear();
  for (int qp = 0; qp < qps; ++qp)
    if (selector_.route_nics(src_host, src_nic, dst_host, dst_nic, qp, key, path_))
      qp_end_.push_back(path_.size());
  int routed = int(qp_end_.size());
  if (routed == 0) {
    ++unroutable_;
    return;
  }
  size_t begin = 0;
  for (size_t end : qp_end_) {
    add_subflow(std::span<const int>(path_.data() + begin, end - begin), bytes / routed);
    begin = end;
  }
  c.flow_count = std::uint32_t(routed);
  if (store_) connections_.push_back(c);
}

void TrafficBuilder::add_subflow(std::span<const int> path, double bytes) {
  ++subflow_count_;
  if (first_pass_) {
    double busiest = 0;
    for (int r : path)
      if (capacity_[r] > 0) busiest = std::max(busiest, first_pass_->subflows[r] / capacity_[r]);
    upper_bound_s_ = std::max(upper_bound_s_, bytes * busiest);
    return;
  }
  loads_.add(path, bytes);
  if (store_) {
    flows_.add(path);
    flow_bytes_.push_back(bytes);
  }
}

}  // namespace astral::seer::detail
