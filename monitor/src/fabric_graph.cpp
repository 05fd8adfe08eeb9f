#include "astral/monitor/fabric_graph.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

void FabricGraph::index(size_t i) {
  const Cable& c = cables_[i];
  by_host_[names::canonical_host(c.nic.host)].push_back(i);
  by_switch_[names::canonical_host(c.sw.switch_name)].push_back(i);
  if (!c.nic.ip.empty()) by_ip_[names::canonical_ip(c.nic.ip)] = i;
}

void FabricGraph::add_cable(Cable c) {
  add_switch(c.sw.switch_name);
  cables_.push_back(std::move(c));
  index(cables_.size() - 1);
}

void FabricGraph::add_trunk(Trunk t) {
  add_switch(t.a.switch_name);
  add_switch(t.b.switch_name);
  trunks_.push_back(std::move(t));
}

void FabricGraph::add_switch(std::string name, std::string role) {
  std::string key = names::canonical_host(name);
  if (!has_switch(key)) switches_.push_back(name);
  if (!role.empty()) roles_[key] = std::move(role);
  else if (!roles_.count(key)) roles_[key] = "";
}

std::string_view FabricGraph::role(std::string_view s) const {
  auto it = roles_.find(names::canonical_host(s));
  return it == roles_.end() ? std::string_view{} : std::string_view(it->second);
}

bool FabricGraph::has_switch(std::string_view name) const {
  return roles_.count(names::canonical_host(name)) > 0;
}

bool FabricGraph::has_host(std::string_view name) const { return by_host_.count(names::canonical_host(name)) > 0; }

std::vector<const Cable*> FabricGraph::cables_of_host(std::string_view host) const {
  std::vector<const Cable*> out;
  auto it = by_host_.find(names::canonical_host(host));
  if (it != by_host_.end())
    for (size_t i : it->second) out.push_back(&cables_[i]);
  return out;
}

const Cable* FabricGraph::cable_of_nic(std::string_view host, std::string_view nic) const {
  for (const Cable* c : cables_of_host(host))
    if (c->nic.nic == nic) return c;
  return nullptr;
}

const Cable* FabricGraph::cable_at(std::string_view sw, std::string_view port) const {
  auto it = by_switch_.find(names::canonical_host(sw));
  if (it == by_switch_.end()) return nullptr;
  for (size_t i : it->second)
    if (cables_[i].sw.port == port) return &cables_[i];
  for (size_t i : it->second)
    if (names::same_port(cables_[i].sw.port, port)) return &cables_[i];
  return nullptr;
}

std::vector<const Cable*> FabricGraph::cables_on_switch(std::string_view sw) const {
  std::vector<const Cable*> out;
  auto it = by_switch_.find(names::canonical_host(sw));
  if (it != by_switch_.end())
    for (size_t i : it->second) out.push_back(&cables_[i]);
  return out;
}

std::vector<const Trunk*> FabricGraph::trunks_of(std::string_view sw) const {
  std::vector<const Trunk*> out;
  std::string key = names::canonical_host(sw);
  for (const Trunk& t : trunks_)
    if (names::canonical_host(t.a.switch_name) == key || names::canonical_host(t.b.switch_name) == key)
      out.push_back(&t);
  return out;
}

std::string FabricGraph::host_of_ip(std::string_view ip) const {
  auto it = by_ip_.find(names::canonical_ip(ip));
  return it == by_ip_.end() ? std::string() : cables_[it->second].nic.host;
}

std::string FabricGraph::to_cabling_csv() const {
  std::string out = "host,nic,port,switch,switch_port,ip,rail\n";
  for (const Cable& c : cables_)
    out += c.nic.host + "," + c.nic.nic + "," + c.nic.port + "," + c.sw.switch_name + "," + c.sw.port + "," +
           c.nic.ip + "," + (c.nic.rail >= 0 ? std::to_string(c.nic.rail) : "") + "\n";
  return out;
}

std::string canonical_guid(sv guid) {
  guid = trim(guid);
  if (starts_with(guid, "0x") || starts_with(guid, "0X")) guid.remove_prefix(2);
  while (guid.size() > 1 && guid[0] == '0') guid.remove_prefix(1);
  if (guid.empty() || guid.size() > 16) return {};
  std::string out;
  for (char c : guid) {
    if (!is_hex(c)) return {};
    out += lower(c);
  }
  return out;
}

void FabricGraph::add_switch_guid(sv guid, std::string switch_name) {
  std::string key = canonical_guid(guid);
  if (!key.empty() && !switch_name.empty()) by_guid_.emplace(std::move(key), std::move(switch_name));
}

sv FabricGraph::switch_of_guid(sv guid) const {
  auto it = by_guid_.find(canonical_guid(guid));
  return it == by_guid_.end() ? sv() : sv(it->second);
}

void merge_fabric(FabricGraph& into, const FabricGraph& other) {
  for (const auto& [guid, name] : other.switch_guids()) into.add_switch_guid(guid, name);
  if (!into.hash_routing() && other.hash_routing()) into.set_hash_routing(other.hash_routing());
  for (const Cable& c : other.cables())
    if (!into.cable_at(c.sw.switch_name, c.sw.port)) into.add_cable(c);
  for (const Trunk& t : other.trunks()) into.add_trunk(t);
  for (const auto& s : other.switches()) into.add_switch(s, std::string(other.role(s)));
}

namespace {

std::vector<std::string> split_csv(sv line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) {
      out.push_back(std::string(trim(cur)));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::string(trim(cur)));
  return out;
}

}  // namespace

FabricGraph parse_cabling_csv(sv text, sv source) {
  FabricGraph g;
  size_t pos = 0;
  int line_no = 0;
  // Column positions from the header; defaults are the documented order.
  int col_host = 0, col_nic = 1, col_port = 2, col_switch = 3, col_sport = 4, col_ip = -1, col_rail = -1;
  bool header_seen = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    sv line = text.substr(pos, nl == sv::npos ? sv::npos : nl - pos);
    pos = nl == sv::npos ? text.size() : nl + 1;
    ++line_no;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    auto f = split_csv(line);
    if (!header_seen) {
      header_seen = true;
      std::string low = to_lower(line);
      if (contains(low, "host") && contains(low, "switch")) {
        col_ip = col_rail = -1;
        for (int i = 0; i < int(f.size()); ++i) {
          std::string h = to_lower(f[size_t(i)]);
          if (h == "host" || h == "hostname" || h == "node") col_host = i;
          else if (h == "nic" || h == "hca" || h == "device" || h == "interface") col_nic = i;
          else if (h == "port" || h == "nic_port" || h == "hca_port") col_port = i;
          else if (h == "switch" || h == "switch_name") col_switch = i;
          else if (h == "switch_port" || h == "switchport" || h == "switch port") col_sport = i;
          else if (h == "ip" || h == "address") col_ip = i;
          else if (h == "rail" || h == "plane") col_rail = i;
        }
        continue;
      }
    }
    auto get = [&](int i) { return i >= 0 && size_t(i) < f.size() ? f[size_t(i)] : std::string(); };
    Cable c;
    c.nic.host = get(col_host);
    c.nic.nic = get(col_nic);
    c.nic.port = get(col_port);
    c.sw.switch_name = get(col_switch);
    c.sw.port = get(col_sport);
    c.nic.ip = get(col_ip);
    std::string rail = get(col_rail);
    if (!rail.empty()) {
      sv r = rail;
      if (auto v = take_int(r)) c.nic.rail = int(*v);
    }
    if (c.nic.host.empty() || c.sw.switch_name.empty() || c.sw.port.empty())
      throw std::runtime_error(std::string(source) + ":" + std::to_string(line_no) +
                               ": cabling row needs host, nic, port, switch, switch_port");
    g.add_cable(std::move(c));
  }
  if (g.empty()) throw std::runtime_error(std::string(source) + ": no cabling rows");
  return g;
}

namespace {

struct IbNode {
  bool is_switch = false;
  std::string desc;
};

struct IbLink {
  std::string a, b;  // node ids ("S-..."/"H-...")
  std::string pa, pb;
};

// "MF0;leaf01:MQM8700/U1" -> "leaf01"; "node001 mlx5_0" stays (CA descriptions are split later).
std::string switch_name_from_desc(const std::string& desc) {
  size_t semi = desc.find(';');
  std::string s = semi == std::string::npos ? desc : desc.substr(semi + 1);
  size_t colon = s.find(':');
  if (semi != std::string::npos && colon != std::string::npos) s = s.substr(0, colon);
  sv t = trim(s);
  return std::string(take_until(t, " "));
}

std::string quoted(sv s, size_t& at) {
  size_t a = s.find('"', at);
  if (a == sv::npos) return {};
  size_t b = s.find('"', a + 1);
  if (b == sv::npos) return {};
  at = b + 1;
  return std::string(s.substr(a + 1, b - a - 1));
}

}  // namespace

FabricGraph parse_ibnetdiscover(sv text, sv source) {
  std::unordered_map<std::string, IbNode> nodes;
  std::vector<IbLink> links;
  std::vector<std::pair<std::string, std::string>> switch_port_guids;  // node guid, port 0 guid
  std::string current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    sv line = trim(text.substr(pos, nl == sv::npos ? sv::npos : nl - pos));
    pos = nl == sv::npos ? text.size() : nl + 1;
    if (line.empty() || line[0] == '#') continue;
    if (starts_with(line, "switchguid=")) {  // "switchguid=0x<node guid>(<port 0 guid>)"
      sv g = line.substr(11);
      std::string node(take_until(g, "("));
      if (take(g, '(')) switch_port_guids.emplace_back(canonical_guid(node), std::string(take_until(g, ")")));
      continue;
    }
    if (starts_with(line, "Switch") || starts_with(line, "Ca") || starts_with(line, "Rt")) {
      size_t at = 0;
      std::string id = quoted(line, at);
      size_t hash = line.find('#', at);
      std::string desc;
      if (hash != sv::npos) {
        size_t d = hash;
        desc = quoted(line, d);
      }
      nodes[id] = {starts_with(line, "Switch"), desc};
      current = id;
      continue;
    }
    if (line[0] != '[' || current.empty()) continue;
    // "[1]	"H-..."[1](guid) # "desc" ..." or "[1](guid) 	"S-..."[1] # lid ..."
    sv t = line.substr(1);
    std::string local_port(take_until(t, "]"));
    size_t at = 0;
    sv rest = t;
    std::string remote = quoted(rest, at);
    if (remote.empty()) continue;
    sv after_id = rest.substr(at);
    std::string remote_port;
    if (take(after_id, '[')) remote_port = std::string(take_until(after_id, "]"));
    std::string remote_desc;
    if (size_t hash = rest.find('#'); hash != sv::npos) {
      size_t d = hash;
      remote_desc = quoted(rest, d);
    }
    if (!nodes.count(remote)) nodes[remote] = {remote[0] == 'S', remote_desc};
    else if (nodes[remote].desc.empty()) nodes[remote].desc = remote_desc;
    links.push_back({current, remote, local_port, remote_port});
  }
  FabricGraph g;
  for (const auto& [id, node] : nodes)
    if (node.is_switch && starts_with(id, "S-")) g.add_switch_guid(sv(id).substr(2), switch_name_from_desc(node.desc));
  for (const auto& [guid, port_guid] : switch_port_guids)
    if (sv name = g.switch_of_guid(guid); !name.empty()) g.add_switch_guid(port_guid, std::string(name));
  std::unordered_map<std::string, bool> seen;
  for (const IbLink& l : links) {
    std::string key = l.a < l.b ? l.a + l.pa + "|" + l.b + l.pb : l.b + l.pb + "|" + l.a + l.pa;
    if (seen[key]) continue;
    seen[key] = true;
    const IbNode& na = nodes[l.a];
    const IbNode& nb = nodes[l.b];
    if (na.is_switch && nb.is_switch) {
      g.add_trunk({{switch_name_from_desc(na.desc), l.pa}, {switch_name_from_desc(nb.desc), l.pb}});
      continue;
    }
    if (!na.is_switch && !nb.is_switch) continue;
    const IbNode& ca = na.is_switch ? nb : na;
    const IbNode& sw = na.is_switch ? na : nb;
    Cable c;
    sv d = ca.desc;
    c.nic.host = std::string(take_word(d));
    c.nic.nic = std::string(trim(d));
    if (c.nic.nic.empty()) c.nic.nic = "HCA-1";
    c.nic.port = na.is_switch ? l.pb : l.pa;
    c.sw.switch_name = switch_name_from_desc(sw.desc);
    c.sw.port = na.is_switch ? l.pa : l.pb;
    if (c.nic.host.empty() || c.sw.switch_name.empty()) continue;
    g.add_cable(std::move(c));
  }
  if (g.empty()) throw std::runtime_error(std::string(source) + ": no links found in ibnetdiscover output");
  return g;
}

FabricGraph load_fabric(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open fabric file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  sv t = trim(text);
  if (t.empty()) throw std::runtime_error(path + ": empty fabric file");
  if (t[0] == '{') return parse_fabric_json(text, path);
  if (contains(t, "\"S-") || contains(t, "\"H-") || contains(t, "switchguid=")) return parse_ibnetdiscover(text, path);
  return parse_cabling_csv(text, path);
}

}  // namespace astral::monitor
