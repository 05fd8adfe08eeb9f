// Fabric validation, lookup indexes and operator-facing names.
#include "astral/topo/fabric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include "fabric_detail.hpp"

namespace astral::topo {
namespace {

using detail::fail;
using detail::parse_int;

constexpr int kMaxLanes = 8;
constexpr int kMaxRadix = 4096;
constexpr int kMaxNicPorts = 16;

std::uint64_t host_key(int host, int nic, int port) {
  return (std::uint64_t(host) << 24) | (std::uint64_t(nic) << 12) | std::uint64_t(port);
}
std::uint64_t switch_key(int sw, int port, int lane) {
  return (std::uint64_t{1} << 62) | (std::uint64_t(sw) << 24) | (std::uint64_t(port) << 8) |
         std::uint64_t(lane);
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

void check_name(const std::string& name, const char* what, size_t index) {
  if (name.empty()) fail(fmt::format("{} {} has an empty name", what, index));
  if (name.find(':') != std::string::npos || name.find('#') == 0)
    fail(fmt::format("{} '{}': names may not contain ':' or start with '#'", what, name));
}

}  // namespace

Fabric::Fabric(FabricData data) : data_(std::move(data)) {
  validate();
  build_indexes();
}

void Fabric::validate() {
  if (data_.rails < 1 || data_.rails > 64) fail(fmt::format("rails = {}: must be 1..64", data_.rails));
  if (data_.planes < 1 || data_.planes > 8)
    fail(fmt::format("planes = {}: must be 1..8", data_.planes));

  std::set<std::string> names;
  for (size_t i = 0; i < data_.profiles.size(); ++i) {
    const NodeProfile& p = data_.profiles[i];
    if (p.name.empty()) fail(fmt::format("profile {} has an empty name", i));
    if (p.gpus < 1 || p.gpus > 64)
      fail(fmt::format("profile '{}': gpus = {}: must be 1..64", p.name, p.gpus));
    if (p.nvlink_gbps < 0) fail(fmt::format("profile '{}': nvlink_gbps is negative", p.name));
    for (const NicModel& nic : p.nics) {
      if (nic.name.empty()) fail(fmt::format("profile '{}': a NIC has an empty name", p.name));
      if (nic.rail < 0 || nic.rail >= data_.rails)
        fail(fmt::format("profile '{}' NIC {}: rail {} is outside 0..{}", p.name, nic.name, nic.rail,
                         data_.rails - 1));
      if (nic.ports < 1 || nic.ports > kMaxNicPorts)
        fail(fmt::format("profile '{}' NIC {}: ports = {}: must be 1..{}", p.name, nic.name,
                         nic.ports, kMaxNicPorts));
      if (!(nic.port_gbps > 0))
        fail(fmt::format("profile '{}' NIC {}: port_gbps must be > 0", p.name, nic.name));
      for (int g : nic.gpus)
        if (g < 0 || g >= p.gpus)
          fail(fmt::format("profile '{}' NIC {}: GPU {} is outside 0..{}", p.name, nic.name, g,
                           p.gpus - 1));
    }
  }
  for (size_t i = 0; i < data_.hosts.size(); ++i) {
    const Host& h = data_.hosts[i];
    check_name(h.name, "host", i);
    if (!names.insert(h.name).second) fail(fmt::format("host '{}' is defined twice", h.name));
    if (h.profile < 0 || h.profile >= int(data_.profiles.size()))
      fail(fmt::format("host '{}': profile index {} does not exist", h.name, h.profile));
  }
  for (size_t i = 0; i < data_.switches.size(); ++i) {
    const Switch& s = data_.switches[i];
    check_name(s.name, "switch", i);
    if (!names.insert(s.name).second)
      fail(fmt::format("switch '{}': the name is already used by another host or switch", s.name));
    if (s.tier < 1 || s.tier > 3) fail(fmt::format("switch '{}': tier {} is not 1..3", s.name, s.tier));
    if (s.radix < 1 || s.radix > kMaxRadix)
      fail(fmt::format("switch '{}': impossible radix {} (1..{})", s.name, s.radix, kMaxRadix));
    if (!(s.port_gbps > 0)) fail(fmt::format("switch '{}': port_gbps must be > 0", s.name));
    if (s.plane < 0 || s.plane >= data_.planes)
      fail(fmt::format("switch '{}': plane {} is outside 0..{}", s.name, s.plane, data_.planes - 1));
    if (s.rail < kAnyRail || s.rail >= data_.rails)
      fail(fmt::format("switch '{}': rail {} is outside 0..{}", s.name, s.rail, data_.rails - 1));
  }

  // Links: ends exist, ports within radix, no port used twice, lanes fit their port.
  std::unordered_map<std::uint64_t, size_t> used;        // endpoint -> link
  used.reserve(data_.links.size() * 2);
  // Per switch port: (links on it whole, Gb/s of its lanes), flat: a 131K-GPU fabric has 655K.
  std::vector<std::size_t> port_base(data_.switches.size() + 1, 0);
  for (size_t sw = 0; sw < data_.switches.size(); ++sw)
    port_base[sw + 1] = port_base[sw] + std::size_t(data_.switches[sw].radix);
  std::vector<std::pair<int, double>> port_lanes(port_base.back());
  auto where = [&](size_t i) { return fmt::format("link {}", i); };
  for (size_t i = 0; i < data_.links.size(); ++i) {
    Link& l = data_.links[i];
    if (l.b.is_host() && !l.a.is_host()) std::swap(l.a, l.b);
    if (l.a.is_host() && l.b.is_host())
      fail(fmt::format("{}: joins two hosts; a link joins a host port to a switch port or two "
                       "switches", where(i)));
    if (!(l.gbps > 0)) fail(fmt::format("{}: gbps must be > 0", where(i)));
    for (const Endpoint* e : {&l.a, &l.b}) {
      if (e->is_host()) {
        if (e->host >= int(data_.hosts.size()))
          fail(fmt::format("{}: dangling end: host index {} does not exist", where(i), e->host));
        const Host& h = data_.hosts[e->host];
        const NodeProfile& p = data_.profiles[h.profile];
        if (e->nic < 0 || e->nic >= int(p.nics.size()))
          fail(fmt::format("{}: dangling end: host '{}' has no NIC {}", where(i), h.name, e->nic));
        const NicModel& nic = p.nics[e->nic];
        if (e->port < 1 || e->port > nic.ports)
          fail(fmt::format("{}: dangling end: {}:{} has no port {}", where(i), h.name, nic.name,
                           e->port));
        if (l.gbps > nic.port_gbps + 1e-9)
          fail(fmt::format("{}: runs at {} Gb/s but {}:{} ports are {} Gb/s", where(i), l.gbps,
                           h.name, nic.name, nic.port_gbps));
        auto [it, fresh] = used.emplace(host_key(e->host, e->nic, e->port), i);
        if (!fresh)
          fail(fmt::format("port {}:{}:{} is cabled twice (links {} and {})", h.name, nic.name,
                           e->port, it->second, i));
      } else {
        if (e->sw < 0 || e->sw >= int(data_.switches.size()))
          fail(fmt::format("{}: dangling end: switch index {} does not exist", where(i), e->sw));
        const Switch& s = data_.switches[e->sw];
        if (e->port < 1 || e->port > s.radix)
          fail(fmt::format("{}: impossible radix: uses port {} of switch '{}', which has {} ports",
                           where(i), e->port, s.name, s.radix));
        if (e->lane < 0 || e->lane > kMaxLanes)
          fail(fmt::format("{}: lane {} of {}:{} is outside 0..{}", where(i), e->lane, s.name,
                           e->port, kMaxLanes));
        if (l.gbps > s.port_gbps + 1e-9)
          fail(fmt::format("{}: runs at {} Gb/s but '{}' ports are {} Gb/s", where(i), l.gbps,
                           s.name, s.port_gbps));
        auto [it, fresh] = used.emplace(switch_key(e->sw, e->port, e->lane), i);
        if (!fresh)
          fail(fmt::format("port {}:{} is cabled twice (links {} and {})", s.name,
                           port_label(e->port, e->lane), it->second, i));
        auto& [whole, lane_gbps] = port_lanes[port_base[e->sw] + std::size_t(e->port - 1)];
        if (e->lane == 0) whole += 1;
        lane_gbps += e->lane == 0 ? 0 : l.gbps;
        if (whole > 0 && lane_gbps > 0)
          fail(fmt::format("port {}:{} is used both whole and broken out into lanes", s.name,
                           e->port));
        if (lane_gbps > s.port_gbps + 1e-9)
          fail(fmt::format("port {}:{}: its lanes add up to {} Gb/s, more than the port's {} Gb/s",
                           s.name, e->port, lane_gbps, s.port_gbps));
      }
    }
    if (l.a.is_host() && data_.switches[l.b.sw].tier != 1)
      fail(fmt::format("{}: host port {} is cabled to '{}' at tier {}; hosts attach to leaves "
                       "(tier 1)",
                       where(i), endpoint_label(l.a), data_.switches[l.b.sw].name,
                       data_.switches[l.b.sw].tier));
    check_planes(i);
  }

  // Every rail that has NICs must reach at least one switch.
  std::vector<int> rail_nics(data_.rails, 0), rail_cabled(data_.rails, 0);
  size_t uncabled = 0;
  for (size_t h = 0; h < data_.hosts.size(); ++h) {
    const NodeProfile& p = data_.profiles[data_.hosts[h].profile];
    for (size_t n = 0; n < p.nics.size(); ++n) {
      rail_nics[p.nics[n].rail]++;
      for (int port = 1; port <= p.nics[n].ports; ++port) {
        if (used.count(host_key(int(h), int(n), port)))
          rail_cabled[p.nics[n].rail]++;
        else
          ++uncabled;
      }
    }
  }
  for (int r = 0; r < data_.rails; ++r) {
    if (rail_nics[r] > 0 && rail_cabled[r] == 0)
      fail(fmt::format("rail {} has no switch: none of its {} NICs is cabled to a leaf", r,
                       rail_nics[r]));
  }
  if (uncabled > 0)
    warnings_.push_back(fmt::format("{} NIC port(s) have no cable in this description", uncabled));
}

// Planes are separate networks: a switch link stays in its plane, and a NIC with one port per
// plane has port p on plane p-1 (QP k uses port k on both ends, so the ends must meet).
void Fabric::check_planes(size_t i) const {
  if (data_.planes == 1) return;
  const Link& l = data_.links[i];
  const Switch& upper = data_.switches[l.b.sw];
  if (!l.a.is_host()) {
    const Switch& lower = data_.switches[l.a.sw];
    if (lower.plane != upper.plane)
      fail(fmt::format("link {}: inconsistent planes: joins '{}' (plane {}) and '{}' (plane {}); "
                       "each plane is its own network",
                       i, lower.name, lower.plane, upper.name, upper.plane));
    return;
  }
  const NicModel& nic = data_.profiles[data_.hosts[l.a.host].profile].nics[l.a.nic];
  if (nic.ports == data_.planes && upper.plane != l.a.port - 1)
    fail(fmt::format("link {}: inconsistent planes: {}:{}:{} is cabled to '{}' of plane {}; port {} "
                     "of a NIC with one port per plane belongs to plane {}",
                     i, data_.hosts[l.a.host].name, nic.name, l.a.port, upper.name, upper.plane,
                     l.a.port, l.a.port - 1));
}

void Fabric::build_indexes() {
  gpu_offset_.assign(data_.hosts.size() + 1, 0);
  for (size_t h = 0; h < data_.hosts.size(); ++h)
    gpu_offset_[h + 1] = gpu_offset_[h] + data_.profiles[data_.hosts[h].profile].gpus;
  host_of_gpu_.resize(gpu_offset_.back());
  for (size_t h = 0; h < data_.hosts.size(); ++h)
    std::fill(host_of_gpu_.begin() + gpu_offset_[h], host_of_gpu_.begin() + gpu_offset_[h + 1], int(h));
  switch_links_.assign(data_.switches.size(), {});
  host_links_.assign(data_.hosts.size(), {});
  for (size_t h = 0; h < data_.hosts.size(); ++h) host_by_name_[data_.hosts[h].name] = int(h);
  for (size_t s = 0; s < data_.switches.size(); ++s) switch_by_name_[data_.switches[s].name] = int(s);
  link_by_port_.reserve(data_.links.size() * 2);
  for (size_t i = 0; i < data_.links.size(); ++i) {
    const Link& l = data_.links[i];
    for (const Endpoint* e : {&l.a, &l.b}) {
      if (e->is_host()) {
        host_links_[e->host].push_back(int(i));
        link_by_port_[host_key(e->host, e->nic, e->port)] = int(i);
      } else {
        switch_links_[e->sw].push_back(int(i));
        link_by_port_[switch_key(e->sw, e->port, e->lane)] = int(i);
      }
    }
  }
  for (size_t s = 0; s < data_.switches.size(); ++s)
    if (switch_links_[s].empty())
      warnings_.push_back(fmt::format("switch '{}' has no links", data_.switches[s].name));
}

int Fabric::nic_of_gpu(int host, int local_gpu) const {
  const NodeProfile& p = profile_of(host);
  for (size_t n = 0; n < p.nics.size(); ++n)
    for (int g : p.nics[n].gpus)
      if (g == local_gpu) return int(n);
  return -1;
}

int Fabric::rail_of_gpu(int host, int local_gpu) const {
  int nic = nic_of_gpu(host, local_gpu);
  return nic < 0 ? -1 : profile_of(host).nics[nic].rail;
}

int Fabric::nic_on_rail(int host, int rail) const {
  const NodeProfile& p = profile_of(host);
  for (size_t n = 0; n < p.nics.size(); ++n)
    if (p.nics[n].rail == rail) return int(n);
  return -1;
}

int Fabric::gpu_on_rail(int host, int rail) const {
  int nic = nic_on_rail(host, rail);
  if (nic < 0) return -1;
  const auto& gpus = profile_of(host).nics[nic].gpus;
  return gpus.empty() ? -1 : gpus.front();
}

std::optional<int> Fabric::find_host(std::string_view name) const {
  auto it = host_by_name_.find(std::string(name));
  if (it == host_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> Fabric::find_switch(std::string_view name) const {
  auto it = switch_by_name_.find(std::string(name));
  if (it == switch_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<Endpoint> Fabric::parse_endpoint(std::string_view text) const {
  auto parts = split(text, ':');
  Endpoint e;
  if (parts.size() == 3) {  // host:nic:port
    auto host = find_host(parts[0]);
    if (!host) return std::nullopt;
    const NodeProfile& p = profile_of(*host);
    int nic = -1;
    for (size_t n = 0; n < p.nics.size(); ++n)
      if (p.nics[n].name == parts[1]) nic = int(n);
    if (nic < 0 && !parse_int(parts[1], nic)) return std::nullopt;
    if (nic < 0 || nic >= int(p.nics.size())) return std::nullopt;
    if (!parse_int(parts[2], e.port) || e.port < 1 || e.port > p.nics[nic].ports) return std::nullopt;
    e.host = *host;
    e.nic = nic;
    return e;
  }
  if (parts.size() == 2) {  // switch:port[/lane]
    auto sw = find_switch(parts[0]);
    if (!sw) return std::nullopt;
    auto port_lane = split(parts[1], '/');
    if (port_lane.size() > 2 || !parse_int(port_lane[0], e.port)) return std::nullopt;
    if (port_lane.size() == 2 && (!parse_int(port_lane[1], e.lane) || e.lane < 1))
      return std::nullopt;
    e.sw = *sw;
    return e;
  }
  return std::nullopt;
}

std::optional<int> Fabric::find_link(std::string_view spec) const {
  if (!spec.empty() && spec[0] == '#') {
    int index = -1;
    if (!parse_int(spec.substr(1), index) || index < 0 || index >= int(data_.links.size()))
      return std::nullopt;
    return index;
  }
  auto e = parse_endpoint(spec);
  if (!e) return std::nullopt;
  int link = e->is_host() ? link_at_host_port(e->host, e->nic, e->port)
                          : link_at_switch_port(e->sw, e->port, e->lane);
  if (link < 0) return std::nullopt;
  return link;
}

int Fabric::link_at_host_port(int host, int nic, int port) const {
  auto it = link_by_port_.find(host_key(host, nic, port));
  return it == link_by_port_.end() ? -1 : it->second;
}

int Fabric::link_at_switch_port(int sw, int port, int lane) const {
  auto it = link_by_port_.find(switch_key(sw, port, lane));
  return it == link_by_port_.end() ? -1 : it->second;
}

Attachment Fabric::attachment(int host, int nic, int port) const {
  Attachment a;
  a.link = link_at_host_port(host, nic, port);
  if (a.link < 0) return a;
  const Endpoint& sw_end = data_.links[a.link].b;
  a.sw = sw_end.sw;
  a.port = sw_end.port;
  a.lane = sw_end.lane;
  return a;
}

std::string Fabric::port_label(int port, int lane) {
  return lane > 0 ? fmt::format("{}/{}", port, lane) : fmt::format("{}", port);
}

std::string Fabric::endpoint_label(const Endpoint& e) const {
  if (e.is_host()) {
    const Host& h = data_.hosts[e.host];
    return fmt::format("{}:{}:{}", h.name, data_.profiles[h.profile].nics[e.nic].name, e.port);
  }
  return fmt::format("{}:{}", data_.switches[e.sw].name, port_label(e.port, e.lane));
}

std::string Fabric::link_label(int link) const {
  const Link& l = data_.links.at(link);
  return endpoint_label(l.a) + " <-> " + endpoint_label(l.b);
}

}  // namespace astral::topo
