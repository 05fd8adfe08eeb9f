// Who ran where: global ranks from NCCL init lines of the world communicator (else PyTorch,
// Flight Recorder, Inspector or RAS), their GPUs, and the NICs they send on (channel lines and
// the NET/IB device list, else the rail convention GPU i -> NIC i). Also the names the kernel
// uses for the same NICs (netdev, PCI address).
#include <algorithm>
#include <map>

#include "analysis.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {

namespace {

std::string pid_key(const std::string& host, int64_t pid) { return host + ":" + std::to_string(pid); }

bool is_job_layer(const Event& e) {
  return e.layer == Layer::nccl || e.layer == Layer::pytorch || e.layer == Layer::astral;
}

// "0=mlx5_0:1,1=mlx5_3:1" -> {0: mlx5_0, 1: mlx5_3}
std::map<int, std::string> parse_devices(std::string_view list) {
  std::map<int, std::string> out;
  while (!list.empty()) {
    std::string_view item = list.substr(0, list.find(','));
    list.remove_prefix(std::min(list.size(), item.size() + 1));
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view idx = item.substr(0, eq);
    auto v = text::take_uint(idx);
    std::string_view name = item.substr(eq + 1);
    name = name.substr(0, name.find(':'));
    name = name.substr(0, name.find('/'));
    if (v) out[int(*v)] = std::string(name);
  }
  return out;
}

}  // namespace

int JobModel::rank_of(const Event& e) const {
  if (e.layer == Layer::pytorch && e.keys.rank >= 0) return e.keys.rank;
  if (e.component.kind == ComponentKind::process && e.component.rank >= 0 && e.layer != Layer::nccl)
    return e.component.rank;
  std::string_view pid = e.attr("pid");
  if (!pid.empty() && (e.layer == Layer::nccl || e.layer == Layer::kernel)) {
    auto it = rank_of_pid.find(e.host + ":" + std::string(pid));
    if (it != rank_of_pid.end()) return it->second;
  }
  if (e.layer == Layer::nccl && e.kind.rfind("ras_", 0) == 0 && e.keys.rank >= 0) return e.keys.rank;
  if (e.layer == Layer::nccl && e.kind == "inspector_rank") return e.keys.rank;
  return -1;
}

std::string JobModel::nic_of(const Event& e) const {
  const std::string& host = e.component.host.empty() ? e.host : e.component.host;
  auto known = nics_of_host.find(host);
  auto is_known = [&](const std::string& n) {
    return known != nics_of_host.end() &&
           std::find(known->second.begin(), known->second.end(), n) != known->second.end();
  };
  std::string dev = e.component.device;
  if (!dev.empty() && (is_known(dev) || names::nic_ordinal(dev) >= 0)) return dev;
  auto alias = nic_alias.find(host);
  if (alias != nic_alias.end()) {
    for (std::string_view key : {std::string_view(dev), e.attr("netdev"), e.attr("bdf")}) {
      if (key.empty()) continue;
      auto it = alias->second.find(std::string(key));
      if (it != alias->second.end()) return it->second;
    }
  }
  // NCCL's device index ("Device 0 marked as failed", "NET/IB/2" channels): its own device list.
  if (auto idx = e.attr_int("net_dev"); idx >= 0 && e.layer == Layer::nccl) {
    for (const std::string& key : {host + ":" + std::string(e.attr("pid")), host}) {
      auto list = nic_of_index.find(key);
      if (list == nic_of_index.end()) continue;
      if (auto name = list->second.find(int(idx)); name != list->second.end()) return name->second;
    }
  }
  // NCCL errors without an HCA name: the NIC of the rank that logged them.
  if (e.layer == Layer::nccl) {
    int r = rank_of(e);
    auto it = ranks.find(r);
    if (it != ranks.end() && !it->second.nics.empty()) return it->second.nics.front();
  }
  return {};
}

std::vector<int> JobModel::ranks_on(const std::string& host) const {
  auto it = ranks_of_host.find(host);
  return it == ranks_of_host.end() ? std::vector<int>{} : it->second;
}

JobModel build_job_model(const Bundle& b) {
  JobModel job;
  // 1. The world communicator: the most ranks, then the most init lines.
  std::map<uint64_t, std::pair<int, int>> comms;  // hash -> (nranks, lines)
  for (const Event& e : b.events) {
    if (is_job_layer(e)) job.has_job_logs = true;
    if ((e.kind == "nccl_init" || e.kind == "nccl_init_start") && e.keys.comm_hash) {
      auto& c = comms[*e.keys.comm_hash];
      c.first = std::max<int>(c.first, int(e.attr_int("nranks", 0)));
      ++c.second;
    }
  }
  std::pair<int, int> best{-1, -1};
  for (auto& [hash, c] : comms)
    if (c > best) {
      best = c;
      job.world_comm = hash;
    }
  if (job.world_comm) job.world_size = best.first;
  for (const Event& e : b.events) {
    if ((e.kind != "nccl_init" && e.kind != "nccl_init_start") || e.keys.comm_hash != job.world_comm) continue;
    RankInfo& r = job.ranks[e.keys.rank];
    r.rank = e.keys.rank;
    r.host = e.host;
    r.pid = e.attr_int("pid");
    r.gpu = e.component.device;
    r.cuda_dev = int(e.attr_int("cuda_dev"));
  }
  // 2. Ranks NCCL did not describe: PyTorch, Flight Recorder, Inspector, RAS.
  int max_rank = -1;
  for (const Event& e : b.events) {
    if (e.layer != Layer::pytorch && e.kind != "inspector_rank") continue;
    int rank = e.keys.rank;
    if (rank < 0 || e.host.empty()) continue;
    max_rank = std::max(max_rank, rank);
    RankInfo& r = job.ranks[rank];
    if (r.rank < 0) {
      r.rank = rank;
      r.host = e.host;
    }
    if (r.cuda_dev < 0 && !e.attr("cuda_dev").empty() && e.kind == "pg_comm_created") r.cuda_dev = int(e.attr_int("cuda_dev"));
    if (e.kind == "inspector_rank" && job.world_size == 0) job.world_size = int(e.attr_int("n_ranks", 0));
  }
  if (job.world_size == 0) job.world_size = max_rank + 1;
  for (auto& [rank, r] : job.ranks) {
    job.ranks_of_host[r.host].push_back(rank);
    if (r.pid >= 0) job.rank_of_pid[pid_key(r.host, r.pid)] = rank;
    if (!r.gpu.empty()) job.rank_of_gpu[r.host + "|" + r.gpu] = rank;
  }
  // 3. GPUs by CUDA index from other ranks of the host (PCI order otherwise).
  for (auto& [host, ranks] : job.ranks_of_host) {
    std::map<int, std::string> by_dev;
    for (int r : ranks)
      if (!job.ranks[r].gpu.empty() && job.ranks[r].cuda_dev >= 0) by_dev[job.ranks[r].cuda_dev] = job.ranks[r].gpu;
    for (int r : ranks) {
      RankInfo& info = job.ranks[r];
      if (info.gpu.empty() && by_dev.count(info.cuda_dev)) info.gpu = by_dev[info.cuda_dev];
    }
  }
  // 4. NICs: the NET/IB device list per process, the channel lines' NET device per rank.
  std::map<std::string, std::map<int, std::string>> devices_of_pid;
  for (const Event& e : b.events) {
    if (e.kind != "nccl_net_devices") continue;
    auto devs = parse_devices(e.attr("devices"));
    devices_of_pid[pid_key(e.host, e.attr_int("pid"))] = devs;
    if (!e.attr("pid").empty()) job.nic_of_index[e.host + ":" + std::string(e.attr("pid"))] = devs;
    auto [same, fresh] = job.nic_of_index.emplace(e.host, devs);
    if (!fresh && same->second != devs) same->second.clear();  // processes disagree: no host-wide order
    auto& list = job.nics_of_host[e.host];
    for (auto& [i, name] : devs)
      if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  }
  std::map<int, std::map<std::string, int>> nic_votes;
  for (const Event& e : b.events) {
    if (e.kind != "nccl_channel") continue;
    auto rank_it = job.rank_of_pid.find(pid_key(e.host, e.attr_int("pid")));
    if (rank_it == job.rank_of_pid.end()) continue;
    auto dev_it = devices_of_pid.find(pid_key(e.host, e.attr_int("pid")));
    if (dev_it == devices_of_pid.end()) continue;
    auto name = dev_it->second.find(int(e.attr_int("net_dev")));
    if (name != dev_it->second.end()) ++nic_votes[rank_it->second][name->second];
  }
  // Fabric NICs of a host, by rail, when NCCL did not list them.
  for (const std::string& host : b.hosts) {
    std::string h = names::canonical_host(host);
    auto& list = job.nics_of_host[h];
    if (!list.empty()) continue;
    std::vector<const Cable*> cables = b.fabric.cables_of_host(h);
    std::sort(cables.begin(), cables.end(), [](const Cable* x, const Cable* y) {
      if (x->nic.rail != y->nic.rail) return x->nic.rail < y->nic.rail;
      return x->nic.nic < y->nic.nic;
    });
    for (const Cable* c : cables)
      if (std::find(list.begin(), list.end(), c->nic.nic) == list.end()) list.push_back(c->nic.nic);
    if (list.empty()) job.nics_of_host.erase(h);
  }
  for (auto& [rank, r] : job.ranks) {
    if (auto v = nic_votes.find(rank); v != nic_votes.end()) {
      std::vector<std::pair<int, std::string>> order;
      for (auto& [name, n] : v->second) order.push_back({-n, name});
      std::sort(order.begin(), order.end());
      for (auto& [n, name] : order) r.nics.push_back(name);
    } else if (auto l = job.nics_of_host.find(r.host); l != job.nics_of_host.end() && r.cuda_dev >= 0) {
      // Rail-optimised convention: local GPU i uses NIC i (spread evenly when fewer NICs).
      size_t gpus = std::max<size_t>(job.ranks_of_host[r.host].size(), 1);
      size_t n = l->second.size();
      size_t idx = n >= gpus ? size_t(r.cuda_dev) : size_t(r.cuda_dev) * n / gpus;
      if (idx < n) r.nics.push_back(l->second[idx]);
    }
    for (const auto& nic : r.nics) job.ranks_of_nic[r.host + "|" + nic].push_back(rank);
  }
  // 5. Kernel names of NICs: ibdev2netdev, else PCI order of the mlx5 functions seen.
  std::map<std::string, std::map<std::string, std::string>> netdev_bdf;  // host -> netdev -> bdf
  std::map<std::string, std::set<std::string>> bdfs;
  for (const Event& e : b.events) {
    if (e.kind == "nic_map") {
      auto& alias = job.nic_alias[e.host];
      if (!e.attr("netdev").empty()) alias[std::string(e.attr("netdev"))] = e.component.device;
      if (!e.attr("bdf").empty()) alias[std::string(e.attr("bdf"))] = e.component.device;
      continue;
    }
    if (e.layer != Layer::kernel) continue;
    std::string_view bdf = e.attr("bdf");
    if (bdf.empty()) continue;
    bdfs[e.host].insert(std::string(bdf));
    if (!e.attr("netdev").empty()) netdev_bdf[e.host][std::string(e.attr("netdev"))] = std::string(bdf);
  }
  for (auto& [host, set] : bdfs) {
    auto& alias = job.nic_alias[host];
    auto nics = job.nics_of_host.find(host);
    // mlx5_N are numbered in PCI probe order; usable when every function was seen.
    if (nics != job.nics_of_host.end() && nics->second.size() == set.size()) {
      std::vector<std::string> sorted_nics = nics->second;
      std::sort(sorted_nics.begin(), sorted_nics.end(), [](const std::string& x, const std::string& y) {
        return names::nic_ordinal(x) < names::nic_ordinal(y);
      });
      size_t i = 0;
      for (const auto& bdf : set) alias.emplace(bdf, sorted_nics[i++]);
    }
    for (auto& [netdev, bdf] : netdev_bdf[host])
      if (alias.count(bdf)) alias.emplace(netdev, alias[bdf]);
  }
  return job;
}

}  // namespace astral::monitor
