#include "names.hpp"

#include "text.hpp"

namespace astral::monitor::names {
using namespace text;

namespace {
// "%04x:%02x:%02x" by hand: snprintf cost more than the rest of the line that needs it.
std::string format_pci(unsigned domain, unsigned bus, unsigned dev) {
  static constexpr char kHex[] = "0123456789abcdef";
  char buf[10];
  const unsigned fields[3][2] = {{domain, 4}, {bus, 2}, {dev, 2}};
  size_t n = 0;
  for (const auto& [value, width] : fields) {
    if (n) buf[n++] = ':';
    for (unsigned i = width; i-- > 0;) buf[n++] = kHex[(value >> (4 * i)) & 0xf];
  }
  return std::string(buf, n);
}
}  // namespace

std::string canonical_pci(sv s) {
  s = trim(s);
  if (starts_with(s, "PCI:") || starts_with(s, "pci:")) s.remove_prefix(4);
  // Split on ':' -> [domain:]bus:dev[.fn]
  unsigned parts[3] = {0, 0, 0};
  int n = 0;
  sv t = s;
  while (n < 3) {
    size_t len = 0;
    unsigned v = 0;
    while (len < t.size() && is_hex(t[len]) && len < 4) {
      char c = t[len];
      v = v * 16 + unsigned(is_digit(c) ? c - '0' : lower(c) - 'a' + 10);
      ++len;
    }
    if (len == 0) break;
    parts[n++] = v;
    t.remove_prefix(len);
    if (t.empty() || t[0] != ':') break;
    t.remove_prefix(1);
  }
  unsigned domain = 0, bus, dev;
  if (n == 3) {
    domain = parts[0];
    bus = parts[1];
    dev = parts[2];
  } else if (n == 2) {
    bus = parts[0];
    dev = parts[1];
  } else {
    return {};
  }
  if (bus > 0xff || dev > 0xff) return {};
  return format_pci(domain, bus, dev);
}

std::string pci_from_nccl_bus_id(sv hex) {
  sv t = hex;
  auto v = take_hex(t);
  if (!v) return {};
  unsigned domain = unsigned(*v >> 20), bus = unsigned((*v >> 12) & 0xff), dev = unsigned((*v >> 4) & 0xff);
  return format_pci(domain & 0xffff, bus, dev);
}

bool is_ip_address(sv s) {
  if (s.empty()) return false;
  if (s.find(':') != sv::npos) {
    for (char c : s)
      if (!is_hex(c) && c != ':' && c != '.' && c != '%') return false;
    return true;
  }
  int dots = 0;
  for (char c : s) {
    if (c == '.') ++dots;
    else if (!is_digit(c)) return false;
  }
  return dots == 3;
}

std::string canonical_host(sv host) {
  host = trim(host);
  if (!is_ip_address(host)) {
    size_t dot = host.find('.');
    if (dot != sv::npos && dot > 0) host = host.substr(0, dot);
  }
  return to_lower(host);
}

std::string canonical_ip(sv s) {
  s = trim(s);
  size_t lt = s.find('<');
  if (lt != sv::npos) s = s.substr(0, lt);
  size_t pct = s.find('%');
  if (pct != sv::npos) s = s.substr(0, pct);
  if (starts_with(s, "::ffff:") && s.find('.') != sv::npos) s.remove_prefix(7);
  return to_lower(s);
}

std::string port_key(sv port) {
  port = trim(port);
  std::string lower_port = to_lower(port);
  sv p = lower_port;
  // Drop a leading interface word: Ethernet/Eth/ethernet/swp/IB/Port/et/te/...
  size_t i = 0;
  while (i < p.size() && is_alpha(p[i])) ++i;
  sv word = p.substr(0, i);
  sv rest = ltrim(p.substr(i));
  std::string key;
  // SONiC's EthernetN counts lanes; keep a class letter so it never equals a front-panel index.
  if (word == "ethernet" && !rest.empty() && rest.find('/') == sv::npos) key.push_back('e');
  for (char c : rest)
    if (is_digit(c) || c == '/' || c == 's' || c == '.') key += c;
  return key;
}

bool same_port(sv a, sv b) {
  if (a == b) return true;
  std::string ka = port_key(a), kb = port_key(b);
  if (ka.empty() || kb.empty()) return false;
  if (ka == kb) return true;
  // "1/12" (Onyx Eth1/12) vs "12" (a plain index): compare the last number when one side has no
  // slot and neither is a SONiC lane name.
  if (ka[0] == 'e' || kb[0] == 'e') return false;
  auto last = [](const std::string& k) {
    size_t slash = k.rfind('/');
    return slash == std::string::npos ? k : k.substr(slash + 1);
  };
  bool a_slot = ka.find('/') != std::string::npos, b_slot = kb.find('/') != std::string::npos;
  if (a_slot != b_slot) return last(ka) == last(kb) && (ka.rfind("1/", 0) == 0 || kb.rfind("1/", 0) == 0);
  return false;
}

int nic_ordinal(sv nic) {
  size_t us = nic.rfind('_');
  if (us == sv::npos) return -1;
  sv t = nic.substr(us + 1);
  auto v = take_uint(t);
  return v && t.empty() ? int(*v) : -1;
}

}  // namespace astral::monitor::names
