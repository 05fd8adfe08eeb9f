// simulate(): faults, placement, traffic, routing, then completion by the cheapest exact method.
#include "astral/seer/flowsim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>

#include "flowsim_build.hpp"
#include "flowsim_classes.hpp"
#include "flowsim_traffic.hpp"

namespace astral::seer {
namespace {

using detail::Job;
using detail::ResourceLoads;
using detail::TrafficBuilder;

constexpr double kBytesPerGbit = 1e9 / 8;

const char* tier_name(int tier) {
  static const char* names[] = {"host", "leaf", "spine", "core"};
  return tier >= 0 && tier <= 3 ? names[tier] : "?";
}

void check_options(const topo::Fabric& f, const FlowSimOptions& o) {
  auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
  if (!(o.bytes > 0) || !std::isfinite(o.bytes)) bad("--bytes must be > 0");
  if (o.qps < 1 || o.qps > 64) bad(fmt::format("--qps {}: must be 1..64", o.qps));
  if (o.jobs < 1 || o.jobs > int(f.hosts().size()))
    bad(fmt::format("--jobs {}: must be 1..{} (one host per job at least)", o.jobs, f.hosts().size()));
  if (!(o.fill > 0) || o.fill > 1) bad("--fill must be in (0, 1]");
  if (o.trials < 1 || o.trials > 10000) bad("--trials must be 1..10000");
  if (!(o.moe_skew >= 0) || o.moe_skew > 8) bad("--skew must be in [0, 8]");
  if (o.routing.polarisation < 0 || o.routing.polarisation > 1) bad("--polarisation must be in [0, 1]");
  if (o.fail_random_links < 0) bad("--fail-random must be >= 0");
  if (!(o.event_tolerance >= 0) || o.event_tolerance > 0.5) bad("--event-tolerance must be in [0, 0.5]");
}

topo::Fabric with_faults(const topo::Fabric& in, const FlowSimOptions& o, std::vector<std::string>& notes) {
  topo::Fabric f = in;
  for (const std::string& spec : o.fail_links) {
    auto link = f.find_link(spec);
    if (!link)
      throw topo::FabricError(fmt::format("--fail '{}': no link at that port in fabric '{}' (use "
                                          "'switch:port', 'host:nic:port' or '#index')",
                                          spec, f.name()));
    f.set_link_state(*link, topo::LinkState::kDown);
    notes.push_back("link down: " + f.link_label(*link));
  }
  for (const std::string& name : o.fail_switches) {
    auto sw = f.find_switch(name);
    if (!sw)
      throw topo::FabricError(fmt::format("--fail-switch '{}': no switch named '{}' in fabric '{}'",
                                          name, name, f.name()));
    for (int link : f.switch_links(*sw)) f.set_link_state(link, topo::LinkState::kDown);
    notes.push_back(fmt::format("switch down: {} ({} links)", name, f.switch_links(*sw).size()));
  }
  if (o.fail_random_links > 0) {
    std::vector<int> candidates;
    for (size_t i = 0; i < f.links().size(); ++i)
      if (!f.links()[i].a.is_host() && f.links()[i].state == topo::LinkState::kUp)
        candidates.push_back(int(i));
    std::mt19937_64 rng(topo::mix64(o.seed ^ 0xfa11ed));
    std::shuffle(candidates.begin(), candidates.end(), rng);
    int n = std::min<int>(o.fail_random_links, int(candidates.size()));
    for (int k = 0; k < n; ++k) f.set_link_state(candidates[k], topo::LinkState::kDown);
    notes.push_back(fmt::format("{} random switch-to-switch links down", n));
  }
  return f;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = size_t(std::clamp(p * double(v.size() - 1) + 0.5, 0.0, double(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// Ideal time of one job: every NIC and NVLink port carrying its own endpoint bytes at full rate.
double ideal_time(const topo::Fabric& f, const TrafficBuilder& b, const Job& job) {
  std::map<int, std::pair<double, double>> nic;  // global nic -> (tx, rx)
  double worst = 0;
  for (int x : job.gpus) {
    topo::GpuRef g = f.gpu(x);
    int n = f.nic_of_gpu(g.host, g.gpu);
    if (n >= 0) {
      auto& [tx, rx] = nic[b.global_nic(g.host, n)];
      tx += b.net_tx[x];
      rx += b.net_rx[x];
    }
    double nv = f.profile_of(g.host).nvlink_gbps * kBytesPerGbit;
    if (nv > 0) worst = std::max({worst, b.nv_tx[x] / nv, b.nv_rx[x] / nv});
  }
  for (const auto& [id, txrx] : nic) {
    double cap = b.nic_gbps(id) * kBytesPerGbit;
    if (cap > 0) worst = std::max({worst, txrx.first / cap, txrx.second / cap});
  }
  return worst;
}

struct TrialOutcome {
  double completion = 0, upper = 0, ideal = 0;
  std::string method;
  std::optional<double> goodput_adaptive, goodput_equal;
  std::vector<JobOutcome> jobs;
  size_t connections = 0, subflows = 0, unroutable = 0;
  int events = 0;
  std::string engine = "connections";
  detail::ClassStats classes;
};

class Trial {
 public:
  Trial(const topo::Fabric& f, const topo::Router& router, const std::vector<double>& capacity,
        const FlowSimOptions& o, int index, const Progress& progress, std::vector<std::string>& notes)
      : f_(f), router_(router), capacity_(capacity), o_(o), progress_(progress), notes_(notes) {
    seed_ = topo::mix64(o.seed + 0x9e3779b97f4a7c15ULL * std::uint64_t(index + 1));
    std::mt19937_64 rng(seed_);
    jobs_ = detail::place_jobs(f, o.jobs, o.fill, o.placement, rng);
    policy_ = o.routing;
    policy_.seed = seed_;
  }

  TrialOutcome run(std::unique_ptr<ResourceLoads>& loads_out) {
    topo::PathSelector selector(router_, policy_);
    size_t estimate = 0;
    for (const Job& job : jobs_) estimate += detail::demand_count(f_, job, o_);
    int max_ports = 1;
    for (const auto& p : f_.profiles())
      for (const auto& n : p.nics) max_ports = std::max(max_ports, n.ports);
    estimate *= size_t(o_.qps) * max_ports;
    if (o_.routing.pxn && f_.gpu_count() > 0)
      estimate /= std::max(1, f_.profile_of(0).gpus);  // PXN shares one connection per NIC
    // Keep subflows only where something needs them: the t=0 goodput, or an event simulation
    // that a non-uniform pattern, several jobs or adaptive QPs will call for. A streamed pass that
    // turns out non-uniform is redone stored when the event simulation is affordable.
    bool adaptive = o_.balance == QpBalance::kAdaptive && o_.qps * max_ports > 1;
    bool likely_uniform = o_.pattern != TrafficPattern::kMoeAllToAll && jobs_.size() == 1 &&
                          !adaptive && !o_.force_event;
    bool store = estimate <= o_.goodput_limit || (estimate <= o_.event_sim_limit && !likely_uniform);
    bool classes = use_classes(store);
    if (classes) store = false;
    if (progress_)
      progress_(fmt::format("routing ~{} QP subflows ({})", estimate,
                            classes ? "by classes" : store ? "stored" : "streamed"));

    auto b = std::make_unique<TrafficBuilder>(router_, selector, o_, store, seed_);
    detail::ClassStats stats;
    const bool counted = classes && use_counting(estimate);
    if (classes)
      generate_by_classes(*b, stats, counted);
    else
      generate(*b);
    if (!store && b->subflow_count() <= o_.event_sim_limit && !uniform_loads(b->loads())) {
      b = std::make_unique<TrafficBuilder>(router_, selector, o_, true, seed_);
      generate(*b);
      store = classes = false;
    }
    TrialOutcome out = finish(*b, store, adaptive, loads_out);
    if (classes) {
      out.engine = counted ? "counted" : "classes";
      out.classes = stats;
    }
    return out;
  }

  const std::vector<Job>& jobs() const { return jobs_; }

 private:
  bool uniform_loads(const ResourceLoads& loads) const {
    for (size_t r = 0; r < capacity_.size(); ++r)
      if (loads.at[r].subflows > 0 && !loads.at[r].uniform())
        return false;
    return true;
  }

  TrialOutcome finish(const TrafficBuilder& b, bool store, bool adaptive,
                      std::unique_ptr<ResourceLoads>& loads_out) {
    TrialOutcome out;
    out.connections = b.connection_count();
    out.subflows = b.subflow_count();
    out.unroutable = b.unroutable();
    for (const Job& job : jobs_) out.ideal = std::max(out.ideal, ideal_time(f_, b, job));

    const ResourceLoads& loads = b.loads();
    bool uniform = uniform_loads(loads);
    double max_load = 0;
    for (size_t r = 0; r < capacity_.size(); ++r) {
      if (loads.at[r].subflows == 0) continue;
      max_load = std::max(max_load, capacity_[r] > 0 ? loads.at[r].bytes / capacity_[r]
                                                     : std::numeric_limits<double>::infinity());
    }
    bool event_ok = store && b.subflow_count() <= o_.event_sim_limit;
    if (adaptive && !event_ok)
      notes_.push_back("adaptive QP balance needs the event simulation, which is beyond "
                       "--event-limit here: completion assumes equal split");
    if (event_ok && (!uniform || adaptive || jobs_.size() > 1 || o_.force_event)) {
      run_events(b, adaptive, out);
    } else if (uniform) {
      out.method = "max-load";
      out.completion = out.upper = max_load;
      for (const Job& job : jobs_)
        out.jobs.push_back({int(job.hosts.size()), int(job.gpus.size()), max_load, 0, 0});
    } else {
      out.method = "bounds";
      out.completion = max_load;
      out.upper = upper_bound(b, store);
      for (const Job& job : jobs_)
        out.jobs.push_back({int(job.hosts.size()), int(job.gpus.size()), max_load, 0, 0});
    }
    for (size_t j = 0; j < jobs_.size(); ++j) {
      std::vector<int> segments;
      for (int h : jobs_[j].hosts) segments.push_back(f_.hosts()[h].segment);
      std::sort(segments.begin(), segments.end());
      out.jobs[j].segments = int(std::unique(segments.begin(), segments.end()) - segments.begin());
      out.jobs[j].ideal_s = ideal_time(f_, b, jobs_[j]);
      out.jobs[j].efficiency = out.jobs[j].completion_s > 0 ? out.jobs[j].ideal_s / out.jobs[j].completion_s : 0;
    }
    if (store && b.subflow_count() <= o_.goodput_limit) goodput(b, out);
    loads_out = std::make_unique<ResourceLoads>(b.loads());
    return out;
  }

  // Classes where they apply to every job and nothing needs stored flows (auto), or wherever they
  // apply (forced; then nothing is stored).
  bool use_classes(bool store) const {
    if (o_.engine == SimEngine::kConnections || (o_.engine == SimEngine::kAuto && store)) return false;
    std::string why;
    for (const Job& job : jobs_)
      if (!detail::classes_apply(f_, job, o_, &why)) {
        if (o_.engine == SimEngine::kClasses || o_.engine == SimEngine::kCounted)
          notes_.push_back("per-connection routing: " + why);
        return false;
      }
    return true;
  }

  // ECMP counted where asked (noting why not when it cannot be), or in auto above count_above.
  bool use_counting(size_t subflows) const {
    if (o_.engine != SimEngine::kCounted && (o_.engine != SimEngine::kAuto || subflows <= o_.count_above))
      return false;
    std::string why;
    if (detail::counting_applies(o_, &why)) return true;
    if (o_.engine == SimEngine::kCounted) notes_.push_back("ECMP hashed per QP: " + why);
    return false;
  }

  void generate_by_classes(TrafficBuilder& b, detail::ClassStats& stats, bool counted) {
    for (size_t j = 0; j < jobs_.size(); ++j) {
      b.begin_job(int(j));
      detail::route_by_classes(b, jobs_[j], o_, stats, counted);
      b.end_job();
    }
  }

  void generate(TrafficBuilder& b) {
    for (size_t j = 0; j < jobs_.size(); ++j) {
      std::mt19937_64 rng(topo::mix64(seed_ ^ (0x7a11c0ULL + j)));
      b.begin_job(int(j));
      detail::for_each_demand(f_, jobs_[j], o_, rng, b);
      b.end_job();
    }
  }

  void run_events(const TrafficBuilder& b, bool adaptive, TrialOutcome& out) {
    std::vector<Transfer> transfers;
    std::vector<int> job_of;
    for (const auto& c : b.connections()) {
      if (adaptive) {
        transfers.push_back({c.bytes, c.first_flow, c.flow_count});
        job_of.push_back(c.job);
      } else {
        for (std::uint32_t k = 0; k < c.flow_count; ++k) {
          transfers.push_back({b.flow_bytes()[c.first_flow + k], c.first_flow + k, 1});
          job_of.push_back(c.job);
        }
      }
    }
    if (progress_) progress_(fmt::format("event simulation of {} transfers", transfers.size()));
    EventSimResult sim = simulate_transfers(capacity_, b.flows(), transfers, o_.event_tolerance);
    out.method = "event";
    out.events = sim.events;
    out.completion = out.upper = sim.makespan_s;
    if (sim.stalled > 0)
      notes_.push_back(fmt::format("{} transfers never finish (a resource with no capacity)", sim.stalled));
    out.jobs.assign(jobs_.size(), {});
    for (size_t j = 0; j < jobs_.size(); ++j) {
      out.jobs[j].hosts = int(jobs_[j].hosts.size());
      out.jobs[j].gpus = int(jobs_[j].gpus.size());
    }
    for (size_t t = 0; t < transfers.size(); ++t)
      if (std::isfinite(sim.finish_s[t]))
        out.jobs[job_of[t]].completion_s = std::max(out.jobs[job_of[t]].completion_s, sim.finish_s[t]);
  }

  double upper_bound(const TrafficBuilder& b, bool store) {
    const ResourceLoads& loads = b.loads();
    if (store) {
      double worst = 0;
      for (size_t f = 0; f < b.flows().size(); ++f) {
        double busiest = 0;
        for (int r : b.flows().path(f))
          if (capacity_[r] > 0) busiest = std::max(busiest, loads.at[r].subflows / capacity_[r]);
        worst = std::max(worst, b.flow_bytes()[f] * busiest);
      }
      return worst;
    }
    if (progress_) progress_("second pass for the completion upper bound");
    topo::PathSelector selector(router_, policy_);
    TrafficBuilder replay(router_, selector, o_, false, seed_);
    replay.set_upper_bound_pass(loads, capacity_);
    generate(replay);
    return replay.upper_bound_s();
  }

  void goodput(const TrafficBuilder& b, TrialOutcome& out) {
    std::vector<double> rate = max_min_rates(capacity_, b.flows());
    std::vector<int> tx(b.nic_count(), 0), rx(b.nic_count(), 0);
    for (const auto& c : b.connections())
      if (c.network) tx[c.src_nic]++, rx[c.dst_nic]++;
    double share = 0, adaptive = 0, equal = 0;
    for (const auto& c : b.connections()) {
      if (!c.network) continue;
      double sum = 0, slowest = std::numeric_limits<double>::infinity();
      for (std::uint32_t k = 0; k < c.flow_count; ++k) {
        sum += rate[c.first_flow + k];
        slowest = std::min(slowest, rate[c.first_flow + k]);
      }
      adaptive += sum;
      equal += c.flow_count * slowest;
      share += std::min(b.nic_gbps(c.src_nic) / tx[c.src_nic], b.nic_gbps(c.dst_nic) / rx[c.dst_nic]) *
               kBytesPerGbit;
    }
    if (share > 0) {
      out.goodput_adaptive = adaptive / share;
      out.goodput_equal = equal / share;
    }
  }

  const topo::Fabric& f_;
  const topo::Router& router_;
  const std::vector<double>& capacity_;
  const FlowSimOptions& o_;
  const Progress& progress_;
  std::vector<std::string>& notes_;
  std::uint64_t seed_ = 0;
  topo::RoutingPolicy policy_;
  std::vector<Job> jobs_;
};

// Subflows the options may store (goodput or event simulation), at most.
size_t stored_subflows(const topo::Fabric& f, const FlowSimOptions& o) {
  double all_pairs = double(f.gpu_count()) * f.gpu_count() * std::max(1, o.qps);
  return size_t(std::min(all_pairs, double(std::max(o.goodput_limit, o.event_sim_limit))));
}

std::vector<LoadDistribution> distributions(const topo::Fabric& f, const topo::Router& router,
                                            const ResourceLoads& loads,
                                            const std::vector<double>& capacity, double ideal,
                                            std::map<std::string, std::vector<double>>& by_class) {
  auto tier = [&](const topo::Endpoint& e) { return e.is_host() ? 0 : f.switches()[e.sw].tier; };
  for (int r = 0; r < router.resource_count(); ++r) {
    if (capacity[r] <= 0) continue;
    double factor = ideal > 0 ? loads.at[r].bytes / capacity[r] / ideal : 0;
    if (router.is_nvlink(r)) {
      by_class["nvlink"].push_back(factor);
      continue;
    }
    const topo::Link& l = f.links()[topo::Router::link_of_resource(r)];
    bool up = topo::Router::resource_is_upward(r);
    int from = tier(up ? l.a : l.b), to = tier(up ? l.b : l.a);
    by_class[fmt::format("{}->{}", tier_name(from), tier_name(to))].push_back(factor);
  }
  std::vector<LoadDistribution> out;
  for (auto& [name, values] : by_class) {
    std::vector<double> v = values;
    LoadDistribution d;
    d.link_class = name;
    d.resources = long(v.size());
    d.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    d.max = *std::max_element(v.begin(), v.end());
    d.p50 = percentile(v, 0.5);
    d.p90 = percentile(v, 0.9);
    d.p99 = percentile(v, 0.99);
    out.push_back(d);
  }
  // Order by tier path: host->leaf, leaf->spine, ..., then nvlink.
  auto rank = [](const std::string& s) {
    static const char* order[] = {"host->leaf", "leaf->spine", "spine->core", "core->spine",
                                  "spine->leaf", "leaf->host", "nvlink"};
    for (int i = 0; i < 7; ++i)
      if (s == order[i]) return i;
    return 7;
  };
  std::stable_sort(out.begin(), out.end(), [&](const LoadDistribution& a, const LoadDistribution& b) {
    return rank(a.link_class) < rank(b.link_class);
  });
  return out;
}

}  // namespace

double estimate_memory_gib(const topo::Fabric& f, const FlowSimOptions& o) {
  double leaves = 0, switches = double(f.switches().size()), links = double(f.links().size());
  for (const auto& s : f.switches()) leaves += s.tier == 1 ? 1 : 0;
  double gpus = f.gpu_count(), resources = 2 * links + 2 * gpus;
  int per_host = 1;
  for (const auto& p : f.profiles()) per_host = std::max(per_host, p.gpus);
  double bytes = leaves * switches * 17      // Router: distance and next-hop span per (leaf, switch)
                 + 2 * (links * 48 + f.hosts().size() * 64.0 + switches * 96)  // fabric + faulted copy
                 + resources * (16 * 2 + 8 + 4 + 8)  // loads (and a copy), capacity, class hits, plot
                 + gpus * (32 + 8.0 * per_host + 2 * 100)  // endpoint demands, NVLink, class sides
                 + double(stored_subflows(f, o)) * 72;     // path, bytes, connection
  return bytes / double(1u << 30);
}

std::optional<TrafficPattern> parse_pattern(std::string_view t) {
  if (t == "alltoall" || t == "all-to-all") return TrafficPattern::kAllToAll;
  if (t == "moe" || t == "moe-alltoall") return TrafficPattern::kMoeAllToAll;
  if (t == "permutation") return TrafficPattern::kPermutation;
  if (t == "ring" || t == "ring-allreduce") return TrafficPattern::kRingAllReduce;
  if (t == "tree" || t == "tree-allreduce") return TrafficPattern::kTreeAllReduce;
  return std::nullopt;
}

const char* pattern_name(TrafficPattern p) {
  switch (p) {
    case TrafficPattern::kAllToAll:
      return "alltoall";
    case TrafficPattern::kMoeAllToAll:
      return "moe";
    case TrafficPattern::kPermutation:
      return "permutation";
    case TrafficPattern::kRingAllReduce:
      return "ring";
    case TrafficPattern::kTreeAllReduce:
      return "tree";
  }
  return "?";
}

std::optional<Placement> parse_placement(std::string_view t) {
  if (t == "packed") return Placement::kPacked;
  if (t == "fragmented") return Placement::kFragmented;
  return std::nullopt;
}

const char* placement_name(Placement p) { return p == Placement::kPacked ? "packed" : "fragmented"; }

FlowSimResult simulate(const topo::Fabric& fabric, const FlowSimOptions& o, const Progress& progress) {
  auto started = std::chrono::steady_clock::now();
  check_options(fabric, o);
  FlowSimResult res;
  res.memory_estimate_gib = estimate_memory_gib(fabric, o);
  if (res.memory_estimate_gib > o.memory_limit_gib)
    throw std::invalid_argument(fmt::format(
        "simulation of {} GPUs needs about {:.1f} GiB (routing tables, loads{}), above "
        "--memory-limit {:g} GiB: raise the limit, use fewer GPUs or lower --event-limit/--goodput-limit",
        fabric.gpu_count(), res.memory_estimate_gib,
        stored_subflows(fabric, o) > 0 ? ", stored flows" : "", o.memory_limit_gib));
  topo::Fabric f = with_faults(fabric, o, res.notes);
  topo::Router router(f);
  std::vector<double> capacity(router.resource_count());
  for (int r = 0; r < router.resource_count(); ++r)
    capacity[r] = router.resource_gbps(r) * kBytesPerGbit;

  res.fabric = f.name();
  res.pattern = pattern_name(o.pattern);
  res.routing = topo::routing_name(o.routing);
  if (o.routing.polarisation > 0) res.routing += fmt::format(" (polarisation {})", o.routing.polarisation);
  res.placement = placement_name(o.placement);
  res.balance = o.balance == QpBalance::kEqualSplit ? "equal-split" : "adaptive";
  res.jobs = o.jobs;
  res.qps = o.qps;
  res.trials = o.trials;
  res.bytes_per_gpu = o.bytes;

  std::vector<double> efficiencies, goodput_a, goodput_e;
  for (int t = 0; t < o.trials; ++t) {
    if (progress && o.trials > 1) progress(fmt::format("trial {}/{}", t + 1, o.trials));
    Trial trial(f, router, capacity, o, t, progress, res.notes);
    std::unique_ptr<ResourceLoads> loads;
    TrialOutcome out = trial.run(loads);
    double eff = out.completion > 0 && std::isfinite(out.completion) ? out.ideal / out.completion : 0;
    efficiencies.push_back(eff);
    if (out.goodput_adaptive) goodput_a.push_back(*out.goodput_adaptive);
    if (out.goodput_equal) goodput_e.push_back(*out.goodput_equal);
    if (t == 0) {
      res.method = out.method;
      res.engine = out.engine;
      res.classes = out.classes.classes;
      res.exact_connections = out.classes.exact_connections;
      res.counted_classes = out.classes.counted_classes;
      res.completion_s = out.completion;
      res.completion_upper_s = out.upper;
      res.ideal_s = out.ideal;
      res.connections = out.connections;
      res.subflows = out.subflows;
      res.unroutable = out.unroutable;
      res.events = out.events;
      res.job_outcomes = out.jobs;
      for (const Job& job : trial.jobs()) {
        res.gpus += int(job.gpus.size());
        res.hosts += int(job.hosts.size());
      }
      res.loads = distributions(f, router, *loads, capacity, out.ideal, res.load_factors);
      int ranks = trial.jobs().empty() ? 0 : int(trial.jobs()[0].gpus.size());
      if (out.completion > 0 && std::isfinite(out.completion)) {
        res.algbw_gbytes_s = o.bytes / out.completion / 1e9;
        res.busbw_gbytes_s = res.algbw_gbytes_s * detail::busbw_factor(o.pattern, ranks);
      }
    }
  }
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  res.efficiency = mean(efficiencies);
  res.efficiency_min = *std::min_element(efficiencies.begin(), efficiencies.end());
  res.efficiency_max = *std::max_element(efficiencies.begin(), efficiencies.end());
  double var = 0;
  for (double e : efficiencies) var += (e - res.efficiency) * (e - res.efficiency);
  res.efficiency_stdev = efficiencies.size() > 1 ? std::sqrt(var / double(efficiencies.size() - 1)) : 0;
  if (!goodput_a.empty()) res.goodput_adaptive = mean(goodput_a);
  if (!goodput_e.empty()) res.goodput_equal_split = mean(goodput_e);
  if (res.unroutable > 0)
    res.notes.push_back(fmt::format(
        "{} connections have no path and were left out (cross-rail traffic on a fabric without a "
        "cross-rail network needs --routing same-rail; or both ports of a NIC are down)",
        res.unroutable));
  if (!res.goodput_adaptive && res.subflows > o.goodput_limit)
    res.notes.push_back("t=0 goodput skipped: more subflows than --goodput-limit");
  std::sort(res.notes.begin(), res.notes.end());
  res.notes.erase(std::unique(res.notes.begin(), res.notes.end()), res.notes.end());
  res.runtime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return res;
}

}  // namespace astral::seer
