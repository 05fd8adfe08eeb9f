// Uniform all-to-all by classes of connections (see flowsim_classes.hpp).
#include "flowsim_classes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <tuple>

namespace astral::seer::detail {
namespace {

constexpr std::uint64_t kQpStride = 0x9e3779b97f4a7c15ULL;  // as PathSelector::route_nics
constexpr int kMaxPorts = 4;

// One NIC port as the hot loop needs it.
struct PortInfo {
  int link = -1, leaf_sw = -1, leaf = -1, ordinal = 0;
};

// A source endpoint (a GPU, or with PXN a host's NIC) or a destination GPU.
struct Side {
  int host = 0, nic = 0, rail = 0, segment = 0;
  std::uint32_t id = 0;  // the connection key's source part, or the destination GPU
  double bytes = 0;      // source: bytes per connection
  int ports = 1;
  bool regular = true;  // every port cabled and up
  PortInfo port[kMaxPorts];
  int group_leaf() const { return port[0].leaf; }
};

class ClassRouter {
 public:
  ClassRouter(TrafficBuilder& b, const Job& job, const FlowSimOptions& o, ClassStats& stats, bool counted)
      : b_(b), router_(b.router()), f_(router_.fabric()), selector_(b.selector()), job_(job),
        o_(o), stats_(stats), hits_(size_t(router_.resource_count()), 0) {
    if (counted) counter_.emplace(router_, b.loads_to_update(), b.salt());
  }

  void run() {
    const int n = int(job_.gpus.size());
    if (n < 2) return;
    pair_ = o_.bytes / n;
    count_gpus();
    endpoint_demands();
    std::vector<Side> src = sources(), dst = destinations();
    auto by_group = [](const Side& a, const Side& c) {
      return std::tie(a.port[0].leaf, a.rail) < std::tie(c.port[0].leaf, c.rail);
    };
    std::stable_sort(src.begin(), src.end(), by_group);
    std::stable_sort(dst.begin(), dst.end(), by_group);
    auto groups = [&](const std::vector<Side>& v) {
      std::vector<size_t> start{0};
      for (size_t i = 1; i < v.size(); ++i)
        if (by_group(v[i - 1], v[i])) start.push_back(i);
      start.push_back(v.size());
      return start;
    };
    std::vector<size_t> sg = groups(src), dg = groups(dst);
    auto span_of = [](const std::vector<Side>& v, const std::vector<size_t>& g, size_t i) {
      return std::span<const Side>(v.data() + g[i], g[i + 1] - g[i]);
    };
    std::vector<GroupShape> src_shape, dst_shape;
    if (counter_) {
      for (size_t a = 0; a + 1 < sg.size(); ++a) src_shape.push_back(shape(span_of(src, sg, a), true));
      for (size_t d = 0; d + 1 < dg.size(); ++d) dst_shape.push_back(shape(span_of(dst, dg, d), false));
    }
    // Destination groups outside: the counter then holds a few destination leaves at a time.
    for (size_t d = 0; d + 1 < dg.size(); ++d)
      for (size_t a = 0; a + 1 < sg.size(); ++a) {
        if (o_.routing.pxn && src[sg[a]].rail != dst[dg[d]].rail) continue;  // PXN stays on its rail
        const size_t before = subflows_;
        auto s = span_of(src, sg, a), t = span_of(dst, dg, d);
        if (counter_ && count_class(s, t, src_shape[a], dst_shape[d]))
          stats_.counted_classes++;
        else
          route_class(s, t);
        if (subflows_ > before) stats_.classes++;
      }
    flush();
    if (counter_) counter_->flush();
    b_.count_routed(connections_, subflows_, unroutable_);
  }

 private:
  Side side(int host, int nic) const {
    Side s;
    s.host = host;
    s.nic = nic;
    s.rail = f_.profile_of(host).nics[nic].rail;
    s.segment = f_.hosts()[host].segment;
    s.ports = std::min(router_.nic_ports(host, nic), kMaxPorts);
    for (int p = 0; p < s.ports; ++p) {
      PortInfo& info = s.port[p];
      info.link = router_.port_link(host, nic, p + 1);
      if (info.link < 0 || !router_.link_up(info.link)) {
        s.regular = false;
        continue;
      }
      info.leaf_sw = router_.leaf_of_link(info.link);
      info.leaf = router_.leaf_index_of_link(info.link);
      info.ordinal = router_.port_ordinal(info.link);
    }
    return s;
  }

  // Source endpoints: each GPU, or with PXN each NIC (one shared connection per remote GPU).
  std::vector<Side> sources() const {
    std::vector<Side> out;
    for (int h : job_.hosts) {
      const auto& profile = f_.profile_of(h);
      if (o_.routing.pxn) {
        for (int r = 0; r < f_.rails(); ++r) {
          int nic = f_.nic_on_rail(h, r);
          if (nic < 0) continue;
          Side s = side(h, nic);
          s.id = 0x80000000u | std::uint32_t(b_.global_nic(h, nic));
          s.bytes = pair_ * profile.gpus;
          out.push_back(s);
        }
        continue;
      }
      for (int g = 0; g < profile.gpus; ++g) {
        Side s = side(h, f_.nic_of_gpu(h, g));
        s.id = std::uint32_t(f_.global_gpu(h, g));
        s.bytes = pair_;
        out.push_back(s);
      }
    }
    return out;
  }

  std::vector<Side> destinations() const {
    std::vector<Side> out;
    out.reserve(job_.gpus.size());
    for (int x : job_.gpus) {
      topo::GpuRef g = f_.gpu(x);
      Side s = side(g.host, f_.nic_of_gpu(g.host, g.gpu));
      s.id = std::uint32_t(x);
      out.push_back(s);
    }
    return out;
  }

  // GPUs of the job per segment and rail, for the multiplicities of the endpoint demands.
  void count_gpus() {
    int segments = 0;
    for (int h : job_.hosts) segments = std::max(segments, f_.hosts()[h].segment + 1);
    rails_ = f_.rails();
    segment_gpus_.assign(size_t(segments), 0);
    segment_rail_.assign(size_t(segments) * rails_, 0);
    rail_total_.assign(size_t(rails_), 0);
    for (int x : job_.gpus) {
      topo::GpuRef g = f_.gpu(x);
      int seg = f_.hosts()[g.host].segment, rail = f_.rail_of_gpu(g.host, g.gpu);
      segment_gpus_[seg]++;
      segment_rail_[size_t(seg) * rails_ + rail]++;
      rail_total_[rail]++;
    }
  }

  // Endpoint bytes (the ideal) and NVLink legs, by multiplicity: what every demand of the
  // per-connection path adds, summed.
  void endpoint_demands() {
    const int n = int(job_.gpus.size());
    const bool cross = o_.cross_segment_only;
    for (int h : job_.hosts) {
      const int count = f_.profile_of(h).gpus, first = f_.first_gpu(h), seg = f_.hosts()[h].segment;
      const int remote = n - (cross ? segment_gpus_[seg] : count);
      std::vector<int> host_rail(size_t(rails_), 0);
      for (int a = 0; a < count; ++a) host_rail[f_.rail_of_gpu(h, a)]++;
      for (int a = 0; a < count; ++a) {
        const int x = first + a;
        b_.net_tx[x] += pair_ * remote;
        b_.net_rx[x] += pair_ * remote;  // as many remote senders as remote receivers
        if (!cross)
          for (int c = 0; c < count; ++c) {
            if (c == a) continue;
            b_.nv_tx[x] += pair_;
            b_.nv_rx[first + c] += pair_;
            b_.add_nvlink_bytes(x, c, pair_);
          }
        if (!o_.routing.pxn) continue;
        const int own_rail = f_.rail_of_gpu(h, a);
        for (int r = 0; r < rails_; ++r) {
          int receivers = rail_total_[r] - (cross ? segment_rail_[size_t(seg) * rails_ + r] : host_rail[r]);
          if (r != own_rail && receivers > 0) b_.add_nvlink_bytes(x, f_.gpu_on_rail(h, r), pair_ * receivers);
        }
      }
    }
  }

  void hit(int resource) {
    if (hits_[resource]++ == 0) touched_.push_back(resource);
  }

  // Loads what the class's QPs hit, in bulk.
  void flush() {
    ResourceLoads& loads = b_.loads_to_update();
    for (int r : touched_) {
      loads.add_many(r, hits_[r], subflow_bytes_);
      hits_[r] = 0;
    }
    touched_.clear();
  }

  // A group's exclusion keys (host, or segment for cross-segment traffic), sorted, and whether
  // its members share regular ports on the same leaves (then its classes can be counted).
  struct GroupShape {
    std::vector<int> keys;
    bool uniform = true;
  };
  int exclusion_key(const Side& s) const { return o_.cross_segment_only ? s.segment : s.host; }

  GroupShape shape(std::span<const Side> g, bool source) const {
    GroupShape out;
    const Side& first = g[0];
    for (const Side& s : g) {
      out.keys.push_back(exclusion_key(s));
      bool same = s.regular && s.ports == first.ports && (!source || s.bytes == first.bytes);
      for (int p = 0; same && p < first.ports; ++p) same = s.port[p].leaf == first.port[p].leaf;
      out.uniform = out.uniform && same;
    }
    std::sort(out.keys.begin(), out.keys.end());
    return out;
  }

  static size_t excluded(const GroupShape& g, int key) {
    auto range = std::equal_range(g.keys.begin(), g.keys.end(), key);
    return size_t(range.second - range.first);
  }

  // A class counted rather than enumerated: host links by each member's number of partners,
  // the switch hops by the ECMP counter. False (nothing done) when the class is irregular.
  bool count_class(std::span<const Side> src, std::span<const Side> dst, const GroupShape& src_shape,
                   const GroupShape& dst_shape) {
    const Side &s0 = src[0], &d0 = dst[0];
    if (!src_shape.uniform || !dst_shape.uniform || s0.ports != d0.ports) return false;
    const int ports = s0.ports, qps = std::max(1, o_.qps);
    int reachable = 0;
    for (int p = 0; p < ports; ++p) reachable += router_.reachable(s0.port[p].leaf_sw, d0.port[p].leaf) ? 1 : 0;
    if (reachable > 0 && reachable < ports) return false;  // QPs fail over to other ports
    const double sub = s0.bytes / (qps * ports);
    ResourceLoads& loads = b_.loads_to_update();
    size_t pairs = 0;
    for (const Side& s : src) {
      const size_t partners = dst.size() - excluded(dst_shape, exclusion_key(s));
      pairs += partners;
      for (int p = 0; reachable && partners && p < ports; ++p)
        loads.add_many(topo::Router::link_resource(s.port[p].link, true), std::uint32_t(partners * qps), sub);
    }
    for (const Side& d : dst) {
      const size_t partners = src.size() - excluded(src_shape, exclusion_key(d));
      for (int p = 0; reachable && partners && p < ports; ++p)
        loads.add_many(topo::Router::link_resource(d.port[p].link, false), std::uint32_t(partners * qps), sub);
    }
    connections_ += pairs;
    if (reachable == 0) {  // no QP has a path: left out, as route_nics would
      unroutable_ += pairs;
      return true;
    }
    subflows_ += pairs * size_t(qps * ports);
    for (int p = 0; p < ports; ++p) counter_->add(s0.port[p].leaf_sw, d0.port[p].leaf, pairs * qps, sub);
    return true;
  }

  void route_class(std::span<const Side> src, std::span<const Side> dst) {
    // Port 1 of every member starts and ends at the class's leaves: one reachability test.
    const bool first_reachable = src[0].port[0].leaf_sw >= 0 && dst[0].group_leaf() >= 0 &&
                                 router_.reachable(src[0].port[0].leaf_sw, dst[0].group_leaf());
    for (const Side& s : src)
      for (const Side& d : dst) {
        if (s.host == d.host || (o_.cross_segment_only && s.segment == d.segment)) continue;
        const std::uint64_t key =
            topo::mix64((std::uint64_t(s.id) << 32 | std::uint32_t(d.id)) ^ b_.salt());
        connection(s, d, key, first_reachable);
      }
  }

  void connection(const Side& s, const Side& d, std::uint64_t key, bool first_reachable) {
    const int ports = std::min(s.ports, d.ports);
    if (!s.regular || !d.regular) return exact(s, d, key);
    int reachable = first_reachable ? 1 : 0;
    for (int p = 1; p < ports; ++p)
      reachable += router_.reachable(s.port[p].leaf_sw, d.port[p].leaf) ? 1 : 0;
    if (reachable == 0) {  // no QP has a path: the connection is left out, as route_nics would
      ++connections_;
      ++unroutable_;
      return;
    }
    if (reachable < ports) return exact(s, d, key);  // QPs fail over to other ports
    const int qps = std::max(1, o_.qps) * ports;
    const double sub = s.bytes / qps;
    if (sub != subflow_bytes_) {
      flush();
      subflow_bytes_ = sub;
    }
    auto visit = [this](int r) { hit(r); };
    for (int k = 0; k < qps; ++k) {
      const PortInfo& sp = s.port[ports == 1 ? 0 : k % ports];
      const PortInfo& dp = d.port[ports == 1 ? 0 : k % ports];
      const std::uint64_t qp_key = topo::mix64(key + kQpStride * std::uint64_t(k + 1));
      hit(topo::Router::link_resource(sp.link, true));
      selector_.walk(sp.leaf_sw, dp.leaf, dp.ordinal, qp_key, visit);
      hit(topo::Router::link_resource(dp.link, false));
    }
    ++connections_;
    subflows_ += size_t(qps);
  }

  void exact(const Side& s, const Side& d, std::uint64_t key) {
    stats_.exact_connections++;
    b_.exact_connection(s.host, s.nic, d.host, d.nic, s.bytes, key);
  }

  TrafficBuilder& b_;
  const topo::Router& router_;
  const topo::Fabric& f_;
  const topo::PathSelector& selector_;
  const Job& job_;
  const FlowSimOptions& o_;
  ClassStats& stats_;
  double pair_ = 0;
  int rails_ = 1;
  std::vector<int> segment_gpus_, segment_rail_, rail_total_;
  std::vector<std::uint32_t> hits_;
  std::vector<int> touched_;
  double subflow_bytes_ = 0;
  size_t connections_ = 0, subflows_ = 0, unroutable_ = 0;
  std::optional<EcmpCounter> counter_;  // when ECMP collisions are counted
};

}  // namespace

bool classes_apply(const topo::Fabric& f, const Job& job, const FlowSimOptions& o, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (o.pattern != TrafficPattern::kAllToAll)
    return no(fmt::format("pattern {} is routed per connection (it has few connections)",
                          pattern_name(o.pattern)));
  for (int h : job.hosts) {
    const auto& profile = f.profile_of(h);
    for (int g = 0; g < profile.gpus; ++g)
      if (f.nic_of_gpu(h, g) < 0) return no(fmt::format("host {} has a GPU without a NIC", f.hosts()[h].name));
    for (const auto& nic : profile.nics)
      if (nic.ports > kMaxPorts) return no(fmt::format("NIC {} has more than {} ports", nic.name, kMaxPorts));
    if (o.routing.pxn)
      for (int r = 0; r < f.rails(); ++r)
        if (f.nic_on_rail(h, r) < 0 || f.gpu_on_rail(h, r) < 0)
          return no(fmt::format("host {} has no NIC on rail {} for PXN", f.hosts()[h].name, r));
  }
  return true;
}

void route_by_classes(TrafficBuilder& builder, const Job& job, const FlowSimOptions& options,
                      ClassStats& stats, bool counted) {
  ClassRouter(builder, job, options, stats, counted).run();
}

}  // namespace astral::seer::detail
