#pragma once
// The cluster fabric model: hosts (each with a node profile: GPUs, NICs, rails, ports), switches per
// tier, and links between NIC ports and switch ports. One model serves the generators (Tier-2
// same-rail, rail-optimised fat tree, rail-only), the flow simulator, Seer's collective costs and the
// monitor, which maps "rank 517's NIC" to "leaf r3-07 port 17". The JSON form is documented in
// docs/fabric.md and is a contract: other modules and operators' tools write it too.
//
// Names follow what operators see: hosts "node0042", NICs "mlx5_3" with ports 1..n, switches by
// role ("r3-07" = rail 3 leaf of segment 7, "s3-12" same-rail spine, "sp-05" shared spine, "c05-01"
// core), switch ports numbered from 1 and breakout lanes as "17/2".
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace astral::topo {

// Thrown for a fabric description that cannot be used; the message names the offending element
// (link index and endpoint, switch name, profile) and what is wrong with it.
struct FabricError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kAnyRail = -1;  // a switch shared by every rail

// One NIC of a node profile. GPUs in `gpus` reach the network through it; its ports are 1..ports.
struct NicModel {
  std::string name;       // as the OS names it, e.g. "mlx5_0"
  int rail = 0;           // rail index in [0, Fabric::rails())
  std::vector<int> gpus;  // local GPU indices served by this NIC
  int ports = 1;          // two for a dual-ToR NIC (one port per plane)
  double port_gbps = 400;
};

// What a host looks like to the fabric. Hosts refer to profiles by name.
struct NodeProfile {
  std::string name;
  int gpus = 8;
  double nvlink_gbps = 3600;  // per GPU and direction into the NVLink domain (450 GB/s = 3600 Gb/s)
  std::vector<NicModel> nics;
};

struct Host {
  std::string name;
  int profile = 0;  // index into Fabric::profiles()
  int segment = 0;  // hosts under one set of leaves (one per rail and plane)
  int pod = 0;
};

struct Switch {
  std::string name;
  int tier = 1;  // 1 leaf (ToR), 2 spine (Agg), 3 core
  int radix = 64;  // front-panel ports, each of port_gbps; a port may be broken out into lanes
  double port_gbps = 400;
  int rail = kAnyRail;  // the rail a leaf or same-rail spine serves; kAnyRail when shared
  int plane = 0;
  int pod = 0;
  int segment = -1;  // leaves: the segment they serve
};

// One end of a link: a host NIC port (host, nic, port) or a switch port (sw, port, lane).
struct Endpoint {
  int host = -1;  // >= 0 for a host end
  int nic = -1;   // host end: NIC index within the host's profile
  int sw = -1;    // >= 0 for a switch end
  int port = 0;   // 1-based: NIC port, or switch front-panel port
  int lane = 0;   // switch breakout lane (1-based); 0 = the whole port
  bool is_host() const { return host >= 0; }
  bool operator==(const Endpoint&) const = default;
};

enum class LinkState : std::uint8_t { kUp, kDown };
enum class LinkMedia : std::uint8_t { kOptic, kCopper };

struct Link {
  Endpoint a;  // the host end of a host link; the lower tier of a switch link
  Endpoint b;  // the switch end; the upper tier
  double gbps = 400;
  LinkState state = LinkState::kUp;
  LinkMedia media = LinkMedia::kOptic;
};

// Everything a fabric description holds, before validation.
struct FabricData {
  std::string name;
  std::string kind = "custom";  // same-rail-t2 | fat-tree | rail-only | custom
  int rails = 1;
  int planes = 1;
  std::vector<NodeProfile> profiles;
  std::vector<Host> hosts;
  std::vector<Switch> switches;
  std::vector<Link> links;
  // How a generator made it (option, value), kept for provenance; empty for hand-written fabrics.
  std::vector<std::pair<std::string, std::string>> generator;
};

struct GpuRef {
  int host = -1;
  int gpu = -1;  // local index on the host
};

// Where a host NIC port is cabled.
struct Attachment {
  int link = -1;
  int sw = -1;
  int port = 0;
  int lane = 0;
};

// A validated fabric with lookup indexes. Construction checks every element and throws FabricError
// naming the first problem; link states may change afterwards (faults), nothing else.
class Fabric {
 public:
  explicit Fabric(FabricData data);

  const std::string& name() const { return data_.name; }
  const std::string& kind() const { return data_.kind; }
  int rails() const { return data_.rails; }
  int planes() const { return data_.planes; }
  const std::vector<NodeProfile>& profiles() const { return data_.profiles; }
  const std::vector<Host>& hosts() const { return data_.hosts; }
  const std::vector<Switch>& switches() const { return data_.switches; }
  const std::vector<Link>& links() const { return data_.links; }
  const std::vector<std::pair<std::string, std::string>>& generator() const {
    return data_.generator;
  }
  const NodeProfile& profile_of(int host) const { return data_.profiles[data_.hosts[host].profile]; }
  // Non-fatal findings of validation (e.g. NIC ports with no cable).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // GPUs are numbered globally host by host: global = first_gpu(host) + local.
  int gpu_count() const { return gpu_offset_.back(); }
  int first_gpu(int host) const { return gpu_offset_[host]; }
  GpuRef gpu(int global) const {
    if (global < 0 || global >= gpu_count()) return {};
    int host = host_of_gpu_[global];
    return {host, global - gpu_offset_[host]};
  }
  int global_gpu(int host, int local_gpu) const { return gpu_offset_[host] + local_gpu; }
  int nic_of_gpu(int host, int local_gpu) const;  // -1 when the GPU has no NIC
  int rail_of_gpu(int host, int local_gpu) const;  // -1 when the GPU has no NIC
  int nic_on_rail(int host, int rail) const;       // first NIC of the host on that rail, or -1
  int gpu_on_rail(int host, int rail) const;       // first GPU served by that rail's NIC, or -1

  std::optional<int> find_host(std::string_view name) const;
  std::optional<int> find_switch(std::string_view name) const;
  // A link named the way operators name its ends: "r3-07:17", "r3-07:17/2", "node0001:mlx5_0:1",
  // or "#12" for link index 12. Either end of the link may be given.
  std::optional<int> find_link(std::string_view spec) const;
  // An endpoint from its text form ("node0001:mlx5_0:1", "r3-07:17/2"); nullopt when it names
  // nothing in this fabric.
  std::optional<Endpoint> parse_endpoint(std::string_view text) const;

  int link_at_host_port(int host, int nic, int port) const;  // -1 when not cabled
  int link_at_switch_port(int sw, int port, int lane = 0) const;
  Attachment attachment(int host, int nic, int port) const;
  const std::vector<int>& switch_links(int sw) const { return switch_links_[sw]; }
  const std::vector<int>& host_links(int host) const { return host_links_[host]; }

  std::string endpoint_label(const Endpoint& e) const;  // "node0001:mlx5_0:1", "r3-07:17/2"
  std::string link_label(int link) const;               // "node0001:mlx5_0:1 <-> r3-07:17/2"
  static std::string port_label(int port, int lane);    // "17", "17/2"

  void set_link_state(int link, LinkState state) { data_.links.at(link).state = state; }

 private:
  void validate();
  void check_planes(size_t link) const;
  void build_indexes();

  FabricData data_;
  std::vector<std::string> warnings_;
  std::vector<int> gpu_offset_;  // size hosts + 1
  std::vector<int> host_of_gpu_;
  std::vector<std::vector<int>> switch_links_;
  std::vector<std::vector<int>> host_links_;
  std::unordered_map<std::string, int> host_by_name_;
  std::unordered_map<std::string, int> switch_by_name_;
  std::unordered_map<std::uint64_t, int> link_by_port_;  // packed endpoint -> link
};

// JSON form (docs/fabric.md). Loading validates; errors name the file and the element.
Fabric fabric_from_json(const nlohmann::json& doc);
nlohmann::json fabric_to_json(const Fabric& fabric);
Fabric load_fabric(const std::string& path);
void save_fabric(const Fabric& fabric, const std::string& path);

inline constexpr const char* kFabricFormat = "astral-fabric";
inline constexpr int kFabricVersion = 1;

}  // namespace astral::topo
