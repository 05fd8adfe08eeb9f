// Fault-injection commands: SOFTHCA_FAULTS rules at start-up, datagrams on the control socket, or
// softhca_control() in-process. The format is in README.md.
#include <nlohmann/json.hpp>

#include "internal.hpp"

namespace softhca {
namespace {

using nlohmann::json;

struct CommandError {
  std::string what;
};

Command parse_one(const json& j, const std::string& where) {
  if (!j.is_object()) throw CommandError{where + ": expected an object"};
  static const std::map<std::string, FaultKind> kinds = {
      {"qp_error", FaultKind::qp_error},       {"link_drop", FaultKind::link_drop},
      {"link_restore", FaultKind::link_restore}, {"port_down", FaultKind::port_down},
      {"port_up", FaultKind::port_up},         {"device_fatal", FaultKind::device_fatal},
      {"kill", FaultKind::kill},               {"last_first", FaultKind::last_first},
      {"in_order", FaultKind::in_order}};
  if (!j.contains("fault") || !j.at("fault").is_string()) throw CommandError{where + ".fault: expected a string"};
  auto it = kinds.find(j.at("fault").get<std::string>());
  if (it == kinds.end())
    throw CommandError{where + ".fault: unknown (qp_error, link_drop, link_restore, port_down, port_up, device_fatal, kill, last_first, in_order)"};
  Command c;
  c.kind = it->second;
  for (const auto& [key, value] : j.items()) {
    if (key == "fault") continue;
    if (key == "device") {
      if (!value.is_string()) throw CommandError{where + ".device: expected a string"};
      c.device = value.get<std::string>();
      continue;
    }
    if (key != "port" && key != "qpn" && key != "after_msgs") throw CommandError{where + "." + key + ": unknown field"};
    if (!value.is_number_unsigned()) throw CommandError{where + "." + key + ": expected a non-negative integer"};
    uint64_t n = value.get<uint64_t>();
    if (key == "port") {
      if (n < 1 || n > 255) throw CommandError{where + ".port: out of range [1, 255]"};
      c.port = static_cast<int>(n);
    } else if (key == "qpn") {
      if (n > 0xffffff) throw CommandError{where + ".qpn: out of range (24 bits)"};
      c.qpn = static_cast<uint32_t>(n);
    } else {
      c.after_msgs = n;
    }
  }
  bool needs_device = c.kind == FaultKind::link_drop || c.kind == FaultKind::link_restore ||
                      c.kind == FaultKind::port_down || c.kind == FaultKind::port_up ||
                      c.kind == FaultKind::device_fatal;
  if (needs_device && c.device.empty()) throw CommandError{where + ".device: required for this fault"};
  if (c.kind == FaultKind::qp_error && c.qpn == 0) throw CommandError{where + ".qpn: required for qp_error"};
  return c;
}

}  // namespace

std::optional<std::vector<Command>> parse_commands(std::string_view text, std::string& error) {
  try {
    json j = json::parse(text);
    std::vector<Command> out;
    if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) out.push_back(parse_one(j[i], "faults[" + std::to_string(i) + "]"));
    } else {
      out.push_back(parse_one(j, "fault"));
    }
    return out;
  } catch (const CommandError& e) {
    error = e.what;
  } catch (const json::exception& e) {
    error = std::string("faults: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace softhca
