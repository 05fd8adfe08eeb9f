// Fault kinds, ground truth, the rail-optimised fabric used when none is given, fabric writers,
// and the match between a diagnosed root cause and the injected fault.
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "astral/monitor/simulate.hpp"
#include "names.hpp"

namespace astral::monitor {

namespace {
struct KindName {
  FaultKind kind;
  std::string_view name;
};
constexpr KindName kFaultKindNames[] = {{FaultKind::none, "none"},           {FaultKind::nic_down, "nic-down"},
                               {FaultKind::link_flap, "link-flap"}, {FaultKind::optic_ber, "optic-ber"},
                               {FaultKind::gpu_xid79, "gpu-xid79"}, {FaultKind::gpu_ecc, "gpu-ecc"},
                               {FaultKind::gpu_straggler, "gpu-straggler"}, {FaultKind::pcie_aer, "pcie-aer"},
                               {FaultKind::switch_reboot, "switch-reboot"}, {FaultKind::app_desync, "app-desync"},
                               {FaultKind::cooling_loss, "cooling-loss"}, {FaultKind::power_capping, "power-capping"},
                               {FaultKind::leak, "leak"}};
}  // namespace

std::string_view to_string(FaultKind k) {
  for (const auto& kn : kFaultKindNames)
    if (kn.kind == k) return kn.name;
  return "none";
}

std::optional<FaultKind> parse_fault_kind(std::string_view s) {
  for (const auto& kn : kFaultKindNames)
    if (kn.name == s) return kn.kind;
  return std::nullopt;
}

const std::vector<FaultKind>& all_fault_kinds() {
  static const std::vector<FaultKind> all = [] {
    std::vector<FaultKind> v;
    for (const auto& kn : kFaultKindNames) v.push_back(kn.kind);
    return v;
  }();
  return all;
}

nlohmann::json to_json(const GroundTruth& t) {
  nlohmann::json c = nlohmann::json::object();
  if (t.component.kind != ComponentKind::none) c["kind"] = to_string(t.component.kind);
  if (!t.component.host.empty()) c["host"] = t.component.host;
  if (!t.component.device.empty()) c["device"] = t.component.device;
  if (!t.component.switch_name.empty()) c["switch"] = t.component.switch_name;
  if (!t.component.port.empty()) c["port"] = t.component.port;
  if (t.component.rank >= 0) c["rank"] = t.component.rank;
  return {{"fault", to_string(t.fault)}, {"component", c},        {"fault_time", format_time(t.fault_time_us)},
          {"description", t.description}, {"hosts", t.hosts},     {"ranks", t.ranks},
          {"seed", t.seed},                {"root_causes_expected", t.fault == FaultKind::none ? 0 : 1}};
}

GroundTruth ground_truth_from_json(const nlohmann::json& j) {
  GroundTruth t;
  t.fault = parse_fault_kind(j.value("fault", "none")).value_or(FaultKind::none);
  if (auto c = j.find("component"); c != j.end() && c->is_object()) {
    t.component.kind = parse_component_kind(c->value("kind", "")).value_or(ComponentKind::none);
    t.component.host = c->value("host", "");
    t.component.device = c->value("device", "");
    t.component.switch_name = c->value("switch", "");
    t.component.port = c->value("port", "");
    t.component.rank = c->value("rank", -1);
  }
  if (auto v = parse_rfc3339(j.value("fault_time", ""))) t.fault_time_us = *v;
  t.description = j.value("description", "");
  t.hosts = j.value("hosts", std::vector<std::string>{});
  t.ranks = j.value("ranks", 0);
  t.seed = j.value("seed", uint64_t(0));
  return t;
}

bool matches(const RootCause& rc, const GroundTruth& t) {
  const Component& a = rc.component;
  const Component& b = t.component;
  if (a.kind != b.kind || b.kind == ComponentKind::none) return false;
  auto host = [&] { return !a.host.empty() && names::canonical_host(a.host) == names::canonical_host(b.host); };
  auto sw = [&] {
    return !a.switch_name.empty() && names::canonical_host(a.switch_name) == names::canonical_host(b.switch_name);
  };
  auto port = [&] { return sw() && names::same_port(a.port, b.port); };
  switch (b.kind) {
    case ComponentKind::gpu:
      return host() && ((!a.device.empty() && names::canonical_pci(a.device) == names::canonical_pci(b.device)) ||
                        (a.rank >= 0 && a.rank == b.rank));
    case ComponentKind::nic: return host() && a.device == b.device;
    case ComponentKind::link: return (host() && a.device == b.device) || port();
    case ComponentKind::optic: return port() || (host() && !a.device.empty() && a.device == b.device);
    case ComponentKind::switch_port: return port();
    case ComponentKind::switch_: return sw();
    case ComponentKind::process: return host() && a.rank == b.rank;
    case ComponentKind::host: return host();
    // Plant parts: the facility source that reports them and their Redfish entity.
    case ComponentKind::pump:
    case ComponentKind::cdu:
    case ComponentKind::rectifier:
    case ComponentKind::power_shelf:
    case ComponentKind::rack:
      return host() && a.device == b.device;
    default: return false;
  }
}

FabricGraph make_rail_fabric(int hosts, int rails, int hosts_per_leaf, int spines) {
  FabricGraph g;
  const int groups = (hosts + hosts_per_leaf - 1) / hosts_per_leaf;
  auto port_of = [](int style, int index) {
    switch (style) {
      case 0: return "Ethernet" + std::to_string(index * 8);
      case 1: return "swp" + std::to_string(index + 1);
      default: return "Eth1/" + std::to_string(index + 1);
    }
  };
  char name[32];
  for (int r = 0; r < rails; ++r)
    for (int s = 0; s < spines; ++s) {
      std::snprintf(name, sizeof name, "spine-r%d-%d", r, s + 1);
      g.add_switch(name, "spine");
    }
  for (int grp = 0; grp < groups; ++grp)
    for (int r = 0; r < rails; ++r) {
      const int style = (grp + r) % 3;
      char leaf[32];
      std::snprintf(leaf, sizeof leaf, "leaf-%02d-r%d", grp + 1, r);
      g.add_switch(leaf, "leaf");
      for (int k = 0; k < hosts_per_leaf; ++k) {
        int h = grp * hosts_per_leaf + k;
        if (h >= hosts) break;
        std::snprintf(name, sizeof name, "node%03d", h + 1);
        Cable c;
        c.nic = {name, "mlx5_" + std::to_string(r), "1",
                 "10." + std::to_string(100 + r) + "." + std::to_string(h / 250) + "." + std::to_string(h % 250 + 1), r};
        c.sw = {leaf, port_of(style, k)};
        g.add_cable(std::move(c));
      }
      for (int s = 0; s < spines; ++s) {
        std::snprintf(name, sizeof name, "spine-r%d-%d", r, s + 1);
        g.add_trunk({{leaf, port_of(style, hosts_per_leaf + s)}, {name, "Ethernet" + std::to_string(grp * 8)}});
      }
    }
  return g;
}

std::string fabric_to_ibnetdiscover(const FabricGraph& g) {
  std::string out = "#\n# Topology file: generated by astral monitor simulate\n#\n\n";
  std::map<std::string, std::string> guid;
  int next = 1;
  auto id = [&](const std::string& key, char kind) {
    auto [it, fresh] = guid.emplace(key, "");
    if (fresh) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%c-0002c90300%06x", kind, next++);
      it->second = buf;
    }
    return it->second;
  };
  for (const std::string& sw : g.switches()) {
    std::string sid = id(sw, 'S');
    out += "vendid=0x2c9\ndevid=0xcf08\nswitchguid=0x" + sid.substr(2) + "(" + sid.substr(2) + ")\n";
    out += "Switch\t64 \"" + sid + "\"\t\t# \"MF0;" + sw + ":MQM9700/U1\" enhanced port 0 lid 1 lmc 0\n";
    for (const Cable* c : g.cables_on_switch(sw))
      out += "[" + c->sw.port + "]\t\"" + id(c->nic.host + " " + c->nic.nic, 'H') + "\"[" +
             (c->nic.port.empty() ? "1" : c->nic.port) + "]\t\t# \"" + c->nic.host + " " + c->nic.nic + "\" lid 7 4xNDR\n";
    for (const Trunk* t : g.trunks_of(sw)) {
      bool a = names::canonical_host(t->a.switch_name) == names::canonical_host(sw);
      const SwitchEnd& me = a ? t->a : t->b;
      const SwitchEnd& other = a ? t->b : t->a;
      out += "[" + me.port + "]\t\"" + id(other.switch_name, 'S') + "\"[" + other.port + "]\t\t# \"MF0;" +
             other.switch_name + ":MQM9700/U1\" lid 2 4xNDR\n";
    }
    out += "\n";
  }
  for (const Cable& c : g.cables()) {
    std::string hid = id(c.nic.host + " " + c.nic.nic, 'H');
    out += "vendid=0x2c9\ndevid=0x1021\ncaguid=0x" + hid.substr(2) + "\n";
    out += "Ca\t1 \"" + hid + "\"\t\t# \"" + c.nic.host + " " + c.nic.nic + "\"\n";
    out += "[" + (c.nic.port.empty() ? std::string("1") : c.nic.port) + "](" + hid.substr(2) + ") \t\"" +
           id(c.sw.switch_name, 'S') + "\"[" + c.sw.port + "]\t\t# lid 7 lmc 0 \"MF0;" + c.sw.switch_name +
           ":MQM9700/U1\" lid 1 4xNDR\n\n";
  }
  return out;
}

std::string fabric_to_json(const FabricGraph& g) {
  nlohmann::json j;
  nlohmann::json switches = nlohmann::json::array();
  for (const std::string& s : g.switches()) switches.push_back({{"name", s}, {"role", std::string(g.role(s))}});
  j["switches"] = switches;
  std::map<std::string, nlohmann::json> hosts;
  std::vector<std::string> order;
  for (const Cable& c : g.cables()) {
    if (!hosts.count(c.nic.host)) order.push_back(c.nic.host);
    nlohmann::json& h = hosts[c.nic.host];
    h["name"] = c.nic.host;
    h["nics"].push_back({{"name", c.nic.nic}, {"port", c.nic.port}, {"ip", c.nic.ip}, {"rail", c.nic.rail},
                         {"switch", c.sw.switch_name}, {"switch_port", c.sw.port}});
  }
  nlohmann::json hl = nlohmann::json::array();
  for (const auto& h : order) hl.push_back(hosts[h]);
  j["hosts"] = hl;
  nlohmann::json links = nlohmann::json::array();
  for (const Trunk& t : g.trunks())
    links.push_back({{"a", {{"switch", t.a.switch_name}, {"port", t.a.port}}}, {"b", {{"switch", t.b.switch_name}, {"port", t.b.port}}}});
  j["links"] = links;
  return j.dump(1);
}

}  // namespace astral::monitor
