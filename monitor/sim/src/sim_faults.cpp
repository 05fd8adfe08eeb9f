// Physical side of the injected faults: what the host kernel, the switch and the BMC log when a
// NIC dies, a link flaps, an optic degrades, a switch reboots or a GPU fails.
#include <cstdio>

#include "sim_faults.hpp"
#include "sim_job.hpp"

namespace astral::monitor::sim {

namespace {

std::string root_port(const std::string& gpu_bdf) {  // the switch port above the GPU
  unsigned bus = 0;
  std::sscanf(gpu_bdf.c_str() + 5, "%x", &bus);
  char buf[24];
  std::snprintf(buf, sizeof buf, "0000:%02x:01.0", (bus - 3) & 0xff);
  return buf;
}

std::string pci_short(const std::string& bdf) { return bdf.substr(0, 10); }  // 0000:9a:00

}  // namespace

void switch_port_state(World& w, int sw, const std::string& fabric_port, int64_t t, bool up) {
  const std::string port = w.port_name(sw, fabric_port);
  switch (w.switches[size_t(sw)].style) {
    case 0:
    case 1:
      w.switch_line(sw, t, "NOTICE", "swss#orchagent",
                    ":- updatePortOperStatus: Port " + port + " oper state set from " + (up ? "down to up" : "up to down"));
      break;
    case 2: w.switch_line(sw, t, "INFO", "switchd", port + ": link " + (up ? "up" : "down")); break;
    default:
      w.switch_line(sw, t, "NOTICE", "pmd", "Interface " + port + " changed state to " + (up ? "UP" : "DOWN"));
  }
}

void link_transition(World& w, int host, int nic, int64_t t, bool up, bool host_side, bool switch_side) {
  const Host& h = w.hosts[size_t(host)];
  const Nic& n = h.nics[size_t(nic)];
  if (host_side) w.kernel_line(host, t, "mlx5_core " + n.bdf + " " + n.netdev + ": Link " + (up ? "up" : "down"));
  if (switch_side) {
    auto it = w.switch_index.find(n.sw);
    if (it != w.switch_index.end()) switch_port_state(w, it->second, n.port, t + w.pick(10'000, 200'000), up);
  }
  for (int r : h.ranks)
    if (w.ranks[size_t(r)].nic == nic) port_event(w, w.ranks[size_t(r)], t + w.pick(100'000, 600'000), up);
}

void network_errors(World& w, int host, int nic, int64_t t) {
  const Host& h = w.hosts[size_t(host)];
  for (int v : h.ranks) {
    const Rank& victim = w.ranks[size_t(v)];
    if (victim.nic != nic) continue;
    for (int p : network_peers(w, victim)) {
      const Rank& peer = w.ranks[size_t(p)];
      completion_error(w, victim, t + w.pick(0, 4'000'000), w.hosts[size_t(peer.host)].oob_ip, 12);
      completion_error(w, peer, t + w.pick(0, 4'000'000), h.oob_ip, 12);
      if (w.chance(0.3)) completion_error(w, peer, t + w.pick(4'000'000, 6'000'000), h.oob_ip, 5);
    }
  }
}

void optic_alarm(World& w, int sw, const std::string& fabric_port, int64_t t, bool alarm) {
  const std::string port = w.port_name(sw, fabric_port);
  char dbm[16];
  std::snprintf(dbm, sizeof dbm, "%.1f", alarm ? -w.uniform(12.5, 16) : -w.uniform(9, 11));
  switch (w.switches[size_t(sw)].style) {
    case 0:
    case 1:
      w.switch_line(sw, t, alarm ? "WARNING" : "NOTICE", "pmon#xcvrd",
                    port + ": rx" + std::to_string(w.pick(1, 4)) + "power low " + (alarm ? "alarm" : "warning"));
      break;
    case 2:
      w.switch_line(sw, t, "WARNING", "switchd",
                    port + ": transceiver rx power low " + (alarm ? "alarm" : "warning") + " (" + dbm + " dBm)");
      break;
    default:
      w.switch_line(sw, t, "WARNING", "health",
                    port + " transceiver RX power is below the low " + (alarm ? "alarm" : "warning") + " threshold (" +
                        dbm + " dBm)");
  }
}

void ber_warning(World& w, int sw, const std::string& fabric_port, int64_t t) {
  const std::string port = w.port_name(sw, fabric_port);
  char ber[16];
  std::snprintf(ber, sizeof ber, "%.1e", w.uniform(2e-6, 9e-5));
  switch (w.switches[size_t(sw)].style) {
    case 0:
    case 1:
      w.switch_line(sw, t, "WARNING", "syncd#syncd",
                    ":- checkPortFec: " + port + ": FEC uncorrectable codewords increased by " +
                        std::to_string(w.pick(100, 9000)) + ", pre-FEC BER " + ber);
      break;
    case 2: w.switch_line(sw, t, "WARNING", "switchd", port + ": pre-FEC BER " + ber + " above threshold 1e-06"); break;
    default: w.switch_line(sw, t, "WARNING", "health", port + " link integrity: effective BER " + ber + " exceeds threshold");
  }
}

void switch_reboot(World& w, int sw, int64_t t, int64_t t_back, bool announce) {
  Switch& s = w.switches[size_t(sw)];
  if (announce) {
    switch (s.style) {
      case 0:
      case 1: w.switch_line(sw, t, "NOTICE", "admin", "Rebooting with /sbin/reboot -- cold"); break;
      case 2: w.switch_line(sw, t, "INFO", "systemd", "Reached target System Reboot."); break;
      default: w.switch_line(sw, t, "NOTICE", "mgmtd", "System is rebooting");
    }
  }
  s.boot_us = t_back - 60'000'000;
  w.switch_line(sw, s.boot_us, "INFO", "kernel",
                "[    0.000000] Linux version 5.10.0-30-2-amd64 (debian-kernel@lists.debian.org) #1 SMP Debian");
  if (s.style <= 1) w.switch_line(sw, t_back - 20'000'000, "NOTICE", "root", "Reboot cause: Unknown");
  for (const Cable* c : w.fabric->cables_on_switch(s.name)) switch_port_state(w, sw, c->sw.port, t_back + w.pick(0, 3'000'000), true);
}

void gpu_fell_off(World& w, int host, int gpu, int64_t t, int64_t pid, bool with_aer) {
  const Host& h = w.hosts[size_t(host)];
  const std::string bdf = h.gpu_bdf[size_t(gpu)];
  if (with_aer) {
    std::string rp = root_port(bdf);
    w.kernel_line(host, t - 120'000, "pcieport " + rp + ": AER: Uncorrected (Fatal) error received: " + rp);
    w.kernel_line(host, t - 119'900, "pcieport " + rp + ": PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)");
    w.kernel_line(host, t - 119'800, "pcieport " + rp + ":   device [10b5:c010] error status/mask=00000020/00000000");
    w.kernel_line(host, t - 119'700, "pcieport " + rp + ":    [ 5] Surprise Down Error    (First)");
  }
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%08llx-5b28-3bf6-2a2d-1d5ecae7f6df", static_cast<unsigned long long>(w.rng() & 0xffffffff));
  w.kernel_line(host, t, "NVRM: GPU at PCI:" + pci_short(bdf) + ": " + uuid);
  w.kernel_line(host, t + 20, "NVRM: GPU Board Serial Number: 1650124014" + std::to_string(w.pick(100, 999)));
  if (w.chance(0.5))
    w.kernel_line(host, t + 40, "NVRM: Xid (PCI:" + pci_short(bdf) + "): 79, pid=" + std::to_string(pid) +
                                    ", name=python3, GPU has fallen off the bus.");
  else
    w.kernel_line(host, t + 40, "NVRM: Xid (PCI:" + pci_short(bdf) + "): 79, GPU has fallen off the bus.");
  w.kernel_line(host, t + 60, "NVRM: GPU " + bdf + ": GPU has fallen off the bus.");
}

void gpu_ecc(World& w, int host, int gpu, int64_t t, int64_t pid) {
  const std::string pci = pci_short(w.hosts[size_t(host)].gpu_bdf[size_t(gpu)]);
  char addr[24];
  std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(w.rng() & 0xfffffffffULL));
  if (w.chance(0.6))
    w.kernel_line(host, t, "NVRM: Xid (PCI:" + pci + "): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
                           "bit error (DBE) has been detected on GPU in the framebuffer at physAddr " +
                               std::string(addr) + " partition " + std::to_string(w.pick(0, 7)) + ", subpartition 1");
  else
    w.kernel_line(host, t, "NVRM: Xid (PCI:" + pci + "): " + (w.chance(0.5) ? "95" : "94") + ", pid=" +
                               std::to_string(pid) + ", " + (w.chance(0.5) ? "Uncontained: FBHUB. RST: Yes, D-RST: No"
                                                                           : "Contained: CE User Channel (0x9). RST: No, D-RST: No"));
  if (w.chance(0.6))
    w.kernel_line(host, t + 800'000, "NVRM: Xid (PCI:" + pci + "): 63, pid=" + std::to_string(pid) +
                                         ", Row Remapper: New row marked for remapping, reset gpu to activate.");
}

void pcie_aer_burst(World& w, int host, int gpu, int64_t t) {
  const std::string bdf = w.hosts[size_t(host)].gpu_bdf[size_t(gpu)];
  std::string rp = root_port(bdf);
  w.kernel_line(host, t, "pcieport " + rp + ": AER: Uncorrected (Non-Fatal) error received: " + bdf);
  w.kernel_line(host, t + 30, "nvidia " + bdf + ": AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)");
  w.kernel_line(host, t + 60, "nvidia " + bdf + ": AER:   device [10de:2330] error status/mask=00004000/00000000");
  w.kernel_line(host, t + 90, "nvidia " + bdf + ": AER:    [14] CmpltTO                (First)");
}

void host_boot_lines(World& w, int host) {
  const Host& h = w.hosts[size_t(host)];
  int64_t t = h.boot_us + 1'000'000;
  w.kernel_line(host, t, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13) #45-Ubuntu SMP");
  for (size_t n = 0; n < h.nics.size(); ++n) {
    w.kernel_line(host, t + 9'000'000 + int64_t(n) * 40'000, "mlx5_core " + h.nics[n].bdf + ": firmware version: 28.39.1002");
    w.kernel_line(host, t + 11'000'000 + int64_t(n) * 40'000,
                  "mlx5_core " + h.nics[n].bdf + " " + h.nics[n].netdev + ": renamed from eth" + std::to_string(n + 1));
  }
  w.kernel_line(host, t + 14'000'000, "nvidia: loading out-of-tree module taints kernel.");
  w.kernel_line(host, t + 14'500'000, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024");
  for (size_t n = 0; n < h.nics.size(); ++n)
    w.kernel_line(host, t + 30'000'000 + int64_t(n) * 10'000, "mlx5_core " + h.nics[n].bdf + " " + h.nics[n].netdev + ": Link up");
}

}  // namespace astral::monitor::sim
