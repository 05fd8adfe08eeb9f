// InfiniBand fabric diagnostics: what the switch side of a cable saw, from the tools operators
// run when NCCL reports IB errors. The print formats, with where each was checked
// (tests/fixtures/astral/monitor/ib-tools/README.md has the fixtures and their sources):
//   perfquery (infiniband-diags)   "# Port counters: Lid 21 port 5 (CapMask: 0x1600)" then
//                                  "SymbolErrorCounter:..............4016"
//   ibqueryerrors (infiniband-diags, ibqueryerrors.c print_results)
//                                  "Errors for 0x248a0703009b1234 \"MF0;leaf01:MQM8700/U1\"" (switch)
//                                  "Errors for \"node01 HCA-1\"" (CA), then
//                                  "   GUID 0x248a0703009b1234 port 5: [SymbolErrorCounter == 4016]"
//                                  ("[X == 4016 (4.016K)]" with extended counters, "port ALL:")
//   ibdiagnet2.log                 "-E- lid=0x0008 dev=51000 Se468a303005527c3/Ne468a303005527c0/P27"
//                                  (system GUID / node GUID / port) or a node description before
//                                  "/P27"; then "port_rcv_errors : 65535 (overflow)"
//   ibdiagnet2.db_csv              START_NODES / START_PM_INFO tables, columns named by a header
//                                  (NodeGUID, PortGUID, PortNumber, SymbolErrorCounter, ...)
//   UFM event log                  "2016-10-17 15:56:33.245 [5744] [112] WARNING [Hardware] IBPort
//                                  [default(34) / Switch: leaf01 / NA / 16] [dev_id: 248a...]: text"
// Each non-zero error counter becomes an event on the port: symbol, receive and link-integrity
// errors are BER evidence (port_ber), link-downed and link-error-recovery counts are flaps
// (port_flap), discards and waits are congestion (ib_port_congestion). In a switch's folder the
// port is that switch's; elsewhere the switch is named by the description the tool prints, or by
// GUID (attr "guid"), which the bundle turns into the fabric's name for it.
#include <string>

#include "astral/monitor/fabric_graph.hpp"
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
    if (c != '_' && c != ' ' && c != '-') flat += c;
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

// The port whose counters follow names a switch by GUID only: "0x<guid>" stands for the switch
// until the bundle names it from the fabric.
void set_switch_by_guid(LineParser& p, sv guid) {
  p.ib_guid = canonical_guid(guid);
  p.ib_switch = p.ib_guid.empty() ? std::string() : "0x" + p.ib_guid;
}

// One counter reading on the port being read (p.ib_switch / p.ib_port, set by the header line;
// p.ib_ca_host for an HCA's port in a fabric-wide report).
void counter_event(LineParser& p, sv name, int64_t value, sv body) {
  if (value <= 0) return;
  const IbCounterClass cls = ib_counter_class(name);
  if (cls == IbCounterClass::none) return;
  const bool on_switch = p.ib_ca_host.empty() && (!p.ib_switch.empty() || p.switch_context());
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
    e.layer = Layer::kernel;  // an HCA's own counters
    if (!p.ib_ca_host.empty()) {  // read fabric-wide (ibqueryerrors on the SM host)
      e.host = e.component.host = p.ib_ca_host;
      e.component.device = p.ib_ca_nic;
      e.set_attr("reported_by", std::string(p.host()));
    }
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
  p.ib_ca_host.clear();
  return Match::known;
}

// "Errors for 0x248a0703009b1234 \"MF0;leaf01:MQM8700/U1\"" (a switch: its GUID, then its
// description) or "Errors for \"exa2dbadm01 S 192.168.11.110,192.168.11.111 HCA-1\"" (a CA:
// host name first, the HCA last). "Data Counters for ..." heads the same blocks under -D.
Match ibqueryerrors_node(LineParser& p, sv t) {
  const size_t q = t.find('"');
  const sv desc = q == sv::npos ? sv() : t.substr(q + 1, t.rfind('"') - q - 1);
  const sv before = q == sv::npos ? t : t.substr(0, q);
  p.ib_port.clear();
  p.ib_lid.clear();
  p.ib_ca_host.clear();
  p.ib_ca_nic.clear();
  if (auto guid = token_after(before, "0x", " ")) {
    set_switch_by_guid(p, *guid);
    if (std::string name = switch_from_description(desc); desc.find(';') != sv::npos && !name.empty())
      p.ib_switch = name;  // "MF0;leaf01:..." names the switch; a factory default does not
    return Match::known;
  }
  p.ib_switch.clear();
  p.ib_guid.clear();
  sv d = desc;
  p.ib_ca_host = std::string(take_word(d));
  sv nic = trim(d);
  if (size_t sp = nic.rfind(' '); sp != sv::npos) nic = nic.substr(sp + 1);
  p.ib_ca_nic = std::string(nic);
  return Match::known;
}

// "   GUID 0x248a0703009b1234 port 5: [SymbolErrorCounter == 4016] [LinkDownedCounter == 3]"
// "   GUID 0x248a0703009b1234 port 5: [SymbolErrorCounter == 4016 (4.016K)]" (extended counters)
// "   GUID 0x248a0703009b1234 port ALL: [...]" is a switch's sum over its ports: no port to name.
Match ibqueryerrors_port(LineParser& p, sv t, sv body) {
  sv u = t.substr(5);
  const std::string port_guid(take_until(u, " "));
  if (p.ib_switch.empty() && p.ib_ca_host.empty()) set_switch_by_guid(p, port_guid);
  if (contains(u, "port ALL:")) return Match::known;
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

// "-E- lid=0x0008 dev=51000 Se468a303005527c3/Ne468a303005527c0/P27" (system GUID, node GUID,
// port) or "-E- lid=0x0017 dev=54000 leaf01/P5" (a node description before the port).
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
  p.ib_port = std::string(last.substr(slash + 2));
  p.ib_ca_host.clear();
  const sv name = last.substr(0, slash);
  if (size_t n = name.rfind("/N"); n != sv::npos && !canonical_guid(name.substr(n + 2)).empty()) {
    set_switch_by_guid(p, name.substr(n + 2));
    return Match::known;
  }
  p.ib_switch = switch_from_description(name);
  p.ib_guid.clear();
  return Match::known;
}

}  // namespace

Match recognise_ib_tables(LineParser& p, sv t, sv body);
Match recognise_ufm_event(LineParser& p, sv t, sv body);

Match recognise_ib_diagnostics(LineParser& p, sv body) {
  sv t = trim(body);
  if (Match m = recognise_ib_tables(p, t, body); m != Match::none) return m;
  if (starts_with(t, "# Port counters:") || starts_with(t, "# Port extended counters:")) return perfquery_header(p, t);
  if (starts_with(t, "Errors for ") || starts_with(t, "Data Counters for ")) return ibqueryerrors_node(p, t);
  if (starts_with(t, "GUID 0x") && contains(t, " port ")) return ibqueryerrors_port(p, t, body);
  if (starts_with(t, "Link info:") || starts_with(t, "## ")) return Match::known;  // ibqueryerrors -p, summary
  if (starts_with(t, "-E- ") && contains(t, "lid=")) return ibdiagnet_header(p, t);
  if (Match m = recognise_ufm_event(p, t, body); m != Match::none) return m;
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

// Used by parse_ib_tables.cpp for the db_csv PM_INFO rows.
void ib_counter_event(LineParser& p, sv name, int64_t value, sv body) { counter_event(p, name, value, body); }
std::string ib_switch_from_description(sv desc) { return switch_from_description(desc); }

}  // namespace astral::monitor
