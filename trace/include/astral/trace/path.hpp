#pragma once
// The fabric path of one net connection end, as the transport programmed it: which port, plane,
// SL, TC and GID its QPs use and, per QP, the RoCE flow label (the UDP source port mlx5 derives
// from it is the ECMP hash input) or the IB DLID. Written with the connection's metadata entry
// (Writer::add_connection) and read back in ConnectionRecord::path, so the monitor can map a
// connection to the links it crossed. Each end records the packets it sends: on the sending end
// the data direction, on the receiving end the direction of its FIFO writes and acks.
// Layout on disk: docs/trace-format.md, "Connection path".
#include <cstdint>
#include <string>
#include <vector>

namespace astral::trace {

inline constexpr size_t kMaxPathQps = 16;  // more are not recorded (NetPath::qps_dropped says so)

struct NetPathQp {
  uint32_t qp = 0;               // index within the connection
  uint32_t flow_label = 0;       // RoCE GRH flow label (20 bits); 0 on IB and with policy off
  uint16_t udp_sport = 0;        // RoCE: the UDP source port mlx5 derives; 0 = hashed from QPNs
  uint16_t dlid = 0;             // IB: destination LID (peer's base LID + path_index); 0 on RoCE
  uint32_t path_index = 0;       // IB: the path within the peer's LMC
  int32_t uplink_link = -1;      // fabric link of the first ECMP stage (hash model), -1 unknown
  std::string uplink;            // that link's direction ("r0-00:33 -> s0-00:1"), "" unknown
  std::string device;            // a fused device (vNIC): the member port the QP is on, else ""
  bool operator==(const NetPathQp&) const = default;
};

struct NetPath {
  std::string transport;   // "ib" (the only transport with a path today)
  std::string link_layer;  // "IB" | "RoCE"
  std::string policy;      // ASTRAL_IB_PATHS: "spread" | "pinned" | "off"
  std::string source;      // which rule chose the labels ("hash model: disjoint uplinks", ...)
  std::string note;        // why a fallback applied, or ""
  int32_t port = 0;        // local verbs port (1-based)
  int32_t plane = -1;
  int32_t rail = -1;
  int32_t sl = 0;
  int32_t tc = 0;
  int32_t gid_index = -1;  // -1 on IB
  std::vector<NetPathQp> qps;
  uint32_t qps_dropped = 0;  // QPs beyond kMaxPathQps the writer could not record
  bool operator==(const NetPath&) const = default;
};

// One JSON object, keys in this order (the shape docs/trace-format.md documents):
// {"transport","link_layer","policy","source","port","plane","rail","sl","tc","gid_index",
//  "qps":[{"qp","flow_label","udp_sport","dlid","path_index","uplink"?,"uplink_link"?,"device"?}],
//  "note"?, "qps_dropped"?}
std::string path_to_json(const NetPath& path);

}  // namespace astral::trace
