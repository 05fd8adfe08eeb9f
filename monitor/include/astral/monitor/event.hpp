#pragma once
// The normalised event: what every log source becomes (docs/event-model.md is the contract).
// One Event per meaningful log line (or per record of a structured dump); parsers fill what the
// source says and leave the rest empty. Times are UTC microseconds since the epoch; a source
// whose clock or year/zone is uncertain says so in time_confidence_s.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace astral::monitor {

enum class Layer : uint8_t { facility, bmc, switch_, kernel, nccl, pytorch, astral };
enum class Severity : uint8_t { debug, info, warning, error, critical };
enum class ComponentKind : uint8_t {
  none, gpu, nic, port, link, switch_port, optic, switch_, host, process,
  psu, pdu, rectifier, cdu, pump, rack, cooling_loop, power_shelf, feed
};

std::string_view to_string(Layer);
std::string_view to_string(Severity);
std::string_view to_string(ComponentKind);
std::optional<Layer> parse_layer(std::string_view);
std::optional<Severity> parse_severity(std::string_view);
std::optional<ComponentKind> parse_component_kind(std::string_view);

// The part an event is about, named as the source names it. `switch_name` is `switch` in JSON.
struct Component {
  ComponentKind kind = ComponentKind::none;
  std::string host;
  std::string device;       // GPU PCI address, NIC (mlx5_2), netdev, BMC sensor ...
  std::string switch_name;
  std::string port;         // switch port (Ethernet112, swp3, Eth1/12) or NIC port number
  int rank = -1;
  bool operator==(const Component&) const = default;
};

// Join keys (DESIGN.md "Join keys"). Unknown numeric keys are -1.
struct Keys {
  std::optional<uint64_t> comm_hash;
  int64_t seq = -1;
  int rank = -1;
  int peer = -1;
  std::string process_group;
  int channel = -1;
  std::string request_id;
  int xid = -1;
};

inline constexpr int64_t kUnknownTime = INT64_MIN;

struct Event {
  int64_t time_us = kUnknownTime;  // UTC microseconds since the epoch
  double time_confidence_s = 0;    // how far the true time may be from time_us
  std::string host;
  Layer layer = Layer::kernel;
  Component component;
  Severity severity = Severity::info;
  std::string kind;     // snake_case: xid, link_down, retry_exceeded, watchdog_timeout ...
  std::string message;  // the original line (without its collector prefix) or a summary
  Keys keys;
  // Kind-specific facts (peer_ip, hca, op_type, last_enqueued, pid ...), as strings.
  std::vector<std::pair<std::string, std::string>> attrs;
  uint32_t file = 0;  // index into the bundle's file table
  uint32_t line = 0;  // 1-based; 0 for records of structured files without lines

  bool has_time() const { return time_us != kUnknownTime; }
  std::string_view attr(std::string_view key) const;
  int64_t attr_int(std::string_view key, int64_t fallback = -1) const;
  void set_attr(std::string_view key, std::string value);
};

// RFC 3339 UTC with microseconds: 2026-11-29T22:42:00.123456Z. Unknown time -> "".
std::string format_time(int64_t time_us);
// Accepts RFC 3339 / ISO 8601 with Z or an offset, with or without fraction; nullopt if not.
std::optional<int64_t> parse_rfc3339(std::string_view);

// JSON in the event model; `file_name` fills source.file.
nlohmann::json to_json(const Event&, std::string_view file_name);
// Reads one event-model object; throws std::runtime_error naming the bad field.
Event event_from_json(const nlohmann::json&);

}  // namespace astral::monitor
