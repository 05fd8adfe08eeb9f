// Placement of jobs on hosts and the traffic of each pattern.
#include "flowsim_traffic.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace astral::seer::detail {
namespace {

struct Demand {
  int src_host, dst, src;
  double bytes;
};

// A random host permutation with no fixed point and, when the job spans several segments, no host
// sending within its own segment (the "derangement across leaves" of the ECMP baselines).
std::vector<int> cross_segment_permutation(const topo::Fabric& f, const Job& job,
                                           std::mt19937_64& rng) {
  const auto& hosts = job.hosts;
  size_t m = hosts.size();
  std::vector<int> target(m);
  std::iota(target.begin(), target.end(), 0);
  if (m < 2) return target;
  int first_segment = f.hosts()[hosts[0]].segment;
  bool spans = std::any_of(hosts.begin(), hosts.end(),
                           [&](int h) { return f.hosts()[h].segment != first_segment; });
  auto valid = [&](size_t i, int t) {
    if (int(i) == t) return false;
    return !spans || f.hosts()[hosts[i]].segment != f.hosts()[hosts[t]].segment;
  };
  std::shuffle(target.begin(), target.end(), rng);
  for (size_t i = 0; i < m; ++i) {
    if (valid(i, target[i])) continue;
    // Swap with a random partner that leaves both valid; fall back to a scan.
    bool fixed = false;
    std::uniform_int_distribution<size_t> pick(0, m - 1);
    for (int attempt = 0; attempt < 64 && !fixed; ++attempt) {
      size_t j = pick(rng);
      if (valid(i, target[j]) && valid(j, target[i])) {
        std::swap(target[i], target[j]);
        fixed = true;
      }
    }
    for (size_t j = 0; j < m && !fixed; ++j)
      if (valid(i, target[j]) && valid(j, target[i])) {
        std::swap(target[i], target[j]);
        fixed = true;
      }
  }
  return target;
}

bool same_segment(const topo::Fabric& f, int host, int gpu) {
  return f.hosts()[host].segment == f.hosts()[f.gpu(gpu).host].segment;
}

// Sorts demands into the emission order and replays them.
void replay(const topo::Fabric& f, std::vector<Demand>& demands, DemandSink& sink) {
  for (Demand& d : demands) d.src_host = f.gpu(d.src).host;
  std::sort(demands.begin(), demands.end(), [](const Demand& a, const Demand& b) {
    return std::tie(a.src_host, a.dst, a.src) < std::tie(b.src_host, b.dst, b.src);
  });
  for (const Demand& d : demands)
    if (d.bytes > 0 && d.src != d.dst) sink.demand(d.src, d.dst, d.bytes);
}

// Intra-host NVLink hops of a collective: each GPU passes `bytes` to the next GPU of its host.
void nvlink_chain(const topo::Fabric& f, const Job& job, double bytes, std::vector<Demand>& out) {
  for (int h : job.hosts) {
    int g = f.profile_of(h).gpus;
    if (g < 2) continue;
    for (int k = 0; k < g; ++k)
      out.push_back({0, f.global_gpu(h, (k + 1) % g), f.global_gpu(h, k), bytes});
  }
}

}  // namespace

std::vector<Job> place_jobs(const topo::Fabric& f, int jobs, double fill, Placement placement,
                            std::mt19937_64& rng) {
  int total = int(f.hosts().size());
  int allocated = std::clamp(int(std::lround(fill * total)), jobs, total);
  std::vector<int> order(total);
  std::iota(order.begin(), order.end(), 0);
  if (placement == Placement::kFragmented) std::shuffle(order.begin(), order.end(), rng);
  std::vector<Job> result(jobs);
  int next = 0;
  for (int j = 0; j < jobs; ++j) {
    int size = allocated / jobs + (j < allocated % jobs ? 1 : 0);
    Job& job = result[j];
    job.hosts.assign(order.begin() + next, order.begin() + next + size);
    next += size;
    for (int h : job.hosts)
      for (int g = 0; g < f.profile_of(h).gpus; ++g) job.gpus.push_back(f.global_gpu(h, g));
  }
  return result;
}

void for_each_demand(const topo::Fabric& f, const Job& job, const FlowSimOptions& o,
                     std::mt19937_64& rng, DemandSink& sink) {
  const int n = int(job.gpus.size());
  const int m = int(job.hosts.size());
  if (n < 2) return;
  switch (o.pattern) {
    case TrafficPattern::kAllToAll: {
      double pair = o.bytes / n;
      // Blocks of source hosts against every destination: the blocks' uplinks and each
      // destination's downlinks stay in cache (this loop runs 10^8 times at 16K GPUs).
      constexpr size_t kBlock = 64;
      for (size_t b = 0; b < job.hosts.size(); b += kBlock) {
        size_t end = std::min(job.hosts.size(), b + kBlock);
        for (int dst : job.gpus)
          for (size_t i = b; i < end; ++i)
            if (!o.cross_segment_only || !same_segment(f, job.hosts[i], dst))
              sink.host_demand(job.hosts[i], dst, pair);
      }
      return;
    }
    case TrafficPattern::kMoeAllToAll: {
      // Expert popularity: Zipf over a random ranking of the job's GPUs.
      std::vector<int> rank(n);
      std::iota(rank.begin(), rank.end(), 0);
      std::shuffle(rank.begin(), rank.end(), rng);
      std::vector<double> weight(f.gpu_count(), 0.0);
      double total = 0;
      for (int i = 0; i < n; ++i) {
        double w = std::pow(double(rank[i] + 1), -o.moe_skew);
        weight[job.gpus[i]] = w;
        total += w;
      }
      for (int h : job.hosts) {
        int first = f.first_gpu(h), count = f.profile_of(h).gpus;
        for (int dst : job.gpus) {
          if (o.cross_segment_only && same_segment(f, h, dst)) continue;
          for (int src = first; src < first + count; ++src)
            if (src != dst) sink.demand(src, dst, o.bytes * weight[dst] / (total - weight[src]));
        }
      }
      return;
    }
    case TrafficPattern::kPermutation: {
      std::vector<int> target = cross_segment_permutation(f, job, rng);
      std::vector<Demand> demands;
      for (int i = 0; i < m; ++i) {
        int a = job.hosts[i], b = job.hosts[target[i]];
        if (a == b) continue;
        int g = std::min(f.profile_of(a).gpus, f.profile_of(b).gpus);
        for (int k = 0; k < g; ++k) demands.push_back({0, f.global_gpu(b, k), f.global_gpu(a, k), o.bytes});
      }
      replay(f, demands, sink);
      return;
    }
    case TrafficPattern::kRingAllReduce: {
      // One ring per rail (channel); each inter-host hop of a ring carries 2(n-1)/n of its share.
      double per_gpu = 2.0 * (n - 1) / n * o.bytes;
      std::vector<Demand> demands;
      if (m > 1)
        for (int i = 0; i < m; ++i) {
          int a = job.hosts[i], b = job.hosts[(i + 1) % m];
          int g = std::min(f.profile_of(a).gpus, f.profile_of(b).gpus);
          for (int c = 0; c < g; ++c)
            demands.push_back({0, f.global_gpu(b, c), f.global_gpu(a, c), per_gpu / g});
        }
      int g = f.profile_of(job.hosts[0]).gpus;
      nvlink_chain(f, job, m > 1 ? per_gpu * (g - 1) / g : per_gpu, demands);
      replay(f, demands, sink);
      return;
    }
    case TrafficPattern::kTreeAllReduce: {
      // NCCL's double binary tree over hosts: each tree reduces half the buffer up and
      // broadcasts it down, spread over the rails.
      std::vector<Demand> demands;
      for (int tree = 0; tree < 2; ++tree)
        for (int i = 1; i < m; ++i) {
          int child = tree == 0 ? i : m - 1 - i;
          int parent = tree == 0 ? (i - 1) / 2 : m - 1 - (i - 1) / 2;
          int a = job.hosts[child], b = job.hosts[parent];
          int g = std::min(f.profile_of(a).gpus, f.profile_of(b).gpus);
          for (int c = 0; c < g; ++c) {
            double share = o.bytes / 2 / g;
            demands.push_back({0, f.global_gpu(b, c), f.global_gpu(a, c), share});
            demands.push_back({0, f.global_gpu(a, c), f.global_gpu(b, c), share});
          }
        }
      nvlink_chain(f, job, o.bytes, demands);
      replay(f, demands, sink);
      return;
    }
  }
}

size_t demand_count(const topo::Fabric&, const Job& job, const FlowSimOptions& o) {
  size_t n = job.gpus.size();
  switch (o.pattern) {
    case TrafficPattern::kAllToAll:
    case TrafficPattern::kMoeAllToAll:
      return n * (n > 0 ? n - 1 : 0);
    case TrafficPattern::kPermutation:
      return n;
    case TrafficPattern::kRingAllReduce:
      return 2 * n;
    case TrafficPattern::kTreeAllReduce:
      return 5 * n;
  }
  return n;
}

double busbw_factor(TrafficPattern pattern, int ranks) {
  if (ranks < 2) return 1.0;
  switch (pattern) {
    case TrafficPattern::kAllToAll:
    case TrafficPattern::kMoeAllToAll:
      return double(ranks - 1) / ranks;
    case TrafficPattern::kRingAllReduce:
    case TrafficPattern::kTreeAllReduce:
      return 2.0 * (ranks - 1) / ranks;
    case TrafficPattern::kPermutation:
      return 1.0;
  }
  return 1.0;
}

}  // namespace astral::seer::detail
