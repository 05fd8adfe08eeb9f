// The fabric's JSON form (docs/fabric.md): reading with errors that name the element, and writing.
#include <astral/common/json_number.hpp>
#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "astral/topo/fabric.hpp"
#include "fabric_detail.hpp"

namespace astral::topo {
namespace {

using detail::fail;
using detail::parse_int;

using nlohmann::json;

template <typename T>
T field(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(fmt::format("{}: missing \"{}\"", where, key));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number()) fail(fmt::format("{}: \"{}\" has the wrong type ({})", where, key, it->type_name()));
    if (auto v = json_integer<T>(*it)) return *v;
    fail(fmt::format("{}: \"{}\" is not an integer in range ({})", where, key, it->dump()));
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (!it->is_array()) fail(fmt::format("{}: \"{}\" has the wrong type ({})", where, key, it->type_name()));
    T out;
    for (const json& e : *it) {
      auto v = json_integer<int>(e);
      if (!v) fail(fmt::format("{}: \"{}\" holds {}, not an integer in range", where, key, e.dump()));
      out.push_back(*v);
    }
    return out;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail(fmt::format("{}: \"{}\" has the wrong type ({})", where, key, it->type_name()));
  }
}

template <typename T>
T field_or(const json& obj, const char* key, T fallback, const std::string& where) {
  if (!obj.contains(key)) return fallback;
  return field<T>(obj, key, where);
}

// Resolves "host:nic:port" and "switch:port[/lane]" while the Fabric does not exist yet.
struct NameIndex {
  const FabricData& data;
  std::unordered_map<std::string, int> hosts, switches;

  explicit NameIndex(const FabricData& d) : data(d) {
    for (size_t i = 0; i < d.hosts.size(); ++i) hosts.emplace(d.hosts[i].name, int(i));
    for (size_t i = 0; i < d.switches.size(); ++i) switches.emplace(d.switches[i].name, int(i));
  }

  Endpoint resolve(const std::string& text, const std::string& where) const {
    Endpoint e;
    auto first = text.find(':');
    auto second = first == std::string::npos ? first : text.find(':', first + 1);
    if (first == std::string::npos)
      fail(fmt::format("{}: endpoint '{}' is not 'host:nic:port' or 'switch:port'", where, text));
    std::string device = text.substr(0, first);
    if (second != std::string::npos) {
      auto h = hosts.find(device);
      if (h == hosts.end())
        fail(fmt::format("{}: dangling end '{}': no host named '{}'", where, text, device));
      std::string nic_name = text.substr(first + 1, second - first - 1);
      const NodeProfile& p = data.profiles[data.hosts[h->second].profile];
      e.host = h->second;
      for (size_t n = 0; n < p.nics.size(); ++n)
        if (p.nics[n].name == nic_name) e.nic = int(n);
      if (e.nic < 0)
        fail(fmt::format("{}: dangling end '{}': host '{}' (profile '{}') has no NIC '{}'", where,
                         text, device, p.name, nic_name));
      if (!parse_int(std::string_view(text).substr(second + 1), e.port))
        fail(fmt::format("{}: endpoint '{}': port is not a number", where, text));
      return e;
    }
    auto s = switches.find(device);
    if (s == switches.end())
      fail(fmt::format("{}: dangling end '{}': no switch named '{}'", where, text, device));
    e.sw = s->second;
    std::string_view port = std::string_view(text).substr(first + 1);
    auto slash = port.find('/');
    bool ok = parse_int(port.substr(0, slash), e.port);
    if (ok && slash != std::string_view::npos)
      ok = parse_int(port.substr(slash + 1), e.lane) && e.lane >= 1;
    if (!ok) fail(fmt::format("{}: endpoint '{}': port must be 'N' or 'N/lane'", where, text));
    return e;
  }
};

}  // namespace

Fabric fabric_from_json(const json& doc) {
  if (!doc.is_object()) fail("fabric: the document is not a JSON object");
  std::string format = field_or<std::string>(doc, "format", "", "fabric");
  if (format != kFabricFormat)
    fail(fmt::format("fabric: \"format\" is '{}', expected '{}'", format, kFabricFormat));
  int version = field<int>(doc, "version", "fabric");
  if (version != kFabricVersion)
    fail(fmt::format("fabric: version {} is not supported (this build reads version {})", version,
                     kFabricVersion));
  FabricData d;
  d.name = field_or<std::string>(doc, "name", "", "fabric");
  d.kind = field_or<std::string>(doc, "kind", "custom", "fabric");
  d.rails = field<int>(doc, "rails", "fabric");
  d.planes = field_or<int>(doc, "planes", 1, "fabric");
  if (doc.contains("generator")) {
    const json& gen = doc["generator"];
    if (!gen.is_object()) fail("fabric: \"generator\" must be an object");
    for (auto it = gen.begin(); it != gen.end(); ++it)
      d.generator.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
  }

  std::unordered_map<std::string, int> profile_index;
  for (const json& p : field<json>(doc, "profiles", "fabric")) {
    std::string where = fmt::format("profile {}", d.profiles.size());
    NodeProfile prof;
    prof.name = field<std::string>(p, "name", where);
    where = fmt::format("profile '{}'", prof.name);
    prof.gpus = field<int>(p, "gpus", where);
    prof.nvlink_gbps = field_or<double>(p, "nvlink_gbps", 3600, where);
    for (const json& n : field<json>(p, "nics", where)) {
      NicModel nic;
      nic.name = field<std::string>(n, "name", where);
      std::string nic_where = where + " NIC " + nic.name;
      nic.rail = field<int>(n, "rail", nic_where);
      nic.gpus = field<std::vector<int>>(n, "gpus", nic_where);
      nic.ports = field_or<int>(n, "ports", 1, nic_where);
      nic.port_gbps = field<double>(n, "port_gbps", nic_where);
      prof.nics.push_back(std::move(nic));
    }
    if (!profile_index.emplace(prof.name, int(d.profiles.size())).second)
      fail(fmt::format("{}: defined twice", where));
    d.profiles.push_back(std::move(prof));
  }

  for (const json& h : field<json>(doc, "hosts", "fabric")) {
    std::string where = fmt::format("host {}", d.hosts.size());
    Host host;
    host.name = field<std::string>(h, "name", where);
    where = fmt::format("host '{}'", host.name);
    std::string profile = field<std::string>(h, "profile", where);
    auto it = profile_index.find(profile);
    if (it == profile_index.end()) fail(fmt::format("{}: no profile named '{}'", where, profile));
    host.profile = it->second;
    host.segment = field_or<int>(h, "segment", 0, where);
    host.pod = field_or<int>(h, "pod", 0, where);
    d.hosts.push_back(std::move(host));
  }

  for (const json& s : field<json>(doc, "switches", "fabric")) {
    std::string where = fmt::format("switch {}", d.switches.size());
    Switch sw;
    sw.name = field<std::string>(s, "name", where);
    where = fmt::format("switch '{}'", sw.name);
    sw.tier = field<int>(s, "tier", where);
    sw.radix = field<int>(s, "radix", where);
    sw.port_gbps = field<double>(s, "port_gbps", where);
    sw.rail = field_or<int>(s, "rail", kAnyRail, where);
    sw.plane = field_or<int>(s, "plane", 0, where);
    sw.pod = field_or<int>(s, "pod", 0, where);
    sw.segment = field_or<int>(s, "segment", -1, where);
    d.switches.push_back(std::move(sw));
  }

  NameIndex names(d);
  for (const json& l : field<json>(doc, "links", "fabric")) {
    std::string where = fmt::format("link {}", d.links.size());
    Link link;
    link.a = names.resolve(field<std::string>(l, "a", where), where);
    link.b = names.resolve(field<std::string>(l, "b", where), where);
    link.gbps = field<double>(l, "gbps", where);
    std::string state = field_or<std::string>(l, "state", "up", where);
    if (state != "up" && state != "down")
      fail(fmt::format("{}: state '{}' is not 'up' or 'down'", where, state));
    link.state = state == "up" ? LinkState::kUp : LinkState::kDown;
    std::string media = field_or<std::string>(l, "media", "optic", where);
    if (media != "optic" && media != "copper")
      fail(fmt::format("{}: media '{}' is not 'optic' or 'copper'", where, media));
    link.media = media == "optic" ? LinkMedia::kOptic : LinkMedia::kCopper;
    d.links.push_back(link);
  }
  return Fabric(std::move(d));
}

static json fabric_to_json_head(const Fabric& f) {
  json doc;
  doc["format"] = kFabricFormat;
  doc["version"] = kFabricVersion;
  doc["name"] = f.name();
  doc["kind"] = f.kind();
  doc["rails"] = f.rails();
  doc["planes"] = f.planes();
  if (!f.generator().empty()) {
    json gen = json::object();
    for (const auto& [k, v] : f.generator()) gen[k] = v;
    doc["generator"] = gen;
  }
  return doc;
}

static json profile_json(const NodeProfile& p) {
  json nics = json::array();
  for (const NicModel& n : p.nics)
    nics.push_back({{"name", n.name}, {"rail", n.rail}, {"gpus", n.gpus}, {"ports", n.ports},
                    {"port_gbps", n.port_gbps}});
  return {{"name", p.name}, {"gpus", p.gpus}, {"nvlink_gbps", p.nvlink_gbps}, {"nics", nics}};
}

static json host_json(const Fabric& f, const Host& h) {
  return {{"name", h.name}, {"profile", f.profiles()[h.profile].name}, {"segment", h.segment}, {"pod", h.pod}};
}

static json switch_json(const Switch& s) {
  json j = {{"name", s.name}, {"tier", s.tier},   {"radix", s.radix},
            {"port_gbps", s.port_gbps}, {"plane", s.plane}, {"pod", s.pod}};
  if (s.rail != kAnyRail) j["rail"] = s.rail;
  if (s.segment >= 0) j["segment"] = s.segment;
  return j;
}

static json link_json(const Fabric& f, const Link& l) {
  json j = {{"a", f.endpoint_label(l.a)}, {"b", f.endpoint_label(l.b)}, {"gbps", l.gbps}};
  if (l.state == LinkState::kDown) j["state"] = "down";
  if (l.media == LinkMedia::kCopper) j["media"] = "copper";
  return j;
}

json fabric_to_json(const Fabric& f) {
  json doc = fabric_to_json_head(f);
  for (const char* key : {"profiles", "hosts", "switches", "links"}) doc[key] = json::array();
  for (const NodeProfile& p : f.profiles()) doc["profiles"].push_back(profile_json(p));
  for (const Host& h : f.hosts()) doc["hosts"].push_back(host_json(f, h));
  for (const Switch& s : f.switches()) doc["switches"].push_back(switch_json(s));
  for (const Link& l : f.links()) doc["links"].push_back(link_json(f, l));
  return doc;
}

Fabric load_fabric(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FabricError(fmt::format("{}: cannot open the fabric file", path));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw FabricError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  try {
    return fabric_from_json(doc);
  } catch (const FabricError& e) {
    throw FabricError(fmt::format("{}: {}", path, e.what()));
  }
}

// Streams the document with one array element per line (readable, diffable and grep-able: "grep
// r3-07:17 fabric.json"), element by element: a 131K-GPU fabric is never held as one JSON tree.
static void write_fabric_json(const Fabric& f, std::ostream& out) {
  json head = fabric_to_json_head(f);
  out << "{\n";
  static const char* const kHead[] = {"format", "version", "name", "kind", "rails", "planes", "generator"};
  for (const char* key : kHead)
    if (auto it = head.find(key); it != head.end()) out << "  " << json(key).dump() << ": " << it->dump() << ",\n";
  auto array = [&](const char* key, size_t n, auto element, bool last) {
    out << "  " << json(key).dump() << ": [";
    for (size_t i = 0; i < n; ++i) out << (i ? ",\n    " : "\n    ") << element(i).dump();
    out << (n ? "\n  ]" : "]") << (last ? "\n" : ",\n");
  };
  array("profiles", f.profiles().size(), [&](size_t i) { return profile_json(f.profiles()[i]); }, false);
  array("hosts", f.hosts().size(), [&](size_t i) { return host_json(f, f.hosts()[i]); }, false);
  array("switches", f.switches().size(), [&](size_t i) { return switch_json(f.switches()[i]); }, false);
  array("links", f.links().size(), [&](size_t i) { return link_json(f, f.links()[i]); }, true);
  out << "}\n";
}

void save_fabric(const Fabric& fabric, const std::string& path) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw FabricError(fmt::format("{}: cannot write the fabric file", path));
    write_fabric_json(fabric, out);
    if (!out.flush()) {
      std::remove(tmp.c_str());
      throw FabricError(fmt::format("{}: write failed", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw FabricError(fmt::format("{}: cannot replace the fabric file", path));
}

}  // namespace astral::topo
