// InfiniBand fabric diagnostics: what the switch side of a cable saw, from the tools operators
// run when NCCL reports IB errors.
//   perfquery (infiniband-diags)   "# Port counters: Lid 21 port 5 (CapMask: ...)" then
//                                  "SymbolErrorCounter:..............4016"
//   ibqueryerrors                  "Errors for 0x248a... \"MF0;leaf01:MQM8700/U1\"" then
//                                  "   GUID 0x248a... port 5: [SymbolErrorCounter == 4016] [LinkDownedCounter == 3]"
//   ibdiagnet (ibdiagnet2.log)     "-E- lid=0x0017 dev=54000 leaf01/P5" then
//                                  "        symbol_error_counter            : 4016"
//   UFM event log                  "... [Port] ... Switch: leaf01 / 5 ...: Symbol Error counter ..."
// Each non-zero error counter becomes an event on the port: symbol, receive and link-integrity
// errors are BER evidence (port_ber), link-downed and link-error-recovery counts are flaps
// (port_flap), discards and waits are congestion (ib_port_congestion). In a switch's folder the
// port is that switch's; elsewhere the switch is named by the description the tool prints.
#include <string>

#include "keywords.hpp"
#include "line_parser.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

enum class IbCounterClass { none, ber, flap, congestion };

// Counter names of the IB PortCounters attribute, as perfquery/ibqueryerrors spell them
// (CamelCase) and as ibdiagnet/UFM spell them (snake_case or words).
IbCounterClass ib_counter_class(sv name) {
  std::string n = to_lower(name);
  std::string flat;
  for (char c : n)
    if (c != '_' && c != ' ') flat += c;
  if (flat.find("symbolerror") != std::string::npos || flat.find("rcverror") != std::string::npos ||
      flat.find("receiveerror") != std::string::npos || flat.find("remotephysical") != std::string::npos ||
      flat.find("linkintegrity") != std::string::npos || flat.find("excessivebufferoverrun") != std::string::npos)
    return IbCounterClass::ber;
  if (flat.find("linkdowned") != std::string::npos || flat.find("linkdown") != std::string::npos ||
      flat.find("linkerrorrecovery") != std::string::npos)
    return IbCounterClass::flap;
  if (flat.find("xmitdiscard") != std::string::npos || flat.find("xmitwait") != std::string::npos)
    return IbCounterClass::congestion;
  return IbCounterClass::none;
}

// "MF0;leaf01:MQM8700/U1" -> "leaf01"; "leaf01" stays.
std::string switch_from_description(sv desc) {
  size_t semi = desc.find(';');
  if (semi != sv::npos) desc = desc.substr(semi + 1);
  size_t colon = desc.find(':');
  if (semi != sv::npos && colon != sv::npos) desc = desc.substr(0, colon);
  desc = trim(desc);
  return std::string(take_until(desc, " "));
}

// One counter reading on the port being read (p.ib_switch / p.ib_port, set by the header line).
void counter_event(LineParser& p, sv name, int64_t value, sv body) {
  if (value <= 0) return;
  const IbCounterClass cls = ib_counter_class(name);
  if (cls == IbCounterClass::none) return;
  const bool on_switch = !p.ib_switch.empty() || p.switch_context();
  const sv kind = cls == IbCounterClass::ber ? "port_ber" : cls == IbCounterClass::flap ? "port_flap" : "ib_port_congestion";
  const Severity sev = cls == IbCounterClass::congestion ? Severity::info : Severity::error;
  Event& e = p.emit(Layer::switch_, sev, kind, on_switch ? ComponentKind::switch_port : ComponentKind::port, body);
  if (on_switch) {
    e.component.host.clear();
    e.component.switch_name = p.ib_switch.empty() ? std::string(p.host()) : p.ib_switch;
    if (!p.ib_switch.empty()) {  // a fabric-wide report about another switch
      e.host = p.ib_switch;
      e.set_attr("reported_by", std::string(p.host()));
    }
  } else {
    e.layer = Layer::kernel;  // an HCA's own counters, read on the host
  }
  e.component.port = p.ib_port;
  e.set_attr("counter", std::string(name));
  e.set_attr("value", std::to_string(value));
  if (!p.ib_lid.empty()) e.set_attr("lid", p.ib_lid);
  if (!p.ib_guid.empty()) e.set_attr("guid", p.ib_guid);
}

// "# Port counters: Lid 21 port 5 (CapMask: 0x1600)" / "# Port extended counters: ..."
Match perfquery_header(LineParser& p, sv t) {
  auto lid = int_after(t, "Lid ");
  auto port = int_after(t, " port ");
  if (!lid || !port) return Match::damaged;
  p.ib_lid = std::to_string(*lid);
  p.ib_port = std::to_string(*port);
  p.ib_guid.clear();
  p.ib_switch.clear();
  return Match::known;
}

// "   GUID 0x248a0703009b1234 port 5: [SymbolErrorCounter == 4016] [LinkDownedCounter == 3]"
Match ibqueryerrors_port(LineParser& p, sv t, sv body) {
  sv u = t.substr(5);
  p.ib_guid = std::string(take_until(u, " "));
  auto port = int_after(u, "port ");
  if (!port) return Match::damaged;
  p.ib_port = std::to_string(*port);
  for (size_t at = u.find('['); at != sv::npos; at = u.find('[', at + 1)) {
    sv item = u.substr(at + 1);
    sv name = trim(take_until(item, "=]"));
    if (!take(item, "== ")) continue;
    if (auto v = take_uint(item)) counter_event(p, name, *v, body);
  }
  return Match::known;
}

// "-E- lid=0x0017 dev=54000 leaf01/P5" (ibdiagnet names the port after the description).
Match ibdiagnet_header(LineParser& p, sv t) {
  if (auto lid = token_after(t, "lid=", " ")) p.ib_lid = std::string(*lid);
  sv last = t;
  while (true) {
    size_t sp = last.find(' ');
    if (sp == sv::npos) break;
    last = last.substr(sp + 1);
  }
  size_t slash = last.rfind("/P");
  if (slash == sv::npos || slash + 2 >= last.size() || !is_digit(last[slash + 2])) return Match::known;
  p.ib_switch = switch_from_description(last.substr(0, slash));
  p.ib_port = std::string(last.substr(slash + 2));
  p.ib_guid.clear();
  return Match::known;
}

// UFM: "... Switch: leaf01 / 5 ...: <event text>" with the event named in words.
Match ufm_line(LineParser& p, sv t, sv body) {
  auto sw = after(t, "Switch: ");
  if (!sw) return Match::none;
  sv u = *sw;
  std::string name(trim(take_until(u, "/")));
  if (!take(u, '/')) return Match::none;
  u = ltrim(u);
  auto port = take_uint(u);
  if (!port || name.empty()) return Match::none;
  std::string low = to_lower(t);
  sv kind;
  Severity sev = Severity::error;
  if (contains(low, "symbol error") || contains(low, "receive error") || contains(low, "rcv error") ||
      contains(low, "physical error") || contains(low, "integrity") || contains(low, " ber ") || contains(low, "ber "))
    kind = "port_ber";
  else if (contains(low, "flap") || contains(low, "link downed") || contains(low, "error recovery"))
    kind = "port_flap";
  else if (contains(low, "link went down") || contains(low, "link is down") || contains(low, "port state change (down)"))
    kind = "port_down";
  else if (contains(low, "link went up") || contains(low, "link is up") || contains(low, "port state change (active)"))
    kind = "port_up", sev = Severity::info;
  else
    return Match::known;
  Event& e = p.emit(Layer::switch_, sev, kind, ComponentKind::switch_port, body);
  e.component.host.clear();
  e.component.switch_name = name;
  e.host = name;
  e.set_attr("reported_by", std::string(p.host()));
  e.component.port = std::to_string(*port);
  e.set_attr("source", "ufm");
  return Match::known;
}

}  // namespace

Match recognise_ib_diagnostics(LineParser& p, sv body) {
  sv t = trim(body);
  if (starts_with(t, "# Port counters:") || starts_with(t, "# Port extended counters:")) return perfquery_header(p, t);
  if (starts_with(t, "Errors for ")) {  // ibqueryerrors: the node, then its ports
    size_t q = t.find('"');
    p.ib_switch = q == sv::npos ? std::string() : switch_from_description(t.substr(q + 1, t.rfind('"') - q - 1));
    p.ib_port.clear();
    return Match::known;
  }
  if (starts_with(t, "GUID 0x") && contains(t, " port ")) return ibqueryerrors_port(p, t, body);
  if (starts_with(t, "-E- ") && contains(t, "lid=")) return ibdiagnet_header(p, t);
  if (Match m = ufm_line(p, t, body); m != Match::none) return m;
  // Counter lines: "SymbolErrorCounter:......4016" (perfquery), "symbol_error_counter : 4016" (ibdiagnet).
  if (p.ib_port.empty()) return Match::none;
  sv u = t;
  sv name = trim(take_until(u, ":."));
  while (!u.empty() && (u[0] == '.' || u[0] == ':' || u[0] == ' ')) u.remove_prefix(1);
  if (name.empty() || u.empty() || !is_digit(u[0])) return Match::none;
  sv digits = u;
  std::optional<int64_t> v;
  if (starts_with(digits, "0x")) {
    digits.remove_prefix(2);
    if (auto h = take_hex(digits)) v = int64_t(*h);
  } else {
    v = take_uint(digits);
  }
  if (!v) return Match::damaged;
  counter_event(p, name, *v, body);
  return Match::known;
}

}  // namespace astral::monitor
