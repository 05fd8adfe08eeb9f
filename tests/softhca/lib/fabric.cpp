// The fabric file: hosts -> devices -> ports, and which ports can reach which (README.md).
#include <arpa/inet.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "internal.hpp"

namespace softhca {
namespace {

using nlohmann::json;

struct FabricError {
  std::string what;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw FabricError{where + ": " + what}; }

template <typename T>
T get_int(const json& j, const char* key, T def, T lo, T hi, const std::string& where) {
  if (!j.contains(key)) return def;
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(where + "." + key, "expected an integer");
  auto n = v.get<int64_t>();
  if (n < static_cast<int64_t>(lo) || n > static_cast<int64_t>(hi))
    fail(where + "." + key, "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<T>(n);
}

std::string get_string(const json& j, const char* key, const std::string& def, const std::string& where) {
  if (!j.contains(key)) return def;
  if (!j.at(key).is_string()) fail(where + "." + key, "expected a string");
  return j.at(key).get<std::string>();
}

const json& get_array(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_array()) fail(where + "." + key, "expected an array");
  return j.at(key);
}

ibv_mtu mtu_of(int bytes, const std::string& where) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: fail(where + ".mtu", "expected 256, 512, 1024, 2048 or 4096");
  }
}

GidType gid_type_of(const std::string& s, const std::string& where) {
  if (s == "IB") return GidType::ib;
  if (s == "RoCEv1") return GidType::roce_v1;
  if (s == "RoCEv2") return GidType::roce_v2;
  fail(where + ".type", "expected IB, RoCEv1 or RoCEv2");
}

// An IB port without an explicit table gets GID 0 = fe80::<node guid>, as the SM assigns it.
GidSpec default_ib_gid(uint64_t guid) {
  GidSpec g;
  g.gid.raw[0] = 0xfe;
  g.gid.raw[1] = 0x80;
  for (int i = 0; i < 8; ++i) g.gid.raw[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  return g;
}

PortSpec parse_port(const json& j, const DeviceSpec& dev, int rail, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object");
  PortSpec p;
  p.num = get_int<int>(j, "port", 1, 1, 255, where);
  std::string ll = get_string(j, "link_layer", "IB", where);
  if (ll != "IB" && ll != "Ethernet") fail(where + ".link_layer", "expected IB or Ethernet");
  p.ethernet = ll == "Ethernet";
  std::string st = get_string(j, "state", "ACTIVE", where);
  if (st != "ACTIVE" && st != "DOWN") fail(where + ".state", "expected ACTIVE or DOWN");
  p.active = st == "ACTIVE";
  p.lid = get_int<uint16_t>(j, "lid", 0, 0, 0xbfff, where);
  p.sm_lid = get_int<uint16_t>(j, "sm_lid", p.lid ? 1 : 0, 0, 0xbfff, where);
  p.lmc = get_int<uint8_t>(j, "lmc", 0, 0, 7, where);
  p.mtu = mtu_of(get_int<int>(j, "mtu", 4096, 0, 65536, where), where);
  p.width = get_int<uint8_t>(j, "active_width", 2, 1, 16, where);
  p.speed = get_int<uint8_t>(j, "active_speed", 64, 1, 255, where);
  p.rail = get_int<int>(j, "rail", rail, 0, 1 << 20, where);
  p.plane = get_int<int>(j, "plane", 0, 0, 1 << 20, where);
  if (!p.ethernet && p.lid == 0 && p.active) fail(where + ".lid", "an ACTIVE IB port needs a LID");
  if (j.contains("gids")) {
    const json& gids = get_array(j, "gids", where);
    for (size_t i = 0; i < gids.size(); ++i) {
      std::string w = where + ".gids[" + std::to_string(i) + "]";
      if (!gids[i].is_object()) fail(w, "expected an object");
      GidSpec g;
      if (!parse_gid(get_string(gids[i], "gid", "", w), g.gid)) fail(w + ".gid", "not an IPv6-form GID");
      g.type = gid_type_of(get_string(gids[i], "type", p.ethernet ? "RoCEv2" : "IB", w), w);
      if (p.ethernet == (g.type == GidType::ib)) fail(w + ".type", "does not match the port's link layer");
      p.gids.push_back(g);
    }
  } else if (!p.ethernet) {
    p.gids.push_back(default_ib_gid(dev.guid));
  }
  if (p.ethernet && p.gids.empty()) fail(where + ".gids", "an Ethernet (RoCE) port needs a GID table");
  return p;
}

DeviceSpec parse_device(const json& j, size_t host_index, size_t dev_index, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object");
  DeviceSpec d;
  d.name = get_string(j, "name", "", where);
  if (d.name.empty() || d.name.size() >= IBV_SYSFS_NAME_MAX) fail(where + ".name", "expected a device name");
  d.pci = get_string(j, "pci", "", where);
  d.board_id = get_string(j, "board_id", "SOFTHCA_0001", where);
  d.ibdev_path = get_string(j, "ibdev_path", "/sys/class/infiniband/" + d.name, where);
  if (d.ibdev_path.size() >= IBV_SYSFS_PATH_MAX) fail(where + ".ibdev_path", "too long");
  if (j.contains("dmabuf")) {
    if (!j.at("dmabuf").is_boolean()) fail(where + ".dmabuf", "expected true or false");
    d.dmabuf = j.at("dmabuf").get<bool>();
  }
  d.vendor_id = get_int<uint32_t>(j, "vendor_id", 0, 0, 0xffffff, where);
  d.vendor_part_id = get_int<uint32_t>(j, "vendor_part_id", 0, 0, 0xffffffff, where);
  d.guid = 0x0200'5348'4341'0000ULL | (host_index << 8) | dev_index;  // unique per host/device
  int rail = get_int<int>(j, "rail", 0, 0, 1 << 20, where);
  const json& ports = get_array(j, "ports", where);
  if (ports.empty()) fail(where + ".ports", "a device needs at least one port");
  for (size_t i = 0; i < ports.size(); ++i) {
    PortSpec p = parse_port(ports[i], d, rail, where + ".ports[" + std::to_string(i) + "]");
    if (p.num != static_cast<int>(i) + 1) fail(where + ".ports[" + std::to_string(i) + "].port", "ports are numbered 1, 2, ... in order");
    d.ports.push_back(std::move(p));
  }
  return d;
}

}  // namespace

bool parse_gid(std::string_view text, ibv_gid& out) {
  std::string s(text);
  return inet_pton(AF_INET6, s.c_str(), out.raw) == 1;
}

std::string gid_to_string(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

std::optional<Fabric> parse_fabric(std::string_view text, std::string& error) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) fail("fabric", "expected an object");
    Fabric f;
    std::string reach = get_string(j, "reachability", "any", "fabric");
    if (reach == "any") f.reach = Reach::any;
    else if (reach == "rail") f.reach = Reach::rail;
    else if (reach == "plane") f.reach = Reach::plane;
    else fail("fabric.reachability", "expected any, rail or plane");
    const json& hosts = get_array(j, "hosts", "fabric");
    for (size_t h = 0; h < hosts.size(); ++h) {
      std::string w = "fabric.hosts[" + std::to_string(h) + "]";
      if (!hosts[h].is_object()) fail(w, "expected an object");
      HostSpec hs;
      hs.name = get_string(hosts[h], "name", "", w);
      if (hs.name.empty() || hs.name.find('/') != std::string::npos) fail(w + ".name", "expected a host name without '/'");
      const json& devs = get_array(hosts[h], "devices", w);
      for (size_t d = 0; d < devs.size(); ++d)
        hs.devices.push_back(parse_device(devs[d], h, d, w + ".devices[" + std::to_string(d) + "]"));
      f.hosts.push_back(std::move(hs));
    }
    return f;
  } catch (const FabricError& e) {
    error = e.what;
  } catch (const json::exception& e) {
    error = std::string("fabric: ") + e.what();
  }
  return std::nullopt;
}

const PortSpec& port_of(const Fabric& f, const PortAddr& a) {
  return f.hosts[a.host].devices[a.dev].ports[a.port];
}

PortAddr find_by_lid(const Fabric& f, uint16_t dlid) {
  for (size_t h = 0; h < f.hosts.size(); ++h)
    for (size_t d = 0; d < f.hosts[h].devices.size(); ++d)
      for (size_t p = 0; p < f.hosts[h].devices[d].ports.size(); ++p) {
        const PortSpec& ps = f.hosts[h].devices[d].ports[p];
        if (!ps.ethernet && ps.lid && dlid >= ps.lid && dlid < ps.lid + (1u << ps.lmc))
          return {int(h), int(d), int(p)};
      }
  return {};
}

PortAddr find_by_gid(const Fabric& f, const ibv_gid& dgid) {
  for (size_t h = 0; h < f.hosts.size(); ++h)
    for (size_t d = 0; d < f.hosts[h].devices.size(); ++d)
      for (size_t p = 0; p < f.hosts[h].devices[d].ports.size(); ++p)
        for (const GidSpec& g : f.hosts[h].devices[d].ports[p].gids)
          if (std::memcmp(g.gid.raw, dgid.raw, 16) == 0) return {int(h), int(d), int(p)};
  return {};
}

bool reachable(const Fabric& f, const PortAddr& a, const PortAddr& b) {
  const PortSpec& pa = port_of(f, a);
  const PortSpec& pb = port_of(f, b);
  if (pa.ethernet != pb.ethernet) return false;
  switch (f.reach) {
    case Reach::any: return true;
    case Reach::rail: return pa.rail == pb.rail;
    case Reach::plane: return pa.rail == pb.rail && pa.plane == pb.plane;
  }
  return false;
}

}  // namespace softhca
