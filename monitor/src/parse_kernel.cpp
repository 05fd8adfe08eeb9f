// Kernel messages (log-formats.md §4.1–4.4): NVRM Xid and "fallen off the bus", NVSwitch SXid,
// PCIe AER (native and firmware-first), mlx5 link, module and health events, netdev carrier,
// process crashes, OOM kills, machine checks and reboots.
#include <string>

#include "keywords.hpp"
#include "line_parser.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

// "0000:00:02.0:" -> "0000:00:02.0" (consumes the colon that ends it).
sv take_pci_token(sv& t) {
  size_t i = 0;
  while (i < t.size() && (is_hex(t[i]) || t[i] == ':' || t[i] == '.')) ++i;
  sv tok = t.substr(0, i);
  t.remove_prefix(i);
  if (!tok.empty() && tok.back() == ':') tok.remove_suffix(1);
  return tok;
}

// Xid catalog (log-formats.md §4.1): what an Xid means for root-cause ranking.
Severity xid_severity(int xid) {
  switch (xid) {
    case 13: case 31: case 43: case 45: case 63: case 92: case 154: return Severity::warning;
    case 79: case 48: case 95: case 64: case 74: case 62: case 119: case 120: case 140:
    case 143: case 136: case 46: case 109: case 94:
      return Severity::critical;
    default:
      return xid >= 144 && xid <= 150 ? Severity::critical : Severity::error;
  }
}

// "NVRM: Xid (PCI:0000:9b:00[ GPU-I:05]): 79, pid=0, name=x, text"
Match xid_line(LineParser& p, sv body, size_t at) {
  sv t = body.substr(at);
  t.remove_prefix(t.find('(') + 1);
  sv addr = take_until(t, ")");
  if (!take(t, ')')) return Match::damaged;
  take(t, ':');
  t = ltrim(t);
  auto code = take_uint(t);
  if (!code) return Match::damaged;
  sv pci_part = addr;
  size_t space = pci_part.find(' ');
  if (space != sv::npos) pci_part = pci_part.substr(0, space);
  std::string pci = names::canonical_pci(pci_part);
  int xid = int(*code);
  Event& e = p.emit(Layer::kernel, xid_severity(xid), "xid", ComponentKind::gpu, body.substr(at));
  e.component.device = pci.empty() ? std::string(addr) : pci;
  e.keys.xid = xid;
  take(t, ',');
  t = ltrim(t);
  if (take(t, "pid=")) {
    sv pid = take_until(t, ",");
    if (!pid.empty() && is_digit(pid[0])) e.set_attr("pid", std::string(pid));
    take(t, ',');
    t = ltrim(t);
  }
  if (take(t, "name=")) {
    e.set_attr("process", std::string(take_until(t, ",")));
    take(t, ',');
    t = ltrim(t);
  }
  e.set_attr("text", std::string(trim(t)));
  if (auto prev = int_after(t, "caused by previous Xid ")) e.set_attr("caused_by_xid", std::to_string(*prev));
  if (contains(t, "Nonfatal")) e.severity = Severity::warning;
  return Match::known;
}

// The PCI address after "GPU " / "GPU at " / "The NVIDIA GPU " ("0000:09:00.0", "PCI:0000:08:00").
std::string gpu_address_after(sv t) {
  t = ltrim(t);
  take(t, "The NVIDIA ");
  if (!take(t, "GPU ")) return "";
  take(t, "at ");
  take(t, "PCI:");
  return names::canonical_pci(take_pci_token(t));
}

// "NVRM: GPU6 _kgspIsHeartbeatTimedOut: ..." names the GPU by the driver's index.
void set_gpu_index(Event& e, sv msg) {
  sv t = ltrim(msg.substr(5));
  if (!take(t, "GPU") || t.empty() || !is_digit(t[0])) return;
  if (auto n = take_uint(t); n && starts_with(t, " ")) e.set_attr("gpu_index", std::to_string(*n));
}

// The GPU the driver said it lost: "fallen off the bus" (Xid 79's wording, the pre-Xid one and
// the three-line one of 570+ drivers, whose address is on the first line).
Match fallen_off(LineParser& p, sv msg) {
  std::string pci = gpu_address_after(msg.substr(5));
  if (pci.empty() && p.nvrm_gpu_line + 3 >= p.current_line()) pci = p.nvrm_gpu;
  Event& e = p.emit(Layer::kernel, Severity::critical, "gpu_fallen_off_bus", ComponentKind::gpu, msg);
  e.component.device = pci;
  e.keys.xid = 79;
  return Match::known;
}

// GSP firmware and RPC failures: the GPU stopped answering its driver.
Match gsp_or_rpc(LineParser& p, sv msg) {
  const bool lost = contains(msg, "NV_ERR_GPU_IS_LOST") || contains(msg, "GPU lost from the bus");
  const bool gsp = contains(msg, "_kgspIsHeartbeatTimedOut") || contains(msg, "GSP Timeout") ||
                   contains(msg, "Timeout waiting for RPC from GSP") || contains(msg, "_kgspLogRpcTimeout");
  const bool rpc = contains(msg, "rpcSendMessage failed") || contains(msg, "rpcRecvPoll");
  if (!lost && !gsp && !rpc) return Match::none;
  sv kind = lost ? "gpu_lost" : gsp ? "gpu_gsp_timeout" : "gpu_rpc_failure";
  Event& e = p.emit(Layer::kernel, lost ? Severity::critical : Severity::error, kind, ComponentKind::gpu, msg);
  if (!p.nvrm_gpu.empty() && p.nvrm_gpu_line + 3 >= p.current_line()) e.component.device = p.nvrm_gpu;
  set_gpu_index(e, msg);
  if (auto st = token_after(msg, "with status ", " ")) e.set_attr("status", std::string(*st));
  if (auto fn = int_after(msg, " for fn ")) e.set_attr("rpc_function", std::to_string(*fn));
  return Match::known;
}

Match nvrm_line(LineParser& p, sv body, size_t at) {
  sv msg = body.substr(at);
  if (starts_with(msg, "NVRM: Xid")) return xid_line(p, body, at);
  if (contains(msg, "fallen off the bus")) return fallen_off(p, msg);
  if (Match m = gsp_or_rpc(p, msg); m != Match::none) return m;
  // "NVRM: The NVIDIA GPU 0000:b3:00.0" (first line of a wrapped message) and the identity line
  // "NVRM: GPU at PCI:0000:08:00: GPU-<uuid>": remembered for the lines after it.
  if (std::string pci = gpu_address_after(msg.substr(5)); !pci.empty()) {
    p.nvrm_gpu = pci;
    p.nvrm_gpu_line = p.current_line();
    if (auto gpu_at = after(msg, "GPU at PCI:")) {
      sv t = *gpu_at;
      take_pci_token(t);
      t = ltrim(t);
      std::string key = "gpu:" + std::string(p.host()) + ":" + pci;
      if (starts_with(t, "GPU-") && p.seen.insert(key).second) {
        Event& e = p.emit(Layer::kernel, Severity::debug, "gpu_identity", ComponentKind::gpu, msg);
        e.component.device = pci;
        e.set_attr("uuid", std::string(take_until(t, " ")));
      }
    }
  }
  return Match::known;  // crash-dump notices, serial numbers, GSP RPC history
}

// "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 ..."
Match sxid_line(LineParser& p, sv body, size_t at) {
  sv t = body.substr(at);
  t.remove_prefix(t.find('(') + 1);
  sv addr = take_until(t, ")");
  if (!take(t, ')')) return Match::damaged;
  take(t, ':');
  t = ltrim(t);
  auto code = take_uint(t);
  if (!code) return Match::damaged;
  bool fatal = contains(t, "Fatal") && !contains(t, "Non-fatal");
  Event& e = p.emit(Layer::kernel, fatal ? Severity::critical : Severity::warning, "sxid",
                    ComponentKind::switch_, body);
  e.component.host = std::string(p.host());
  e.component.device = names::canonical_pci(addr);
  e.set_attr("sxid", std::to_string(*code));
  if (auto link = int_after(t, "Link ")) e.set_attr("link", std::to_string(*link));
  return Match::known;
}

// "<driver> <BDF>: " at the front of a kernel message; returns the driver and the BDF.
bool device_prefix(sv body, sv& driver, sv& bdf, sv& rest) {
  sv t = body;
  driver = take_until(t, " ");
  if (driver.empty() || !take(t, ' ')) return false;
  sv addr = take_pci_token(t);
  if (addr.size() < 7 || names::canonical_pci(addr).empty() || addr.find(':') == sv::npos) return false;
  bdf = addr;
  rest = t;
  return true;
}

// PCIe AER: reports are made by the root/downstream port; the endpoint behind it is named on
// the lines that follow ("nvidia 0000:03:00.0: AER: can't recover"). Each "error received"
// line and each "PCIe Bus Error" line yields an event; bit lines are attached to the last one.
Match aer_line(LineParser& p, sv body) {
  sv driver, bdf, rest;
  if (!device_prefix(body, driver, bdf, rest)) return Match::none;
  sv msg = ltrim(rest);
  take(msg, ':');
  msg = ltrim(msg);
  take(msg, "AER: ");
  std::string low = to_lower(msg);
  auto component = driver == "nvidia" ? ComponentKind::gpu
                   : starts_with(driver, "mlx5") ? ComponentKind::nic
                                                 : ComponentKind::host;
  auto severity_of = [](const std::string& s) {
    if (contains(s, "uncorrected (fatal)") || contains(s, "uncorrectable (fatal)") || contains(s, "severity=fatal"))
      return Severity::critical;
    if (contains(s, "uncorrect")) return Severity::error;
    return Severity::info;
  };
  if (contains(low, "error received") || contains(low, "error message received")) {
    Event& e = p.emit(Layer::kernel, severity_of(low), "pcie_aer", component, body);
    e.component.device = names::canonical_pci(bdf);
    e.set_attr("reporter", names::canonical_pci(bdf));
    e.set_attr("driver", std::string(driver));
    sv from = msg.substr(msg.rfind(' ') + 1);
    if (starts_with(from, "id=")) {
      sv id = from.substr(3);
      if (auto v = take_hex(id)) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "0000:%02x:%02x", unsigned(*v >> 8), unsigned((*v >> 3) & 0x1f));
        e.set_attr("source", buf);
      }
    } else if (!names::canonical_pci(from).empty()) {
      e.set_attr("source", names::canonical_pci(from));
    }
    p.aer_event = int64_t(p.out().events.size()) - 1;
    return Match::known;
  }
  if (contains(low, "pcie bus error")) {
    if (p.aer_event >= 0 && size_t(p.aer_event) < p.out().events.size()) {
      // Detail of the report just received: one incident, one event.
      Event& prev = p.out().events[size_t(p.aer_event)];
      if (prev.attr("reporter") == names::canonical_pci(bdf) && prev.line + 3 >= p.current_line()) {
        if (auto sev = token_after(msg, "severity=", ",")) prev.set_attr("aer_severity", std::string(*sev));
        if (auto type = token_after(msg, "type=", ",")) prev.set_attr("aer_type", std::string(*type));
        return Match::known;
      }
    }
    Event& e = p.emit(Layer::kernel, severity_of(low), "pcie_aer", component, body);
    e.component.device = names::canonical_pci(bdf);
    e.set_attr("driver", std::string(driver));
    if (auto sev = token_after(msg, "severity=", ",")) e.set_attr("aer_severity", std::string(*sev));
    if (auto type = token_after(msg, "type=", ",")) e.set_attr("aer_type", std::string(*type));
    p.aer_event = int64_t(p.out().events.size()) - 1;
    return Match::known;
  }
  if (ltrim(msg).size() && ltrim(msg)[0] == '[' && p.aer_event >= 0 &&
      size_t(p.aer_event) < p.out().events.size()) {  // "[ 5] Surprise Down Error (First)"
    Event& e = p.out().events[size_t(p.aer_event)];
    sv bit = trim(msg.substr(msg.find(']') + 1));
    std::string bits(e.attr("bits"));
    e.set_attr("bits", bits.empty() ? std::string(bit) : bits + "; " + std::string(bit));
    return Match::known;
  }
  if (contains(low, "can't recover") || contains(low, "recovery failed") || contains(low, "no aer-aware driver")) {
    bool endpoint = driver != "pcieport";
    Event& e = p.emit(Layer::kernel, contains(low, "aware") ? Severity::warning : Severity::error,
                      "pcie_aer_unrecovered", component, body);
    e.component.device = names::canonical_pci(bdf);
    e.set_attr("driver", std::string(driver));
    if (endpoint) e.set_attr("endpoint", "1");
    return Match::known;
  }
  if (contains(low, "error status/mask") || contains(low, "aer:") || contains(low, "error of this agent") ||
      contains(low, "broadcast error_detected") || contains(low, "link has been reset"))
    return Match::known;
  return Match::none;
}

// mlx5_core messages: "mlx5_core 0000:04:00.0 enp4s0f0np0: Link down",
// "mlx5_core 0000:5c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: ...".
// Phrases of mlx5 messages (matched in lower case), by what they make of the line.
enum Mlx5Word : uint32_t {
  kAccessReg = 1u << 0,          // ACCESS_REG / mlx5_cmd_out_err: counter reads, benign
  kModuleEvent = 1u << 1,        // "Port module event"
  kModuleError = 1u << 2,        // a module event that is a fault
  kUnplugged = 1u << 3,          // a module event that is a removal
  kInsufficientPower = 1u << 4,
  kHighTemperature = 1u << 5,    // also a module fault
  kHealth = 1u << 6,
  kHealthBad = 1u << 7,          // with kHealth: the health poller gave up
  kTimeout = 1u << 8,
  kFatal = 1u << 9,              // also makes a health line bad
};

const KeywordScanner& mlx5_words() {
  static constexpr Keyword kPhrases[] = {
      {"access_reg", kAccessReg},
      {"mlx5_cmd_out_err", kAccessReg},
      {"module event", kModuleEvent},
      {"[error]", kModuleError},
      {"cable error", kModuleError},
      {"high temperature", kModuleError | kHighTemperature},
      {"bad or shorted", kModuleError},
      {"fec sync loss", kModuleError},
      {"no carrier", kModuleError},
      {"unplugged", kUnplugged},
      {"disabled", kUnplugged},
      {"insufficient power", kInsufficientPower},
      {"health", kHealth},
      {"compromised", kHealthBad},
      {"aborted", kHealthBad},
      {"failed", kHealthBad},
      {"recovery", kHealthBad},
      {"fatal", kFatal | kHealthBad},
      {"internal error", kFatal},
      {"syndrome", kFatal},
      {"timeout", kTimeout},
  };
  static const KeywordScanner scanner(kPhrases);
  return scanner;
}

Match mlx5_line(LineParser& p, sv body, size_t at) {
  sv t = body.substr(at);
  sv driver = take_until(t, " :");
  t = ltrim(t);
  take(t, ':');
  t = ltrim(t);
  std::string bdf, netdev;
  sv probe = t;
  const size_t before = probe.size();
  sv addr = take_pci_token(probe);
  const bool ended_by_colon = before - probe.size() > addr.size();
  if (addr.size() >= 7 && addr.find(':') != sv::npos) bdf = names::canonical_pci(addr);
  if (!bdf.empty()) {
    t = probe;
    if (!ended_by_colon) {  // "0000:04:00.0 enp4s0f0np0: Link up"
      t = ltrim(t);
      netdev = std::string(take_until(t, ":"));
      take(t, ':');
    }
  } else {
    t = body.substr(at + driver.size());  // FreeBSD "mlx5_core0: INFO: ..."
    take(t, ':');
  }
  sv msg = trim(t);
  const bool module_func = contains(body.substr(at), "module_event");
  // Strip "func:line:(pid N): "
  if (size_t pid = find(msg, "(pid "); pid != sv::npos && pid < 64) {
    size_t close = msg.find("):", pid);
    if (close != sv::npos) msg = trim(msg.substr(close + 2));
  }
  take(msg, "INFO: ");
  auto nic_event = [&](Severity s, sv kind, ComponentKind c) -> Event& {
    Event& e = p.emit(Layer::kernel, s, kind, c, body.substr(at));
    e.component.device = netdev.empty() ? bdf : netdev;
    if (!bdf.empty()) e.set_attr("bdf", bdf);
    if (!netdev.empty()) e.set_attr("netdev", netdev);
    return e;
  };
  std::string low = to_lower(msg);
  const uint32_t w = mlx5_words().scan(low);  // one pass instead of a search per phrase
  if (w & kAccessReg) return Match::known;  // benign, counter reads
  if (low == "link down" || starts_with(low, "link down")) {
    nic_event(Severity::error, "nic_link_down", ComponentKind::port);
    return Match::known;
  }
  if (low == "link up" || starts_with(low, "link up")) {
    nic_event(Severity::info, "nic_link_up", ComponentKind::port);
    return Match::known;
  }
  // IB port state changes of mlx5_ib: "Port: 1 Link DOWN" / "Port: 1 Link ACTIVE" (also INIT, ARM).
  if (starts_with(low, "port: ")) {
    sv u = sv(low).substr(6);
    auto port = take_uint(u);
    if (port && take(u, " link ")) {
      const bool down = starts_with(u, "down");
      Event& e = nic_event(down ? Severity::error : Severity::info, down ? "nic_link_down" : "nic_link_up",
                           ComponentKind::port);
      e.component.port = std::to_string(*port);
      e.set_attr("ib_state", std::string(trim(u)));
      return Match::known;
    }
  }
  if ((w & kModuleEvent) || module_func) {
    bool error = (w & kModuleError);
    bool unplugged = (w & kUnplugged);
    Event& e = nic_event(error ? Severity::error : unplugged ? Severity::warning : Severity::info,
                         "optic_event", ComponentKind::optic);
    for (size_t at = low.find("module "); at != std::string::npos; at = low.find("module ", at + 1)) {
      sv num = sv(low).substr(at + 7);
      if (auto m = take_uint(num)) {
        e.set_attr("module", std::to_string(*m));
        break;
      }
    }
    e.set_attr("status", std::string(trim(msg.substr(msg.find(',') == sv::npos ? 0 : msg.find(',') + 1))));
    return Match::known;
  }
  if ((w & kInsufficientPower)) {
    nic_event(Severity::error, "nic_power", ComponentKind::nic);
    return Match::known;
  }
  if ((w & kHighTemperature)) {
    nic_event(Severity::warning, "nic_temperature", ComponentKind::nic);
    return Match::known;
  }
  if ((w & kHealth) && (w & kHealthBad)) {
    nic_event(Severity::critical, "nic_health", ComponentKind::nic);
    return Match::known;
  }
  if ((w & kTimeout)) {
    nic_event(Severity::error, "nic_command_timeout", ComponentKind::nic);
    return Match::known;
  }
  if ((w & kFatal)) {
    nic_event(Severity::critical, "nic_fatal", ComponentKind::nic);
    return Match::known;
  }
  return Match::known;  // probe messages, ACCESS_REG failures (benign on restricted PFs) ...
}

Match misc_kernel(LineParser& p, sv body) {
  if (size_t at = find(body, ": segfault at "); at != sv::npos) {
    Event& e = p.emit(Layer::kernel, Severity::error, "process_crash", ComponentKind::process, body);
    sv comm = body.substr(0, at);
    size_t br = comm.find('[');
    e.set_attr("process", std::string(comm.substr(0, br)));
    if (br != sv::npos) e.set_attr("pid", std::string(comm.substr(br + 1, comm.find(']') - br - 1)));
    if (auto lib = token_after(body, " in ", "[ ")) e.set_attr("library", std::string(*lib));
    return Match::known;
  }
  if (contains(body, "Out of memory: Killed process") || contains(body, "oom-kill:")) {
    Event& e = p.emit(Layer::kernel, Severity::error, "process_oom", ComponentKind::process, body);
    if (auto pid = int_after(body, "Killed process ")) e.set_attr("pid", std::to_string(*pid));
    return Match::known;
  }
  if (starts_with(body, "Linux version ")) {
    p.emit(Layer::kernel, Severity::info, "host_boot", ComponentKind::host, body);
    return Match::known;
  }
  if (contains(body, "reboot: Restarting system") || contains(body, "reboot: Power down")) {
    p.emit(Layer::kernel, Severity::warning, "host_reboot", ComponentKind::host, body);
    return Match::known;
  }
  // The CPU's thermal interrupt (therm_throt): on a cold-plate rack, a sign that the loop is warm.
  if (contains(body, "temperature above threshold, cpu clock throttled")) {
    Event& e = p.emit(Layer::kernel, Severity::warning, "cpu_thermal_throttle", ComponentKind::host, body);
    e.set_attr("cause", "thermal");
    return Match::known;
  }
  if (contains(body, "critical temperature reached")) {
    Event& e = p.emit(Layer::kernel, Severity::critical, "thermal_shutdown", ComponentKind::host, body);
    e.set_attr("cause", "thermal");
    return Match::known;
  }
  if (contains(body, "Machine check events logged") || contains(body, "[Hardware Error]: Machine check")) {
    p.emit(Layer::kernel, Severity::warning, "host_mce", ComponentKind::host, body);
    return Match::known;
  }
  if (starts_with(body, "EDAC ") && (contains(body, " UE ") || contains(body, "Uncorrected"))) {
    p.emit(Layer::kernel, Severity::error, "host_memory_ue", ComponentKind::host, body);
    return Match::known;
  }
  if (contains(body, "blocked for more than") && starts_with(body, "INFO: task ")) {
    Event& e = p.emit(Layer::kernel, Severity::warning, "process_hung", ComponentKind::process, body);
    sv t = body.substr(11);
    sv comm = take_until(t, ":");
    e.set_attr("process", std::string(comm));
    if (take(t, ':')) {
      if (auto pid = take_uint(t)) e.set_attr("pid", std::to_string(*pid));
    }
    return Match::known;
  }
  if (contains(body, "soft lockup") || contains(body, "hard LOCKUP")) {
    p.emit(Layer::kernel, Severity::error, "host_lockup", ComponentKind::host, body);
    return Match::known;
  }
  // Firmware-first AER: "{1}[Hardware Error]: event severity: fatal" ... "device_id: 0000:5e:00.0"
  if (size_t he = find(body, "[Hardware Error]:"); he != sv::npos) {
    sv msg = trim(body.substr(he + 17));
    if (auto sev = after(msg, "event severity: ")) p.ghes_severity = std::string(trim(*sev));
    if (auto dev = after(msg, "device_id: ")) {
      Severity s = p.ghes_severity == "fatal" ? Severity::critical
                   : p.ghes_severity == "recoverable" ? Severity::error
                                                      : Severity::info;
      Event& e = p.emit(Layer::kernel, s, "pcie_aer", ComponentKind::host, body);
      e.component.device = names::canonical_pci(*dev);
      e.set_attr("aer_severity", p.ghes_severity);
      e.set_attr("firmware_first", "1");
    }
    return Match::known;
  }
  // Carrier changes of IPoIB and other netdevs: "ib0: Lost Carrier", "NIC Link is Down".
  std::string low = to_lower(body.substr(0, 160));
  bool down = contains(low, "lost carrier") || contains(low, "nic link is down") || contains(low, ": link is down") ||
              contains(low, "carrier lost");
  bool up = contains(low, "link becomes ready") || contains(low, "nic link is up") || contains(low, ": link is up") ||
            contains(low, "carrier on");
  if ((down || up) && !p.switch_context()) {
    sv t = body;
    size_t colon = t.find(": ");
    sv dev = colon == sv::npos ? sv{} : t.substr(0, colon);
    if (size_t sp = dev.rfind(' '); sp != sv::npos) dev = dev.substr(sp + 1);
    if (contains(low, "addrconf")) {  // "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"
      sv u = body.substr(body.find("): ") == sv::npos ? 0 : body.find("): ") + 3);
      dev = take_until(u, ":");
    }
    Event& e = p.emit(Layer::kernel, down ? Severity::error : Severity::info,
                      down ? "nic_link_down" : "nic_link_up", ComponentKind::port, body);
    e.component.device = std::string(dev);
    e.set_attr("netdev", std::string(dev));
    return Match::known;
  }
  return Match::none;
}

}  // namespace

Match recognise_kernel(LineParser& p, sv body) {
  if (size_t at = find(body, "NVRM:"); at != sv::npos) return nvrm_line(p, body, at);
  if (size_t at = find(body, "SXid"); at != sv::npos && contains(body, "(PCI:")) return sxid_line(p, body, at);
  if (size_t at = find(body, "mlx5_core"); at != sv::npos) return mlx5_line(p, body, at);
  if (size_t at = find(body, "mlx5_"); at != sv::npos && (at == 0 || body[at - 1] == ' '))
    return mlx5_line(p, body, at);  // "[...] mlx5_port_module_event:1131:(pid 0): ..." (device elided)
  if (contains(body, "AER") || contains(body, "PCIe Bus Error") || starts_with(body, "pcieport ") ||
      (body.size() > 20 && contains(body.substr(0, 40), " 0000:") && contains(body, "]   "))) {
    Match m = aer_line(p, body);
    if (m != Match::none) return m;
  }
  if (starts_with(body, "pcieport ")) {
    // "pcieport 0000:00:03.1:    [12] Timeout" bit lines without the AER tag
    Match m = aer_line(p, body);
    if (m != Match::none) return m;
  }
  return misc_kernel(p, body);
}

}  // namespace astral::monitor
