#pragma once
// Canonical names for the things logs name differently: PCI addresses (NVRM "PCI:0000:9b:00",
// NCCL busId "9b000", lspci "9b:00.0"), hosts (NCCL cuts at the first dot), switch ports
// (Ethernet112, swp3, Eth1/12, "ethernet 1/12").
#include <cstdint>
#include <string>
#include <string_view>

namespace astral::monitor::names {

// "dddd:bb:dd" (domain, bus, device; lowercase; function dropped) or "" when not a PCI address.
std::string canonical_pci(std::string_view any);
// NCCL's busId (%lx of domain<<20 | bus<<12 | device<<4 | function) to canonical_pci form.
std::string pci_from_nccl_bus_id(std::string_view hex);
// Short host name: cut at the first dot unless it is an IP address; lowercase.
std::string canonical_host(std::string_view host);
bool is_ip_address(std::string_view s);
// An IP from an address as logs print it: strips "<port>", "%ib0", "::ffff:" for IPv4.
std::string canonical_ip(std::string_view s);
// Port key for matching logs against the fabric: the interface's numbers with a letter class,
// e.g. Ethernet112 -> "e112", swp3 -> "3", swp1s2 -> "1s2", Eth1/12 -> "1/12", "12" -> "12".
std::string port_key(std::string_view port);
// True when two switch-port names plausibly denote the same port.
bool same_port(std::string_view a, std::string_view b);
// The NIC ordinal in "mlx5_3" (3), or -1.
int nic_ordinal(std::string_view nic);

}  // namespace astral::monitor::names
