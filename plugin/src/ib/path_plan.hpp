#pragma once
// The same-rail path plan of one IB/RoCE connection direction: which GID, SL and TC its QPs use and,
// per QP, the RoCE flow label (mlx5 turns it into the UDP source port, the input of every switch's
// ECMP hash) or the IB destination-LID path index within the peer's LMC. NCCL sets flow label 0, so
// the source port is a hash of the QP numbers and ECMP places each flow at random; Astral chooses.
//
// Pure logic, no verbs calls: the transport fills a PathRequest from its devices, calls plan_paths,
// sets grh.flow_label / dlid at RTR, and logs format_plan (INFO) and plan_to_json (trace connection
// event). Each end plans the direction it sends (reversed() gives the other one), so both ends can
// compute, and check, both halves from the same request.
//
// Policies (ASTRAL_IB_PATHS):
//   spread  distinct labels (distinct UDP source ports) per QP, varied per connection id;
//   pinned  with a fabric model (ASTRAL_FABRIC) that carries a hash model: labels searched so the
//           flows of one rail leaving one leaf take disjoint uplinks under the simulator's own hash
//           (topo::PathSelector::walk); otherwise labels fixed per (source, destination, QP) and
//           spread evenly over the source-port space;
//   off     NCCL's behaviour: flow label 0, path index 0.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astral/trace/path.hpp"

namespace astral::topo {
class Fabric;
class Router;
class PathSelector;
}  // namespace astral::topo

namespace astral::plugin::ib {

enum class PathPolicy { kSpread, kPinned, kOff };
enum class LinkLayer { kInfiniBand, kRoCE };

inline constexpr PathPolicy kDefaultPathPolicy = PathPolicy::kSpread;
inline constexpr int kMaxPlannedQps = 128;       // NCCL_IB_QPS_PER_CONNECTION's ceiling
inline constexpr std::uint32_t kFlowLabelMask = 0xFFFFF;  // 20 bits

// ASTRAL_IB_PATHS. Null or empty: kDefaultPathPolicy. A bad value: nullopt and *error set to one
// line naming the variable and the accepted values (the caller WARNs it and uses the default).
std::optional<PathPolicy> parse_path_policy(const char* text, std::string* error);
std::string_view policy_name(PathPolicy policy);  // "spread" | "pinned" | "off"
std::string_view link_layer_name(LinkLayer layer);  // "IB" | "RoCE"

// The kernel's rdma_flow_label_to_udp_sport (mlx5 since Linux 5.7): the low 14 bits XOR bits 14..19,
// OR 0xC000. Label 0 is not mapped (the kernel then hashes the QP numbers instead).
std::uint16_t flow_label_to_udp_sport(std::uint32_t flow_label);
// A non-zero label that mlx5 maps to `udp_sport` (0xC000..0xFFFF).
std::uint32_t flow_label_for_udp_sport(std::uint16_t udp_sport);

// A switch hash model, read from the fabric file's optional top-level "hash_model" object
// ({"seed": 1, "polarisation": 0.0}, the fields `astral fabric sim`/`ecmp-table` take).
struct HashModel {
  std::uint64_t seed = 1;
  double polarisation = 0.0;
};

// A loaded fabric (ASTRAL_FABRIC, the JSON `astral fabric generate` writes) with its routing
// tables, built once per process and shared by every plan.
class FabricModel {
 public:
  ~FabricModel();
  FabricModel(const FabricModel&) = delete;
  FabricModel& operator=(const FabricModel&) = delete;

  const topo::Fabric& fabric() const { return *fabric_; }
  const topo::Router& router() const { return *router_; }
  // Null without a hash model in the file.
  const topo::PathSelector* selector() const { return selector_.get(); }
  const std::optional<HashModel>& hash_model() const { return hash_; }
  bool rail_only() const;  // kind "rail-only": no path between rails except NVLink
  const std::string& path() const { return path_; }

  // Null on failure, *error one line naming the file and what is wrong.
  static std::shared_ptr<const FabricModel> load(const std::string& path, std::string* error);
  static std::shared_ptr<const FabricModel> from_json(const nlohmann::json& doc, std::string path,
                                                      std::string* error);

 private:
  FabricModel() = default;
  std::string path_;
  std::unique_ptr<topo::Fabric> fabric_;
  std::unique_ptr<topo::Router> router_;
  std::unique_ptr<topo::PathSelector> selector_;
  std::optional<HashModel> hash_;
};

// One end of the connection, as the transport's device table knows it.
struct PathEndpoint {
  std::string host;  // host name as the fabric file names it
  int rail = 0;
  int plane = 0;
  int port = 1;      // verbs port number (1-based)
  LinkLayer link_layer = LinkLayer::kRoCE;
  std::uint16_t base_lid = 0;  // IB: the port's LID; it owns base_lid .. base_lid + 2^lmc - 1
  int lmc = 0;                 // IB: 0..7
  int gid_index = -1;          // RoCE: the GID index chosen for this port (required)
};

struct PathRequest {
  PathPolicy policy = kDefaultPathPolicy;
  PathEndpoint local;   // the sending end of this direction
  PathEndpoint remote;
  int nqps = 1;         // 1..kMaxPlannedQps
  int sl = 0;           // 0..15
  int tc = 0;           // 0..255 (DSCP << 2)
  std::uint64_t connection_id = 0;  // identical at both ends; varies spread labels
  const FabricModel* fabric = nullptr;  // optional
};

// The request for the other direction of the same connection.
PathRequest reversed(const PathRequest& request);

struct QpPath {
  int qp = 0;
  std::uint32_t flow_label = 0;  // RoCE; 0 on IB and when off
  std::uint16_t udp_sport = 0;   // what mlx5 puts on the wire for that label; 0 = hashed from QPNs
  std::uint16_t dlid = 0;        // IB: remote base LID + path_index; 0 on RoCE
  int path_index = 0;            // IB: < 2^remote.lmc
  int uplink = -1;               // hash model: the fabric link of the first ECMP stage, -1 unknown
  std::string uplink_name;       // hash model: that link's direction, "r0-00:33 -> s0-00:1"
  std::string device;            // a fused device (vNIC): the member port it leaves from, else ""
};

inline constexpr const char* kSourceHashModel = "hash model: disjoint uplinks";
inline constexpr const char* kSourceDeterministic = "deterministic per (src,dst,qp)";
inline constexpr const char* kSourceSpread = "spread";
inline constexpr const char* kSourceOff = "off";

struct PathPlan {
  PathPolicy policy = kDefaultPathPolicy;
  LinkLayer link_layer = LinkLayer::kRoCE;
  int port = 1;   // local verbs port
  int plane = 0;  // local plane
  int rail = 0;   // local rail
  int sl = 0;
  int tc = 0;
  int gid_index = -1;  // -1 on IB (no GRH within a subnet)
  std::vector<QpPath> qps;
  std::string source;  // one of kSource*: which rule chose the labels
  std::string note;    // why a fallback applied ("host 'x' is not in fabric f.json"), or empty
  std::string error;   // non-empty: refuse the connection; one WARN line (cross-rail, bad input)
  bool ok() const { return error.empty(); }
};

PathPlan plan_paths(const PathRequest& request);

// "path plan pinned (hash model: disjoint uplinks) RoCE alpha rail 0 plane 0 port 1 -> beta rail 0
//  plane 0: gid 3 sl 0 tc 106; qp0 label 0x0c001 sport 49153, ..." for the INFO log.
std::string format_plan(const PathPlan& plan, const PathRequest& request);
// The plan as the trace's connection record keeps it (transport "ib").
trace::NetPath to_trace_path(const PathPlan& plan);
// trace::path_to_json of to_trace_path, plus "error" when the plan refuses the connection.
nlohmann::json plan_to_json(const PathPlan& plan);

}  // namespace astral::plugin::ib
