// Fabric description in JSON. Astral's own format (the topo fabric model, docs/fabric.md) is read
// exactly; anything else tolerantly: a list of switches (name, role), hosts with their NICs and
// links whose ends are either a host NIC port or a switch port.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/topo/fabric.hpp"
#include "hash_routing.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {

namespace {

using json = nlohmann::json;

std::string str(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  }
  return {};
}

int integer(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_number_integer()) return it->get<int>();
  }
  return -1;
}

struct End {
  bool is_switch = false;
  std::string node, nic, port, ip;
  int rail = -1;
};

// An end as {"switch": s, "port": p}, {"host": h, "nic": n, "port": p}, {"node": x, "port": p}
// or the string "name:port" / "host/nic:port".
End read_end(const json& j, const json& switch_names) {
  End e;
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    size_t colon = s.rfind(':');
    std::string node = colon == std::string::npos ? s : s.substr(0, colon);
    e.port = colon == std::string::npos ? "" : s.substr(colon + 1);
    size_t slash = node.find('/');
    if (slash != std::string::npos) {
      e.nic = node.substr(slash + 1);
      node = node.substr(0, slash);
    }
    e.node = node;
  } else if (j.is_object()) {
    std::string sw = str(j, {"switch", "switch_name"});
    if (!sw.empty()) {
      e.is_switch = true;
      e.node = sw;
    } else {
      e.node = str(j, {"host", "node", "name", "device"});
    }
    e.nic = str(j, {"nic", "hca", "interface"});
    e.port = str(j, {"port", "switch_port", "port_name"});
    e.ip = str(j, {"ip", "address"});
    e.rail = integer(j, {"rail", "plane"});
  }
  if (!e.is_switch && switch_names.is_object() && switch_names.contains(names::canonical_host(e.node)))
    e.is_switch = true;
  return e;
}

// Astral's own fabric format (docs/fabric.md), read exactly through topo: endpoints are
// "host:nic:port" and "switch:port[/lane]", rails come from the node profiles, roles from tiers.
FabricGraph graph_from_topo(const json& j, std::string_view source) {
  topo::Fabric fabric = [&] {
    try {
      return topo::fabric_from_json(j);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(source) + ": " + e.what());
    }
  }();
  static const char* const kRoles[] = {"", "leaf", "spine", "core"};
  FabricGraph g;
  for (const topo::Switch& sw : fabric.switches())
    g.add_switch(sw.name, sw.tier >= 1 && sw.tier <= 3 ? kRoles[sw.tier] : "");
  auto switch_end = [&](const topo::Endpoint& e) {
    return SwitchEnd{fabric.switches()[e.sw].name, topo::Fabric::port_label(e.port, e.lane)};
  };
  for (const topo::Link& link : fabric.links()) {
    if (link.a.is_host()) {
      const topo::NicModel& nic = fabric.profile_of(link.a.host).nics[link.a.nic];
      Cable c;
      c.nic = {fabric.hosts()[link.a.host].name, nic.name, std::to_string(link.a.port), "", nic.rail};
      c.sw = switch_end(link.b);
      g.add_cable(std::move(c));
    } else {
      g.add_trunk({switch_end(link.a), switch_end(link.b)});
    }
  }
  if (g.empty()) throw std::runtime_error(std::string(source) + ": no host-switch links in the fabric");
  g.set_hash_routing(HashRouting::from_json(j, std::move(fabric), source));
  return g;
}

}  // namespace

FabricGraph parse_fabric_json(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(std::string(source) + ": fabric file is not a JSON object");
  if (j.value("format", "") == topo::kFabricFormat) return graph_from_topo(j, source);
  if (j.contains("fabric") && j["fabric"].is_object()) j = j["fabric"];
  FabricGraph g;
  json switch_names = json::object();
  if (auto it = j.find("switches"); it != j.end() && it->is_array()) {
    for (const auto& s : *it) {
      std::string name = s.is_string() ? s.get<std::string>() : str(s, {"name", "id"});
      if (name.empty()) continue;
      std::string role = s.is_object() ? str(s, {"role", "tier", "layer", "kind"}) : "";
      g.add_switch(name, role);
      switch_names[names::canonical_host(name)] = true;
    }
  }
  // Hosts with NICs that name their switch port.
  if (auto it = j.find("hosts"); it != j.end() && it->is_array()) {
    for (const auto& h : *it) {
      std::string host = h.is_string() ? h.get<std::string>() : str(h, {"name", "hostname", "id"});
      if (!h.is_object()) continue;
      for (const char* key : {"nics", "ports", "hcas"}) {
        auto nics = h.find(key);
        if (nics == h.end() || !nics->is_array()) continue;
        for (const auto& n : *nics) {
          std::string sw = str(n, {"switch", "leaf", "switch_name"});
          std::string sport = str(n, {"switch_port", "leaf_port"});
          if (sw.empty() || sport.empty()) continue;
          Cable c;
          c.nic = {host, str(n, {"name", "nic", "device", "hca"}), str(n, {"port"}), str(n, {"ip", "address"}),
                   integer(n, {"rail", "plane"})};
          c.sw = {sw, sport};
          g.add_cable(std::move(c));
        }
      }
    }
  }
  for (const char* key : {"links", "cables", "edges"}) {
    auto links = j.find(key);
    if (links == j.end() || !links->is_array()) continue;
    for (const auto& l : *links) {
      json a, b;
      if (l.is_array() && l.size() == 2) {
        a = l[0];
        b = l[1];
      } else if (l.is_object()) {
        for (auto [ka, kb] : {std::pair{"a", "b"}, std::pair{"from", "to"}, std::pair{"src", "dst"},
                              std::pair{"end_a", "end_b"}})
          if (l.contains(ka) && l.contains(kb)) {
            a = l[ka];
            b = l[kb];
            break;
          }
      }
      if (a.is_null() || b.is_null()) continue;
      End ea = read_end(a, switch_names), eb = read_end(b, switch_names);
      if (ea.node.empty() || eb.node.empty()) continue;
      if (ea.is_switch && eb.is_switch) {
        g.add_trunk({{ea.node, ea.port}, {eb.node, eb.port}});
      } else if (ea.is_switch != eb.is_switch) {
        const End& host = ea.is_switch ? eb : ea;
        const End& sw = ea.is_switch ? ea : eb;
        if (g.cable_at(sw.node, sw.port)) continue;
        Cable c;
        c.nic = {host.node, host.nic, host.nic.empty() ? "" : host.port, host.ip, host.rail};
        if (c.nic.nic.empty()) c.nic.nic = host.port;  // "host:mlx5_2" style
        c.sw = {sw.node, sw.port};
        g.add_cable(std::move(c));
      }
    }
  }
  if (g.empty()) throw std::runtime_error(std::string(source) + ": no host-switch links found in the fabric JSON");
  return g;
}

}  // namespace astral::monitor
