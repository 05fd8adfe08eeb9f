// Switch syslog (log-formats.md §4.6): SONiC (orchagent, portmgrd, xcvrd, syncd, sairedis
// records), Cumulus (Linux netlink / `ip monitor link`, swpN ports) and Onyx (EthA/B ports),
// plus the Arista/IOS-XR UPDOWN forms. The reference has no verbatim Cumulus or Onyx flap line,
// so those are recognised by structure (a port name and a state phrase) rather than by one
// exact wording: port up/down, flaps, FEC/BER/SER errors, transceiver alarms, reboots.
#include <string>

#include "line_parser.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

// Finds a switch port name in the line; empty when there is none.
sv find_port(sv s) {
  struct Anchor {
    sv word;
    bool needs_slash;  // Eth1/2 style
  };
  static const Anchor anchors[] = {
      {"Ethernet", false}, {"Eth", true},  {"swp", false},         {"IB", true},
      {"ethernet ", true}, {"Port ", false}, {"HundredGigE", true}, {"TenGigE", true},
      {"FourHundredGigE", true}, {"TwoHundredGigE", true}, {"FortyGigE", true}};
  sv best;
  size_t best_at = sv::npos;
  for (const Anchor& a : anchors) {
    size_t from = 0;
    while (true) {
      size_t at = find(s, a.word, from);
      if (at == sv::npos || at > best_at) break;
      from = at + 1;
      if (at > 0 && is_alnum(s[at - 1])) continue;  // inside another word
      size_t i = at + a.word.size();
      size_t digits_start = i;
      bool slash = false;
      while (i < s.size() && (is_digit(s[i]) || s[i] == '/' || (s[i] == 's' && a.word == "swp"))) {
        slash = slash || s[i] == '/';
        ++i;
      }
      if (i == digits_start || !is_digit(s[digits_start])) continue;
      if (a.needs_slash && !slash) continue;
      if (i < s.size() && is_alpha(s[i]) && a.word != "Port ") continue;  // e.g. "Eth1/2abc"
      if (a.word == "Port ") {
        // SAI logical port ids ("Port 12500") cannot be joined to the cabling; skip them.
        if (i - digits_start > 3) continue;
      }
      best = s.substr(at, i - at);
      best_at = at;
      break;
    }
  }
  return best;
}

enum class State { none, down, up };

State port_state(const std::string& low) {
  static const char* downs[] = {"from up to down", "changed state to down", "link down", "link is down",
                                "status down", "status to down", "state down", "went down", "is down",
                                "carrier lost", "lost carrier", "no-carrier", "oper down", "link failure",
                                "operational state down", "status: down", "state: down", "link_down"};
  static const char* ups[] = {"from down to up", "changed state to up", "link up", "link is up", "status up",
                              "status to up", "state up", "came up", "is up", "carrier on", "oper up",
                              "status: up", "state: up", "link_up"};
  for (const char* d : downs)
    if (contains(low, d)) return State::down;
  for (const char* u : ups)
    if (contains(low, u)) return State::up;
  if (contains(low, "host interface")) {  // SONiC "Set operation status DOWN to host interface"
    if (contains(low, " down ")) return State::down;
    if (contains(low, " up ")) return State::up;
  }
  return State::none;
}

bool is_optic_text(const std::string& low) {
  static const char* words[] = {"temperature", "rx power", "rxpower", "rx1power", "rx2power", "rx3power",
                                "rx4power", "tx power", "txpower", "tx bias", "txbias", "voltage",
                                "transceiver", "xcvr", "optic", "loss of signal", "rx los", "sfp", "qsfp",
                                "module"};
  for (const char* w : words)
    if (contains(low, w)) return true;
  return false;
}

bool is_ber_text(const std::string& low) {
  static const char* words[] = {" ber", "ber ", "_ber", "fec", "symbol error", "crc", "high_ser", " ser ",
                                "phy error", "bit error", "link integrity", "pcs error", "code_group",
                                "codeword", "errored seconds"};
  for (const char* w : words)
    if (contains(low, w)) return true;
  return false;
}

bool is_reboot_text(const std::string& low) {
  static const char* words[] = {"reboot", "rebooting", "linux version", "system boot", "system is going down",
                                "shutting down", "power cycle", "watchdog reset", "system restart",
                                "system start", "booting"};
  for (const char* w : words)
    if (contains(low, w)) return true;
  return false;
}

// The state after " to " in "status change from A to B" (the current state).
std::string final_state(const std::string& low) {
  size_t from = low.find(" from ");
  size_t to = low.rfind(" to ");
  if (from == std::string::npos || to == std::string::npos || to < from) return low;
  return low.substr(to + 4);
}

Event& port_event(LineParser& p, Severity s, sv kind, sv port, sv body) {
  Event& e = p.emit(Layer::switch_, s, kind, ComponentKind::switch_port, body);
  e.component.switch_name = std::string(p.host());
  e.component.host.clear();
  e.component.port = std::string(port);
  return e;
}

// sairedis recording: "2025-04-07.19:00:57.010085|n|port_state_change|[{...}]|"
Match sairedis(LineParser& p, sv body) {
  if (body.size() < 27 || body[10] != '.') return Match::damaged;
  std::string stamp(body.substr(0, 26));
  stamp[10] = 'T';
  if (auto t = parse_rfc3339(stamp)) p.set_line_time(*t, true, false, 0.001);
  auto state = token_after(body, "\"port_state\":\"", "\"");
  auto oid = token_after(body, "\"port_id\":\"", "\"");
  auto status = token_after(body, "\"port_error_status\":\"", "\"");
  if (!state || !oid) return Match::damaged;
  bool down = contains(*state, "DOWN");
  Event& e = port_event(p, down ? Severity::error : Severity::info, down ? "port_down" : "port_up", *oid, body);
  if (status) {
    e.set_attr("error_status", std::string(*status));
    std::string low = to_lower(*status);
    if (is_ber_text(low) || contains(low, "high_ber") || contains(low, "signal_local")) {
      Event& b = port_event(p, Severity::error, "port_ber", *oid, body);
      b.set_attr("error_status", std::string(*status));
    }
  }
  return Match::known;
}

// "'key': 'value'" inside the Python dict xcvrd prints.
std::string fvp_value(const std::string& low, sv key) {
  std::string k = "'" + std::string(key) + "': '";
  size_t at = low.find(k);
  if (at == std::string::npos) return "";
  size_t start = at + k.size(), end = low.find('\'', start);
  return end == std::string::npos ? "" : low.substr(start, end - start);
}

// SONiC xcvrd's "handle_port_update_event() : op=SET DB:STATE_DB Table:PORT_TABLE fvp {...}": a
// port's whole record, most of it healthy (its 'fec' or 'no fault' fields say nothing wrong).
// Only the state fields count: admin_status down (CONFIG_DB) or netdev_oper_status down.
Match xcvrd_update(LineParser& p, sv port, const std::string& low, sv body) {
  const std::string admin = fvp_value(low, "admin_status");
  const std::string oper = fvp_value(low, "netdev_oper_status");
  if (admin == "down" && contains(low, "db:config_db")) {
    port_event(p, Severity::warning, "port_admin_down", port, body);
  } else if (oper == "down" && admin != "down") {
    port_event(p, Severity::error, "port_down", port, body);
  }
  return Match::known;
}

}  // namespace

Match recognise_switch(LineParser& p, sv body) {
  if (contains(body, "|port_state_change|")) return sairedis(p, body);
  sv port = find_port(body);
  const bool sw = p.switch_context();
  if (port.empty() && !sw) return Match::none;
  std::string low = to_lower(body);
  if (!port.empty()) {
    if (contains(low, "handle_port_update_event") || contains(low, " fvp {")) return xcvrd_update(p, port, low, body);
    // Transceiver alarms and BER come first: their text often also says "down"/"high".
    if (is_optic_text(low) && (contains(low, "alarm") || contains(low, "warning") || contains(low, "low") ||
                               contains(low, "high") || contains(low, "fault") || contains(low, "loss of signal") ||
                               contains(low, "los ") || contains(low, "out of range") || contains(low, "threshold"))) {
      std::string now = final_state(low);
      Severity s = (contains(now, "normal") || contains(now, "clear") || contains(now, "recover"))
                       ? Severity::info
                   : (contains(now, "alarm") || contains(now, "fault") || contains(now, "loss of signal") ||
                      contains(now, "los"))
                       ? Severity::error
                       : Severity::warning;
      Event& e = port_event(p, s, "optic_alarm", port, body);
      if (contains(low, "power")) e.set_attr("measure", contains(low, "tx") ? "tx_power" : "rx_power");
      else if (contains(low, "temperature")) e.set_attr("measure", "temperature");
      else if (contains(low, "voltage")) e.set_attr("measure", "voltage");
      else if (contains(low, "bias")) e.set_attr("measure", "tx_bias");
      return Match::known;
    }
    if (is_ber_text(low)) {
      bool bad = contains(low, "uncorrect") || contains(low, "high") || contains(low, "exceed") ||
                 contains(low, "threshold") || contains(low, "alarm") || contains(low, "error");
      port_event(p, bad ? Severity::error : Severity::warning, "port_ber", port, body);
      return Match::known;
    }
    if (contains(low, "flap")) {
      port_event(p, Severity::error, "port_flap", port, body);
      return Match::known;
    }
    State st = port_state(low);
    if (st != State::none) {
      bool admin = contains(low, "admin status") || contains(low, "admin state") || contains(low, "administrat");
      sv kind = admin ? (st == State::down ? "port_admin_down" : "port_admin_up")
                      : (st == State::down ? "port_down" : "port_up");
      port_event(p, st == State::down ? (admin ? Severity::warning : Severity::error) : Severity::info, kind,
                 port, body);
      return Match::known;
    }
  }
  if (!sw) return port.empty() ? Match::none : Match::known;
  // Switch-wide lines.
  if (is_reboot_text(low) && !contains(low, "reboot-cause: none")) {
    Event& e = p.emit(Layer::switch_, Severity::warning, "switch_reboot", ComponentKind::switch_, body);
    e.component.switch_name = std::string(p.host());
    e.component.host.clear();
    return Match::known;
  }
  if ((contains(low, "psu") || contains(low, "power supply") || contains(low, "fan")) &&
      (contains(low, "fail") || contains(low, "fault") || contains(low, "below minimal") ||
       contains(low, "unresponsive") || contains(low, "absent") || contains(low, "not present"))) {
    Event& e = p.emit(Layer::switch_, Severity::warning, "switch_hw_alarm", ComponentKind::switch_, body);
    e.component.switch_name = std::string(p.host());
    e.component.host.clear();
    return Match::known;
  }
  // Logical-port state lines ("Port 12500 changed state to down") and the rest of switch
  // syslog are understood but carry nothing to join on.
  return port_state(low) != State::none || !p.prefix().program.empty() ? Match::known : Match::none;
}

}  // namespace astral::monitor
