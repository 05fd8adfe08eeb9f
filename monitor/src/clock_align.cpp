// Cross-host clock alignment (log-formats.md §5.4). Each anchor group is a set of observations,
// on different machines, of what happened at one instant: the enqueue of the collective every
// rank of a group is stuck in (watchdog time minus "ran for"), the end of one collective in
// timing records (ranks leave a ring collective together), the two ends of a cable going down.
// Offsets are fitted by alternating medians (robust to stragglers and stray pairs) and reported
// relative to the median host, which is the reference clock.
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "analysis.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {

struct Observation {
  int node;
  int64_t t;
};

double median(std::vector<double>& v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

class Nodes {
 public:
  int id(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, int(names_.size()));
    if (fresh) names_.push_back(name);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, int> ids_;
  std::vector<std::string> names_;
};

bool is_down_event(const Event& e) {
  return e.kind == "nic_link_down" || e.kind == "port_down" || e.kind == "ib_port_error";
}

}  // namespace

std::map<std::string, double> estimate_clock_offsets(const Bundle& b, const JobModel& job) {
  Nodes nodes;
  std::vector<std::vector<Observation>> groups;
  std::map<std::string, std::vector<Observation>> by_key;
  // (a) stuck collectives: enqueue time = watchdog time - ran for.
  for (const Event& e : b.events) {
    if (!e.has_time() || e.time_confidence_s > 5) continue;
    if (e.kind == "watchdog_timeout" && e.keys.seq >= 0 && e.attr_int("ran_for_ms") > 0) {
      std::string key = "wd|" + e.keys.process_group + "|" + std::to_string(e.keys.seq);
      by_key[key].push_back({nodes.id(e.host), e.time_us - e.attr_int("ran_for_ms") * 1000});
    } else if (e.kind == "fr_entry" && e.keys.seq >= 0 && e.layer == Layer::pytorch) {
      std::string key = "fr|" + e.keys.process_group + "|" + std::to_string(e.keys.seq);
      by_key[key].push_back({nodes.id(e.host), e.time_us});
    }
  }
  // (b) collective ends in timing records (bounded: the newest 64 collectives per communicator).
  {
    std::map<std::pair<uint64_t, int64_t>, std::vector<Observation>> ends;
    for (const CollectiveSample& s : b.samples)
      if (s.start_us != kUnknownTime && s.duration_us >= 0 && !s.host.empty())
        ends[{s.comm_hash, s.seq}].push_back({nodes.id(s.host), s.start_us + s.duration_us});
    std::map<uint64_t, int> taken;
    for (auto it = ends.rbegin(); it != ends.rend(); ++it)
      if (taken[it->first.first]++ < 64) groups.push_back(std::move(it->second));
  }
  // (c) both ends of a cable going down.
  if (!b.fabric.empty()) {
    std::map<std::string, std::vector<const Event*>> host_side, switch_side;  // cable key -> events
    for (const Event& e : b.events) {
      if (!e.has_time() || !is_down_event(e) || e.time_confidence_s > 5) continue;
      const Cable* c = nullptr;
      if (e.layer == Layer::switch_) c = b.fabric.cable_at(e.component.switch_name, e.component.port);
      else if (std::string nic = job.nic_of(e); !nic.empty()) c = b.fabric.cable_of_nic(e.host, nic);
      if (!c) continue;
      std::string key = c->sw.switch_name + "|" + c->sw.port;
      (e.layer == Layer::switch_ ? switch_side : host_side)[key].push_back(&e);
    }
    for (auto& [key, hs] : host_side) {
      auto sw = switch_side.find(key);
      if (sw == switch_side.end()) continue;
      for (const Event* h : hs) {
        const Event* best = nullptr;
        for (const Event* s : sw->second)
          if (!best || std::llabs(s->time_us - h->time_us) < std::llabs(best->time_us - h->time_us)) best = s;
        if (best && std::llabs(best->time_us - h->time_us) < 15LL * 60 * 1000000)
          groups.push_back({{nodes.id(h->host), h->time_us}, {nodes.id(best->host), best->time_us}});
      }
    }
  }
  for (auto& [key, obs] : by_key) groups.push_back(std::move(obs));
  // Keep groups that relate at least two machines.
  std::vector<std::vector<Observation>> useful;
  for (auto& g : groups) {
    bool two = false;
    for (const auto& o : g) two = two || o.node != g.front().node;
    if (two) useful.push_back(std::move(g));
  }
  const size_t n = nodes.names().size();
  std::vector<double> offset(n, 0.0);  // microseconds
  std::vector<bool> anchored(n, false);
  for (const auto& g : useful)
    for (const auto& o : g) anchored[size_t(o.node)] = true;
  for (int iter = 0; iter < 6 && !useful.empty(); ++iter) {
    std::vector<std::vector<double>> residuals(n);
    for (const auto& g : useful) {
      std::vector<double> corrected;
      for (const auto& o : g) corrected.push_back(double(o.t) - offset[size_t(o.node)]);
      double truth = median(corrected);
      for (const auto& o : g) residuals[size_t(o.node)].push_back(double(o.t) - truth);
    }
    for (size_t i = 0; i < n; ++i)
      if (!residuals[i].empty()) offset[i] = median(residuals[i]);
    // Gauge: the median machine that runs ranks is the reference.
    std::vector<double> hosts;
    for (size_t i = 0; i < n; ++i)
      if (anchored[i] && job.is_job_host(nodes.names()[i])) hosts.push_back(offset[i]);
    if (hosts.empty())
      for (size_t i = 0; i < n; ++i)
        if (anchored[i]) hosts.push_back(offset[i]);
    double gauge = median(hosts);
    for (size_t i = 0; i < n; ++i) offset[i] -= gauge;
  }
  std::map<std::string, double> out;
  for (size_t i = 0; i < n; ++i)
    if (anchored[i]) out[nodes.names()[i]] = std::round(offset[i] / 1000.0) / 1000.0;
  return out;
}

void apply_clock_offsets(Bundle& b, const std::map<std::string, double>& offsets) {
  if (offsets.empty()) return;
  std::unordered_map<std::string, int64_t> us;
  for (auto& [host, s] : offsets) us[host] = int64_t(std::llround(s * 1e6));
  for (Event& e : b.events) {
    if (!e.has_time() || e.layer == Layer::bmc) continue;  // BMC clocks are their own
    auto it = us.find(e.host);
    if (it != us.end()) e.time_us -= it->second;
  }
  for (CollectiveSample& s : b.samples) {
    auto it = us.find(s.host);
    if (it != us.end() && s.start_us != kUnknownTime) s.start_us -= it->second;
  }
  std::stable_sort(b.events.begin(), b.events.end(), [](const Event& x, const Event& y) {
    if (x.has_time() != y.has_time()) return x.has_time();
    return x.time_us < y.time_us;
  });
}

}  // namespace astral::monitor
