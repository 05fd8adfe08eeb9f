#include "hash_routing.hpp"

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/topo/fabric.hpp"
#include "astral/topo/fabric_routing.hpp"
#include "names.hpp"

namespace astral::monitor {

HashRouting::~HashRouting() = default;

std::shared_ptr<const HashRouting> HashRouting::from_json(const nlohmann::json& doc, topo::Fabric fabric,
                                                          std::string_view source) {
  auto it = doc.find("hash_model");
  if (it == doc.end()) return nullptr;
  const std::string where = std::string(source) + ": hash_model";
  if (!it->is_object()) throw std::runtime_error(where + ": expected an object {\"seed\": N, \"polarisation\": P}");
  topo::RoutingPolicy policy;
  if (auto s = it->find("seed"); s != it->end()) {
    if (!s->is_number_unsigned()) throw std::runtime_error(where + ".seed: expected a non-negative integer");
    policy.seed = s->get<uint64_t>();
  }
  if (auto p = it->find("polarisation"); p != it->end()) {
    if (!p->is_number() || p->get<double>() < 0 || p->get<double>() > 1)
      throw std::runtime_error(where + ".polarisation: expected a number in [0, 1]");
    policy.polarisation = p->get<double>();
  }
  std::shared_ptr<HashRouting> r(new HashRouting());
  r->fabric_ = std::make_unique<topo::Fabric>(std::move(fabric));
  // Tables toward the leaves of the connections the evidence names only, built as they are asked.
  r->router_ = std::make_unique<topo::Router>(*r->fabric_, topo::RouteTables::kOnDemand);
  r->selector_ = std::make_unique<topo::PathSelector>(*r->router_, policy);
  return r;
}

int HashRouting::host_link(std::string_view host, std::string_view nic, int plane) const {
  const topo::Fabric& f = *fabric_;
  std::optional<int> h = f.find_host(host);
  if (!h) {
    for (size_t i = 0; i < f.hosts().size() && !h; ++i)
      if (names::canonical_host(f.hosts()[i].name) == names::canonical_host(host)) h = int(i);
    if (!h) return -1;
  }
  const auto& nics = f.profile_of(*h).nics;
  for (size_t n = 0; n < nics.size(); ++n) {
    if (nics[n].name != nic) continue;
    const int ports = router_->nic_ports(*h, int(n));
    const int port = ports > 1 && plane >= 0 ? plane + 1 : 1;
    return port <= ports ? router_->port_link(*h, int(n), port) : -1;
  }
  return -1;
}

std::optional<std::vector<Component>> HashRouting::trunk_hops(std::string_view host, std::string_view nic,
                                                              std::string_view peer_host, std::string_view peer_nic,
                                                              int plane, uint16_t udp_sport) const {
  const int src = host_link(host, nic, plane), dst = host_link(peer_host, peer_nic, plane);
  if (src < 0 || dst < 0) return std::nullopt;
  std::vector<Component> hops;
  const topo::Fabric& f = *fabric_;
  const bool routed = selector_->walk(router_->leaf_of_link(src), router_->leaf_index_of_link(dst),
                                      router_->port_ordinal(dst), topo::roce_flow_key(src, dst, udp_sport),
                                      [&](int resource) {
                                        const topo::Link& l = f.links()[size_t(topo::Router::link_of_resource(resource))];
                                        hops.push_back({ComponentKind::link, "", "", f.switches()[size_t(l.a.sw)].name,
                                                        topo::Fabric::port_label(l.a.port, l.a.lane), -1});
                                      });
  if (!routed) return std::nullopt;
  return hops;
}

}  // namespace astral::monitor
