// ibdiagnet2.db_csv tables and UFM event-log lines (the rest of the IB tools are in parse_ib.cpp).
//   db_csv: "START_NODES" / header / rows / "END_NODES", then "START_PM_INFO" / header / rows
//   ("NodeGUID,PortGUID,PortNumber,LinkDownedCounter,...,SymbolErrorCounter,...") / "END_PM_INFO".
//   Columns are found by their header names, never by position (ibdiagnet versions add columns).
//   UFM: "<time> [<entry>] [<code>] <LEVEL> [<topic>] <object type> [<object>] [dev_id: <guid>]: <text>"
//   where the object is "<partition> / Switch: <name> / [<module> /] <port>" and the port is a
//   number ("16") or a cage label ("1/17/1", NDR split ports: IB port 2*(17-1)+1 = 33).
#include <string>

#include "astral/monitor/fabric_graph.hpp"
#include "line_parser.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

void ib_counter_event(LineParser& p, sv name, int64_t value, sv body);
std::string ib_switch_from_description(sv desc);

namespace {

std::vector<sv> split_db_csv_row(sv row) {
  std::vector<sv> out;
  while (true) {
    size_t c = row.find(',');
    sv cell = trim(row.substr(0, c));
    if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = cell.substr(1, cell.size() - 2);
    out.push_back(cell);
    if (c == sv::npos) return out;
    row = row.substr(c + 1);
  }
}

int db_csv_column(const LineParser& p, sv name) {
  for (size_t i = 0; i < p.ib_columns.size(); ++i)
    if (p.ib_columns[i] == name) return int(i);
  return -1;
}

// A START_NODES row: the node's description, by GUID, for the PM_INFO rows that follow.
void db_csv_node(LineParser& p, const std::vector<sv>& cells) {
  const int guid = db_csv_column(p, "NodeGUID"), desc = db_csv_column(p, "NodeDesc"), type = db_csv_column(p, "NodeType");
  if (guid < 0 || desc < 0 || size_t(std::max(guid, desc)) >= cells.size()) return;
  if (type >= 0 && size_t(type) < cells.size() && cells[size_t(type)] != "2") return;  // 2: switch
  p.ib_node_desc[canonical_guid(cells[size_t(guid)])] = std::string(cells[size_t(desc)]);
}

// A START_PM_INFO row: every non-zero error counter of the port.
void db_csv_counters(LineParser& p, const std::vector<sv>& cells, sv body) {
  const int guid = db_csv_column(p, "NodeGUID"), port = db_csv_column(p, "PortNumber");
  if (guid < 0 || port < 0 || size_t(std::max(guid, port)) >= cells.size()) return;
  const std::string node = canonical_guid(cells[size_t(guid)]);
  if (node.empty()) return;
  p.ib_ca_host.clear();
  p.ib_guid = node;
  p.ib_lid.clear();
  auto desc = p.ib_node_desc.find(node);
  if (!p.ib_node_desc.empty() && desc == p.ib_node_desc.end()) return;  // not a switch
  const std::string described = desc == p.ib_node_desc.end() ? std::string() : ib_switch_from_description(desc->second);
  p.ib_switch = desc != p.ib_node_desc.end() && desc->second.find(';') != std::string::npos && !described.empty()
                    ? described
                    : "0x" + node;
  p.ib_port = std::string(cells[size_t(port)]);
  for (size_t i = 0; i < cells.size() && i < p.ib_columns.size(); ++i) {
    if (int(i) == guid || int(i) == port) continue;
    sv v = cells[i];
    if (v.empty() || !is_digit(v[0])) continue;  // "N/A": not supported by the port
    std::optional<int64_t> n;
    if (starts_with(v, "0x")) {
      v.remove_prefix(2);
      if (auto h = take_hex(v)) n = int64_t(*h);
    } else {
      n = take_uint(v);
    }
    if (n) ib_counter_event(p, p.ib_columns[i], *n, body);
  }
}

// "1/17/1" or "17/1" -> 33; "16" -> 16; "NA" -> "".
std::string ufm_port_number(sv label) {
  label = trim(label);
  std::vector<int64_t> parts;
  while (!label.empty()) {
    auto n = take_uint(label);
    if (!n) return {};
    parts.push_back(*n);
    if (!take(label, '/') && !label.empty()) return {};
  }
  if (parts.size() == 1) return std::to_string(parts[0]);
  if (parts.size() == 3) parts.erase(parts.begin());  // the ASIC of a multi-ASIC system: 1
  if (parts.size() == 2 && parts[0] > 0 && parts[1] > 0) return std::to_string(2 * (parts[0] - 1) + parts[1]);
  return {};
}

// The kind of a UFM event, from its code when it has one (UFM's event list), else its words.
std::pair<sv, Severity> ufm_kind(int64_t code, sv text) {
  switch (code) {
    case 110: case 113: case 917: case 918: return {"port_ber", Severity::error};  // symbol errors, rcv errors, BER
    case 112: return {"port_flap", Severity::error};                                 // link downed
    case 115: case 116: return {"ib_port_congestion", Severity::info};               // relay errors, xmit discards
    case 329: return {"port_down", Severity::error};                                 // link went down
    case 328: return {"port_up", Severity::info};                                    // link went up
    default: break;
  }
  std::string low = to_lower(text);
  if (contains(low, "unhealthy") && contains(low, "ber")) return {"port_ber", Severity::error};
  if (contains(low, "flap") || contains(low, "link-downed") || contains(low, "link downed") ||
      contains(low, "error recovery"))
    return {"port_flap", Severity::error};
  if (contains(low, "symbol error") || contains(low, "symbol bit error") || contains(low, "receive error") ||
      contains(low, "rcv error") || contains(low, "physical error") || contains(low, "integrity"))
    return {"port_ber", Severity::error};
  if (contains(low, "link went down") || contains(low, "link is down")) return {"port_down", Severity::error};
  if (contains(low, "link went up") || contains(low, "link is up")) return {"port_up", Severity::info};
  return {};
}

}  // namespace

// A db_csv section marker: the whole line is START_/END_ and an upper-case table name.
bool db_csv_marker(sv t, sv prefix) {
  if (!starts_with(t, prefix) || t.size() == prefix.size()) return false;
  for (char c : t.substr(prefix.size()))
    if (!((c >= 'A' && c <= 'Z') || is_digit(c) || c == '_')) return false;
  return true;
}

Match recognise_ib_tables(LineParser& p, sv t, sv body) {
  if (db_csv_marker(t, "START_")) {
    p.ib_table = std::string(t.substr(6));
    p.ib_columns.clear();
    return Match::known;
  }
  if (p.ib_table.empty()) return Match::none;
  if (db_csv_marker(t, "END_") || t.find(',') == sv::npos) {  // a line that is no row ends the table
    const bool marker = starts_with(t, "END_");
    p.ib_table.clear();
    p.ib_port.clear();
    p.ib_switch.clear();
    return marker ? Match::known : Match::none;
  }
  const std::vector<sv> cells = split_db_csv_row(t);
  if (p.ib_columns.empty()) {
    for (sv c : cells) p.ib_columns.emplace_back(c);
    return Match::known;
  }
  if (p.ib_table == "NODES") db_csv_node(p, cells);
  else if (p.ib_table == "PM_INFO") db_csv_counters(p, cells, body);
  return Match::known;
}

Match recognise_ufm_event(LineParser& p, sv t, sv body) {
  const size_t sw = t.find("Switch: ");
  if (sw == sv::npos) return Match::none;
  // The object: "[default(34) / Switch: leaf01 / NA / 16]"; older copies drop the brackets.
  size_t open = t.rfind('[', sw), close = t.find(']', sw);
  const bool bracketed = open != sv::npos && close != sv::npos && t.substr(open, sw - open).find(']') == sv::npos;
  if (!bracketed) {
    open = sw - 1;
    close = std::min(t.find(" [", sw), t.find(": ", sw));
  }
  if (close == sv::npos || close <= sw) return Match::none;
  sv object = t.substr(open + 1, close - open - 1);
  std::vector<sv> segments;
  for (sv o = object; !o.empty();) {
    size_t cut = o.find(" / ");
    segments.push_back(trim(o.substr(0, cut)));
    o = cut == sv::npos ? sv() : o.substr(cut + 3);
  }
  size_t named = 0;
  while (named < segments.size() && !starts_with(segments[named], "Switch: ")) ++named;
  if (named == segments.size() || named + 1 >= segments.size()) return Match::none;
  const std::string name(trim(segments[named].substr(8)));
  const std::string port = ufm_port_number(segments.back());
  if (name.empty()) return Match::none;
  // The code: the last "[digits]" before the object ("[5744] [112]": entry, then code).
  int64_t code = -1;
  for (size_t at = t.find('['); at != sv::npos && at < open; at = t.find('[', at + 1)) {
    sv u = t.substr(at + 1);
    if (auto n = take_uint(u); n && take(u, ']')) code = *n;
  }
  sv rest = t.substr(close + 1);
  std::string dev_id;
  if (auto id = token_after(rest, "[dev_id: ", "]")) dev_id = canonical_guid(*id);
  sv text = rest;
  if (size_t colon = rest.find(": "); colon != sv::npos) text = rest.substr(colon + 2);
  auto [kind, sev] = ufm_kind(code, text);
  if (kind.empty() || port.empty()) return Match::known;
  Event& e = p.emit(Layer::switch_, sev, kind, ComponentKind::switch_port, body);
  e.component.host.clear();
  e.component.switch_name = name;
  e.host = name;
  e.component.port = port;
  e.set_attr("reported_by", std::string(p.host()));
  e.set_attr("source", "ufm");
  if (code >= 0) e.set_attr("ufm_event", std::to_string(code));
  if (port != trim(segments.back())) e.set_attr("port_label", std::string(trim(segments.back())));
  if (!dev_id.empty()) e.set_attr("guid", dev_id);
  if (auto peer = after(text, "Peer info: ")) e.set_attr("peer", std::string(trim(take_until(*peer, "."))));
  return Match::known;
}

}  // namespace astral::monitor
