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
  gpu_.resize(gpus);
  for (size_t x = 0; x < gpus; ++x) {
    topo::GpuRef g = fabric_.gpu(int(x));
    gpu_[x] = {g.host, g.gpu, fabric_.nic_of_gpu(g.host, g.gpu), fabric_.rail_of_gpu(g.host, g.gpu)};
  }
  for (const auto& profile : fabric_.profiles()) {
    std::vector<int> gpu(fabric_.rails(), -1), nic(fabric_.rails(), -1);
    for (size_t n = profile.nics.size(); n-- > 0;) {  // the first NIC of a rail wins
      nic[profile.nics[n].rail] = int(n);
      gpu[profile.nics[n].rail] = profile.nics[n].gpus.empty() ? -1 : profile.nics[n].gpus.front();
    }
    rail_gpu_.push_back(std::move(gpu));
    rail_nic_.push_back(std::move(nic));
  }
  for (const auto& profile : fabric_.profiles()) max_gpus_per_host_ = std::max(max_gpus_per_host_, profile.gpus);
  nvlink_bytes_.assign(gpus * max_gpus_per_host_, 0.0);
  nvlink_touched_.assign(gpus, 0);
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

void TrafficBuilder::begin_job(int job) { job_ = job; }

void TrafficBuilder::end_job() {
  flush_pxn();
  // NVLink transfers: one per (source GPU, destination GPU) of a host, direct and PXN legs together.
  for (size_t x = 0; x < gpu_.size(); ++x) {
    if (!nvlink_touched_[x]) continue;
    nvlink_touched_[x] = 0;
    const int first = fabric_.first_gpu(gpu_[x].host);
    for (int k = 0; k < max_gpus_per_host_; ++k) {
      double& bytes = nvlink_bytes_[x * max_gpus_per_host_ + k];
      if (bytes > 0 && first + k != int(x)) nvlink_connection(int(x), first + k, bytes);
      bytes = 0;
    }
  }
}

void TrafficBuilder::add_nvlink(int src, int dst_local, double bytes) {
  nvlink_bytes_[size_t(src) * max_gpus_per_host_ + dst_local] += bytes;
  nvlink_touched_[src] = 1;
}

void TrafficBuilder::demand(int src, int dst, double bytes) {
  const GpuInfo& s = gpu_[src];
  const GpuInfo& d = gpu_[dst];
  if (s.host == d.host) {
    nv_tx[src] += bytes;
    nv_rx[dst] += bytes;
    add_nvlink(src, d.local, bytes);
    return;
  }
  net_tx[src] += bytes;
  net_rx[dst] += bytes;
  if (options_.routing.pxn && d.nic >= 0) {
    // PXN: the source host's NIC on the destination's rail carries one shared connection to dst
    // for every local sender; senders on other rails first cross NVLink to that NIC's GPU.
    const int profile = fabric_.hosts()[s.host].profile;
    const int proxy = rail_gpu_[profile][d.rail];
    if (proxy >= 0) {
      if (s.rail != d.rail) add_nvlink(src, proxy, bytes);
      pxn_bytes(s.host, rail_nic_[profile][d.rail], dst, bytes);
      return;
    }
  }
  if (s.nic < 0 || d.nic < 0) {
    ++unroutable_;
    return;
  }
  std::uint64_t key =
      topo::mix64((std::uint64_t(std::uint32_t(src)) << 32 | std::uint32_t(dst)) ^ salt_);
  network_connection(s.host, s.nic, d.host, d.nic, bytes, key);
}

void TrafficBuilder::host_demand(int src_host, int dst, double bytes) {
  const GpuInfo& d = gpu_[dst];
  const int first = fabric_.first_gpu(src_host);
  const int count = fabric_.profile_of(src_host).gpus;
  const int profile = fabric_.hosts()[src_host].profile;
  const int proxy = d.rail >= 0 ? rail_gpu_[profile][d.rail] : -1;
  if (d.host == src_host || !options_.routing.pxn || d.nic < 0 || proxy < 0) {
    for (int x = first; x < first + count; ++x)
      if (x != dst) demand(x, dst, bytes);
    return;
  }
  // PXN fast path: one shared connection from the proxy's NIC, NVLink legs from the others.
  for (int x = first; x < first + count; ++x) {
    net_tx[x] += bytes;
    if (gpu_[x].rail != d.rail) add_nvlink(x, proxy, bytes);
  }
  net_rx[dst] += bytes * count;
  pxn_bytes(src_host, rail_nic_[profile][d.rail], dst, bytes * count);
}

void TrafficBuilder::pxn_bytes(int host, int nic, int dst, double bytes) {
  if (host != pxn_host_ || nic != pxn_nic_ || dst != pxn_dst_) {
    flush_pxn();
    pxn_host_ = host;
    pxn_nic_ = nic;
    pxn_dst_ = dst;
  }
  pxn_bytes_ += bytes;
}

void TrafficBuilder::flush_pxn() {
  if (pxn_dst_ < 0) return;
  std::uint64_t nic_id = 0x80000000u | std::uint32_t(global_nic(pxn_host_, pxn_nic_));
  std::uint64_t key = topo::mix64((nic_id << 32 | std::uint32_t(pxn_dst_)) ^ salt_);
  network_connection(pxn_host_, pxn_nic_, gpu_[pxn_dst_].host, gpu_[pxn_dst_].nic, pxn_bytes_, key);
  pxn_dst_ = pxn_nic_ = pxn_host_ = -1;
  pxn_bytes_ = 0;
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
  // NCCL opens QPS_PER_CONNECTION QPs per fused port (vNIC), round-robin over the ports.
  int qps = std::max(1, options_.qps) *
            std::min(router_.nic_ports(src_host, src_nic), router_.nic_ports(dst_host, dst_nic));
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
      if (capacity_[r] > 0) busiest = std::max(busiest, first_pass_->at[r].subflows / capacity_[r]);
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
