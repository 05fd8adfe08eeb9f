#pragma once
// What `astral fabric show` prints: switches and links per tier, oversubscription, bisection
// bandwidth and the optics bill.
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <vector>

#include "astral/topo/fabric.hpp"

namespace astral::topo {

struct TierSummary {
  int tier = 0;
  int switches = 0;
  long ports_total = 0;  // front-panel ports
  long ports_used = 0;   // ports with at least one cabled lane
  double down_gbps = 0;  // capacity toward lower tiers (hosts for leaves), summed over switches
  double up_gbps = 0;    // capacity toward higher tiers
  double oversubscription = 0;  // down / up; 0 when the tier has no uplinks
};

// Links between two tiers (0 = hosts), e.g. {0, 1} = host-leaf.
struct LinkClassSummary {
  int lower_tier = 0;
  int upper_tier = 0;
  long links = 0;
  long down = 0;
  double gbps_each = 0;  // the most common speed
  double total_gbps = 0;
};

struct FabricSummary {
  std::string name, kind;
  int hosts = 0, gpus = 0, rails = 0, planes = 0;
  std::vector<TierSummary> tiers;
  std::vector<LinkClassSummary> link_classes;
  // Half the smallest total up-capacity over the tier boundaries below the top tier: what
  // uniform traffic between two halves of the cluster can use. Cross-rail traffic in a rail-only
  // fabric has no network path at all (it needs NVLink forwarding); see cross_rail_network.
  double bisection_gbps = 0;
  double bisection_per_gpu_gbps = 0;
  bool cross_rail_network = true;  // some leaf pair of different rails is joined by the network
  std::map<double, long> optics_by_gbps;  // transceivers by speed (switch side counted per port)
  long optics = 0;
  std::map<double, long> links_by_gbps;  // cables by speed (host and switch links)
  long switches = 0;
  std::vector<std::string> warnings;
};

FabricSummary summarize(const Fabric& fabric);
nlohmann::json to_json(const FabricSummary& summary);
std::string format_summary(const FabricSummary& summary);  // the human table

}  // namespace astral::topo
