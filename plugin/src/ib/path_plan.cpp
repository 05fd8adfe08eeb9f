// The path plan rules (path_plan.hpp): request checks, the three policies, the hash-model search
// for disjoint uplinks, and the plan's log line and JSON form.
#include "ib/path_plan.hpp"

#include <fmt/format.h>

#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tcp/devices.hpp"  // stable_hash

namespace astral::plugin::ib {
// Named rather than anonymous: the plugin is built in unity batches with the other ib/ files.
namespace plan_detail {

constexpr std::uint32_t kSportSpace = 0x4000;  // mlx5 keeps 14 bits of the label: 0xC000..0xFFFF
constexpr std::uint16_t kSportBase = 0xC000;
constexpr int kMaxLid = 0xBFFF;                                  // highest unicast LID

std::uint64_t endpoint_key(const PathEndpoint& e) {
  return topo::mix64(stable_hash(e.host) ^
                     (std::uint64_t(e.rail & 0xFFFF) << 48 | std::uint64_t(e.plane & 0xFF) << 40 |
                      std::uint64_t(e.port & 0xFF)));
}

// Depends on the direction: (alpha -> beta) and (beta -> alpha) get different labels.
std::uint64_t direction_key(const PathRequest& r) {
  return topo::mix64(endpoint_key(r.local) * 0x100000001b3ULL + endpoint_key(r.remote));
}

std::string endpoint_text(const PathEndpoint& e) {
  return fmt::format("{} rail {} plane {} port {}", e.host, e.rail, e.plane, e.port);
}

std::string check_roce(const PathRequest& r) {
  if (r.local.gid_index < 0)
    return fmt::format("path plan: no GID index chosen for RoCE port {}", endpoint_text(r.local));
  return {};
}

std::string check_ib(const PathRequest& r) {
  const PathEndpoint& e = r.remote;
  if (e.lmc < 0 || e.lmc > 7)
    return fmt::format("path plan: LMC {} of {} out of range [0, 7]", e.lmc, endpoint_text(e));
  if (e.base_lid == 0 || int(e.base_lid) + (1 << e.lmc) - 1 > kMaxLid)
    return fmt::format("path plan: LID {} (LMC {}) of {} is not a unicast LID range", e.base_lid,
                       e.lmc, endpoint_text(e));
  return {};
}

std::string check_request(const PathRequest& r) {
  if (r.nqps < 1 || r.nqps > kMaxPlannedQps)
    return fmt::format("path plan: {} QPs per connection out of range [1, {}] (ASTRAL_IB_QPS)", r.nqps,
                       kMaxPlannedQps);
  if (r.sl < 0 || r.sl > 15)
    return fmt::format("path plan: SL {} out of range [0, 15] (ASTRAL_IB_SL)", r.sl);
  if (r.tc < 0 || r.tc > 255)
    return fmt::format("path plan: traffic class {} out of range [0, 255] (ASTRAL_IB_TC)", r.tc);
  if (r.local.link_layer != r.remote.link_layer)
    return fmt::format("path plan: {} is {} but {} is {}: the link layers differ",
                       endpoint_text(r.local), link_layer_name(r.local.link_layer),
                       endpoint_text(r.remote), link_layer_name(r.remote.link_layer));
  if (r.fabric && r.fabric->rail_only() && r.local.rail != r.remote.rail)
    return fmt::format(
        "path plan: cross-rail connection from {} on rail {} to {} on rail {} in rail-only fabric {}: "
        "rails meet only over NVLink (PXN); refusing it",
        r.local.host, r.local.rail, r.remote.host, r.remote.rail, r.fabric->path());
  return r.local.link_layer == LinkLayer::kRoCE ? check_roce(r) : check_ib(r);
}

PathPlan plan_header(const PathRequest& r) {
  PathPlan plan;
  plan.policy = r.policy;
  plan.link_layer = r.local.link_layer;
  plan.port = r.local.port;
  plan.plane = r.local.plane;
  plan.rail = r.local.rail;
  plan.sl = r.sl;
  plan.tc = r.tc;
  // On IB no GRH is used inside a subnet (as NCCL), so no GID either.
  plan.gid_index = r.local.link_layer == LinkLayer::kRoCE ? r.local.gid_index : -1;
  return plan;
}

QpPath ib_path(const PathRequest& r, int qp, std::uint64_t index) {
  QpPath p;
  p.qp = qp;
  p.path_index = int(index % (std::uint64_t{1} << r.remote.lmc));
  p.dlid = std::uint16_t(r.remote.base_lid + p.path_index);
  return p;
}

QpPath roce_path(int qp, std::uint16_t sport) {
  QpPath p;
  p.qp = qp;
  p.udp_sport = sport;
  p.flow_label = flow_label_for_udp_sport(sport);
  return p;
}

// QP q gets source port base + q * (space / nqps): distinct per QP and as far apart as possible;
// on IB, path index base + q (distinct up to 2^LMC paths).
void fill_even(PathPlan& plan, const PathRequest& r, std::uint64_t base, const char* source) {
  plan.source = source;
  plan.qps.clear();
  const std::uint32_t stride = kSportSpace / std::uint32_t(r.nqps);
  for (int q = 0; q < r.nqps; ++q) {
    if (r.local.link_layer == LinkLayer::kInfiniBand) {
      plan.qps.push_back(ib_path(r, q, base + std::uint64_t(q)));
    } else {
      std::uint32_t low = std::uint32_t(base + std::uint64_t(q) * stride) % kSportSpace;
      plan.qps.push_back(roce_path(q, std::uint16_t(kSportBase | low)));
    }
  }
}

void fill_off(PathPlan& plan, const PathRequest& r) {
  plan.source = kSourceOff;
  for (int q = 0; q < r.nqps; ++q) {
    QpPath p = r.local.link_layer == LinkLayer::kInfiniBand ? ib_path(r, q, 0) : QpPath{};
    p.qp = q;  // RoCE: label 0, so mlx5 derives the port from the QPNs
    plan.qps.push_back(p);
  }
}

// --- Pinned with a hash model: search labels whose hashed first ECMP stage is the planned uplink.

// The fabric link of an endpoint's port: host by name, NIC by rail, fabric port = plane + 1 on a
// NIC with a port per plane. -1 with *note saying why.
int fabric_link(const FabricModel& m, const PathEndpoint& e, std::string* note) {
  const topo::Fabric& f = m.fabric();
  auto host = f.find_host(e.host);
  if (!host) {
    *note = fmt::format("host '{}' is not in fabric {}", e.host, m.path());
    return -1;
  }
  int nic = f.nic_on_rail(*host, e.rail);
  if (nic < 0) {
    *note = fmt::format("host '{}' has no NIC on rail {} in fabric {}", e.host, e.rail, m.path());
    return -1;
  }
  int ports = m.router().nic_ports(*host, nic);
  int port = ports > 1 ? e.plane + 1 : 1;
  int link = port <= ports && port >= 1 ? m.router().port_link(*host, nic, port) : -1;
  if (link < 0 || !m.router().link_up(link)) {
    *note = fmt::format("{}:{}:{} (plane {}) is not cabled or is down in fabric {}", e.host,
                        f.profile_of(*host).nics[nic].name, port, e.plane, m.path());
    return -1;
  }
  return link;
}

struct HashSearch {
  const FabricModel& model;
  int src_link, dst_link;
  int src_switch, dst_leaf, dst_ordinal;

  // The first link direction a QP with this source port takes, -1 when it has no path.
  int first_hop(std::uint16_t sport) const {
    int first = -1;
    bool routed = model.selector()->walk(src_switch, dst_leaf, dst_ordinal,
                                         topo::roce_flow_key(src_link, dst_link, sport),
                                         [&](int resource) { first = first < 0 ? resource : first; });
    return routed ? first : -1;
  }

  // The first unused source port from `start` on whose first hop is `target`.
  std::optional<std::uint16_t> find(int target, std::uint32_t start,
                                    const std::set<std::uint16_t>& used) const {
    for (std::uint32_t k = 0; k < kSportSpace; ++k) {
      auto sport = std::uint16_t(kSportBase | ((start + k) % kSportSpace));
      if (!used.count(sport) && first_hop(sport) == target) return sport;
    }
    return std::nullopt;
  }
};

// QP q of the host port at ordinal o on its leaf takes uplink (o * nqps + q) mod n of the leaf's
// ECMP group: the flows of one rail leaving one leaf are disjoint while hosts x QPs <= uplinks.
bool pin_by_hash(const FabricModel& m, const PathRequest& r, PathPlan& plan) {
  const topo::Router& router = m.router();
  int src = fabric_link(m, r.local, &plan.note);
  int dst = src < 0 ? -1 : fabric_link(m, r.remote, &plan.note);
  if (dst < 0) return false;
  HashSearch search{m, src, dst, router.leaf_of_link(src), router.leaf_index_of_link(dst),
                    router.port_ordinal(dst)};
  const std::string& leaf_name = m.fabric().switches()[search.src_switch].name;
  if (router.leaf_switch(search.dst_leaf) == search.src_switch) {
    plan.note = fmt::format("both ends under leaf {}: no ECMP stage to choose", leaf_name);
    return false;
  }
  auto group = router.next_hops(search.src_switch, search.dst_leaf);
  if (group.empty()) {
    plan.note = fmt::format("no path from leaf {} to {} in fabric {}", leaf_name, r.remote.host, m.path());
    return false;
  }
  const std::uint64_t base = direction_key(r);
  const size_t ordinal = size_t(router.port_ordinal(src));
  std::set<std::uint16_t> used;
  for (int q = 0; q < r.nqps; ++q) {
    int target = group[(ordinal * size_t(r.nqps) + size_t(q)) % group.size()].resource;
    auto sport = search.find(target, std::uint32_t(base + std::uint64_t(q) * topo::kQpKeyStride), used);
    if (!sport) {
      plan.note = fmt::format("no source port reaches uplink {} of leaf {}", router.resource_label(target),
                              leaf_name);
      plan.qps.clear();
      return false;
    }
    used.insert(*sport);
    plan.qps.push_back(roce_path(q, *sport));
    plan.qps.back().uplink = topo::Router::link_of_resource(target);
    plan.qps.back().uplink_name = router.resource_label(target);
  }
  plan.source = kSourceHashModel;
  return true;
}

void fill_pinned(PathPlan& plan, const PathRequest& r) {
  const bool roce = r.local.link_layer == LinkLayer::kRoCE;
  if (roce && r.fabric && r.fabric->selector()) {
    if (pin_by_hash(*r.fabric, r, plan)) return;
  } else if (roce && r.fabric) {
    plan.note = fmt::format("fabric {} carries no hash_model", r.fabric->path());
  } else if (!roce && r.fabric) {
    plan.note = "IB: the subnet manager routes each DLID; its tables are not modelled";
  }
  fill_even(plan, r, direction_key(r), kSourceDeterministic);
}

std::string qp_text(const PathPlan& plan, const QpPath& p) {
  std::string qp = p.device.empty() ? fmt::format("qp{}", p.qp)
                                    : fmt::format("qp{} on {}", p.qp, p.device);
  if (plan.link_layer == LinkLayer::kInfiniBand)
    return fmt::format("{} dlid {} path {}", qp, p.dlid, p.path_index);
  if (p.flow_label == 0) return qp + " label 0 sport from QPN hash";
  std::string text = fmt::format("{} label {:#07x} sport {}", qp, p.flow_label, p.udp_sport);
  return p.uplink_name.empty() ? text : text + " via " + p.uplink_name;
}

std::optional<HashModel> parse_hash_model(const nlohmann::json& doc, const std::string& path,
                                          std::string* error) {
  auto it = doc.find("hash_model");
  if (it == doc.end()) return std::nullopt;
  HashModel h;
  if (!it->is_object()) {
    *error = fmt::format("{}: hash_model: expected an object {{\"seed\": N, \"polarisation\": P}}", path);
    return std::nullopt;
  }
  if (auto s = it->find("seed"); s != it->end()) {
    if (!s->is_number_integer() || (!s->is_number_unsigned() && s->get<std::int64_t>() < 0)) {
      *error = fmt::format("{}: hash_model.seed: expected a non-negative integer", path);
      return std::nullopt;
    }
    h.seed = s->get<std::uint64_t>();
  }
  if (auto p = it->find("polarisation"); p != it->end()) {
    if (!p->is_number() || p->get<double>() < 0 || p->get<double>() > 1) {
      *error = fmt::format("{}: hash_model.polarisation: expected a number in [0, 1]", path);
      return std::nullopt;
    }
    h.polarisation = p->get<double>();
  }
  return h;
}

}  // namespace plan_detail

std::optional<PathPolicy> parse_path_policy(const char* text, std::string* error) {
  if (!text || !*text) return kDefaultPathPolicy;
  std::string_view v(text);
  if (v == "spread") return PathPolicy::kSpread;
  if (v == "pinned") return PathPolicy::kPinned;
  if (v == "off") return PathPolicy::kOff;
  if (error)
    *error = fmt::format("ASTRAL_IB_PATHS='{}': expected spread, pinned or off; using {}", v,
                         policy_name(kDefaultPathPolicy));
  return std::nullopt;
}

std::string_view policy_name(PathPolicy policy) {
  switch (policy) {
    case PathPolicy::kPinned: return "pinned";
    case PathPolicy::kOff: return "off";
    case PathPolicy::kSpread: break;
  }
  return "spread";
}

std::string_view link_layer_name(LinkLayer layer) {
  return layer == LinkLayer::kInfiniBand ? "IB" : "RoCE";
}

std::uint16_t flow_label_to_udp_sport(std::uint32_t flow_label) {
  std::uint32_t fl = flow_label & kFlowLabelMask;
  return std::uint16_t(plan_detail::kSportBase | ((fl & 0x3FFF) ^ ((fl >> 14) & 0x3F)));
}

std::uint32_t flow_label_for_udp_sport(std::uint16_t udp_sport) {
  std::uint32_t low = udp_sport & 0x3FFF;
  // Bits 14..19 zero: the label is the port's low bits. Port 0xC000 needs a non-zero label (0
  // means "hash the QPNs"): bits 14..19 = 1 and low bits 1, which XOR back to 0.
  return low != 0 ? low : (1u << 14) | 1u;
}


FabricModel::~FabricModel() = default;

bool FabricModel::rail_only() const { return fabric_->kind() == "rail-only"; }

std::shared_ptr<const FabricModel> FabricModel::from_json(const nlohmann::json& doc, std::string path,
                                                          std::string* error) {
  std::shared_ptr<FabricModel> m(new FabricModel());
  m->path_ = std::move(path);
  try {
    m->fabric_ = std::make_unique<topo::Fabric>(topo::fabric_from_json(doc));
    std::string hash_error;
    m->hash_ = plan_detail::parse_hash_model(doc, m->path_, &hash_error);
    if (!hash_error.empty()) {
      if (error) *error = hash_error;
      return nullptr;
    }
    // Routes toward the leaves this process's peers sit on only: a 131K-GPU fabric has 1,024 leaves.
    m->router_ = std::make_unique<topo::Router>(*m->fabric_, topo::RouteTables::kOnDemand);
    if (m->hash_) {
      topo::RoutingPolicy policy;
      policy.seed = m->hash_->seed;
      policy.polarisation = m->hash_->polarisation;
      m->selector_ = std::make_unique<topo::PathSelector>(*m->router_, policy);
    }
  } catch (const std::exception& e) {  // FabricError names the element; json errors the field
    if (error) *error = fmt::format("{}: {}", m->path_, e.what());
    return nullptr;
  }
  return m;
}

std::shared_ptr<const FabricModel> FabricModel::load(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    if (error) *error = fmt::format("{}: cannot open the fabric file", path);
    return nullptr;
  }
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    if (error) *error = fmt::format("{}: not valid JSON", path);
    return nullptr;
  }
  return from_json(doc, path, error);
}

PathRequest reversed(const PathRequest& request) {
  PathRequest r = request;
  std::swap(r.local, r.remote);
  return r;
}

PathPlan plan_paths(const PathRequest& r) {
  PathPlan plan = plan_detail::plan_header(r);
  plan.error = plan_detail::check_request(r);
  if (!plan.ok()) return plan;
  switch (r.policy) {
    case PathPolicy::kOff: plan_detail::fill_off(plan, r); break;
    case PathPolicy::kPinned: plan_detail::fill_pinned(plan, r); break;
    case PathPolicy::kSpread:
      plan_detail::fill_even(plan, r,
                             topo::mix64(plan_detail::direction_key(r) ^ topo::mix64(r.connection_id)),
                             kSourceSpread);
      break;
  }
  return plan;
}

std::string format_plan(const PathPlan& plan, const PathRequest& r) {
  if (!plan.ok()) return plan.error;
  std::string out = fmt::format("path plan {} ({}) {} {} -> {}: ", policy_name(plan.policy), plan.source,
                                link_layer_name(plan.link_layer), plan_detail::endpoint_text(r.local),
                                plan_detail::endpoint_text(r.remote));
  if (plan.link_layer == LinkLayer::kRoCE) out += fmt::format("gid {} ", plan.gid_index);
  out += fmt::format("sl {} tc {}", plan.sl, plan.tc);
  for (size_t i = 0; i < plan.qps.size(); ++i)
    out += (i == 0 ? "; " : ", ") + plan_detail::qp_text(plan, plan.qps[i]);
  if (!plan.note.empty()) out += " (" + plan.note + ")";
  return out;
}

trace::NetPath to_trace_path(const PathPlan& plan) {
  trace::NetPath p;
  p.transport = "ib";
  p.link_layer = link_layer_name(plan.link_layer);
  p.policy = policy_name(plan.policy);
  p.source = plan.source;
  p.note = plan.note;
  p.port = plan.port;
  p.plane = plan.plane;
  p.rail = plan.rail;
  p.sl = plan.sl;
  p.tc = plan.tc;
  p.gid_index = plan.gid_index;
  for (const QpPath& q : plan.qps)
    p.qps.push_back(trace::NetPathQp{uint32_t(q.qp), q.flow_label, q.udp_sport, q.dlid,
                                     uint32_t(q.path_index), q.uplink, q.uplink_name, q.device});
  return p;
}

nlohmann::json plan_to_json(const PathPlan& plan) {
  nlohmann::json j = nlohmann::json::parse(trace::path_to_json(to_trace_path(plan)));
  if (!plan.ok()) j["error"] = plan.error;
  return j;
}

}  // namespace astral::plugin::ib
