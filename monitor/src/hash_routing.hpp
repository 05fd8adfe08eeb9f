#pragma once
// The switches' ECMP choice under the fabric JSON's optional top-level "hash_model"
// ({"seed": N, "polarisation": P}, as `astral fabric sim` and the plugin's path plan read it):
// with it, the trunk hops of a RoCE QP whose UDP source port is known are exact, computed by
// topo::PathSelector (the flow simulator's and the planner's own hash), not guessed.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "astral/monitor/event.hpp"

#include "astral/topo/fabric.hpp"

namespace astral::topo {
class Router;
class PathSelector;
}  // namespace astral::topo

namespace astral::monitor {

class HashRouting {
 public:
  ~HashRouting();
  HashRouting(const HashRouting&) = delete;
  HashRouting& operator=(const HashRouting&) = delete;

  // Null when `doc` (an Astral fabric JSON, already read into `fabric`) has no hash_model; throws
  // std::runtime_error naming `source` and the field when the hash model is malformed.
  static std::shared_ptr<const HashRouting> from_json(const nlohmann::json& doc, topo::Fabric fabric,
                                                      std::string_view source);

  // The switch-to-switch hops of one RoCE QP from host:nic to peer_host:peer_nic (fabric port =
  // plane + 1 on a NIC with a port per plane), each named by its lower end (kind link, switch and
  // port, as the fabric graph's trunks). Empty when both ends share a leaf; nullopt when an end
  // is not in the fabric or has no path.
  std::optional<std::vector<Component>> trunk_hops(std::string_view host, std::string_view nic,
                                                   std::string_view peer_host, std::string_view peer_nic,
                                                   int plane, uint16_t udp_sport) const;

 private:
  HashRouting() = default;
  int host_link(std::string_view host, std::string_view nic, int plane) const;
  std::unique_ptr<topo::Fabric> fabric_;
  std::unique_ptr<topo::Router> router_;
  std::unique_ptr<topo::PathSelector> selector_;
};

}  // namespace astral::monitor
