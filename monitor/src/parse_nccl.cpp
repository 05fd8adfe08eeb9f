// NCCL_DEBUG output (log-formats.md §3): "host:pid:tid [dev] NCCL INFO ...", WARN lines with
// file:line (and a timestamp since 2.26), init lines that map rank -> GPU and give the commHash,
// channel lines that map a rank to its NET device, the NET/IB device list, IB completion errors
// in all their wordings, async port events, socket and proxy errors.
#include <algorithm>
#include <string>

#include "keywords.hpp"
#include "line_parser.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

struct NcclHeader {
  sv host;
  sv pid;  // digits as written; empty when the line has no "host:pid:tid" origin
  sv tid;
  sv dev;  // "[dev]" digits; empty when absent
  sv level;  // INFO WARN TRACE CALL version
  sv msg;
};

bool all_digits(sv s) {
  for (char c : s)
    if (!is_digit(c)) return false;
  return !s.empty();
}

// NCCL 2.1 printed no "NCCL" tag: "host:pid:tid [dev] file:line WARN msg". Returns where the
// level word starts, or npos; only that exact shape counts (other loggers say WARN too).
size_t untagged_level(sv body) {
  sv t = body;
  sv origin = take_until(t, " ");
  if (origin.empty() || std::count(origin.begin(), origin.end(), ':') < 2 || !take(t, " [")) return sv::npos;
  if (!take_uint(t) || !take(t, "] ")) return sv::npos;
  sv word = take_until(t, " ");
  if (word != "WARN" && word != "INFO") {  // a source location first
    if (word.find(':') == sv::npos || !take(t, ' ')) return sv::npos;
    word = take_until(t, " ");
  }
  if (word != "WARN" && word != "INFO") return sv::npos;
  return size_t(word.data() - body.data());
}

// Finds "NCCL <LEVEL> " and reads "host:pid:tid [dev] ..." before it when present. The numbers
// stay text: most lines never make an event that would need them.
bool read_header(sv body, NcclHeader& h) {
  size_t k = 0;
  if (!starts_with(body, "NCCL ")) {
    k = find(body, " NCCL ");
    if (k == sv::npos) {
      size_t level = untagged_level(body);
      if (level == sv::npos) return false;
      k = level - 5;  // as if "NCCL " stood before the level
    } else {
      ++k;
    }
  }
  sv after_nccl = body.substr(k + 5);
  h.level = take_until(after_nccl, " ");
  if (h.level != "INFO" && h.level != "WARN" && h.level != "TRACE" && h.level != "CALL" &&
      h.level != "version" && h.level != "ERROR")
    return false;
  h.msg = ltrim(after_nccl);
  sv head = body.substr(0, k);
  // host:pid:tid
  sv t = head;
  sv first = take_until(t, " ");
  size_t c2 = first.rfind(':');
  if (c2 != sv::npos && c2 > 0) {
    size_t c1 = first.rfind(':', c2 - 1);
    if (c1 != sv::npos) {
      sv pid = first.substr(c1 + 1, c2 - c1 - 1), tid = first.substr(c2 + 1);
      if (all_digits(pid) && all_digits(tid)) {
        h.host = first.substr(0, c1);
        h.pid = pid;
        h.tid = tid;
      }
    }
  }
  t = ltrim(t);
  if (take(t, '[')) {
    sv d = take_until(t, "]");
    if (all_digits(d) && take(t, ']')) h.dev = d;
  }
  return true;
}

std::string pid_key(const NcclHeader& h, sv host) {
  return std::string(host) + ":" + std::string(h.pid.empty() ? sv("-1") : h.pid);
}

void stamp(Event& e, const NcclHeader& h) {
  if (!h.host.empty()) {
    e.host = std::string(h.host);
    if (e.component.kind != ComponentKind::switch_ && e.component.kind != ComponentKind::switch_port)
      e.component.host = e.host;
  }
  if (!h.pid.empty()) e.set_attr("pid", std::string(h.pid));
  if (!h.tid.empty()) e.set_attr("tid", std::string(h.tid));
  if (!h.dev.empty()) e.set_attr("cuda_dev", std::string(h.dev));
}

}  // namespace

// The peer a socket error names: "from 10.0.0.2<45763>", "Connect to 10.0.0.2<45763>", "remote
// peer node1<57557>". Addresses go to peer_ip, names to peer_host (as written).
void set_socket_peer(Event& e, sv msg) {
  size_t lt = msg.find('<');
  while (lt != sv::npos) {
    size_t start = lt;
    while (start > 0 && msg[start - 1] != ' ') --start;
    sv who = msg.substr(start, lt - start);
    sv rest = msg.substr(lt + 1);
    sv port = take_until(rest, ">");
    if (!who.empty() && !port.empty() && all_digits(port)) {
      std::string ip = names::canonical_ip(who);
      if (names::is_ip_address(ip)) e.set_attr("peer_ip", ip);
      else e.set_attr("peer_host", std::string(who));
      e.set_attr("peer_port", std::string(port));
      return;
    }
    lt = msg.find('<', lt + 1);
  }
  if (auto from = token_after(msg, " from ", " ")) {  // "Call to recv from 10.1.2.3 failed"
    std::string ip = names::canonical_ip(*from);
    if (names::is_ip_address(ip)) e.set_attr("peer_ip", ip);
  }
}

// "Call to ibv_modify_qp failed with error Invalid argument", "Call to ibv_create_qp failed":
// a verbs call refused by the HCA or its driver (resources, QP state, registration).
Event* verbs_call_failure(LineParser& p, sv msg, Layer layer) {
  auto call = token_after(msg, "Call to ", " ");
  if (!call || !starts_with(*call, "ibv_")) return nullptr;
  Event& e = p.emit(layer, Severity::error, "ib_verbs_error", ComponentKind::nic, msg);
  e.set_attr("verb", std::string(*call));
  if (auto err = after(msg, "with error ")) e.set_attr("error", std::string(trim(*err)));
  else if (auto err2 = after(msg, "failed : ")) e.set_attr("error", std::string(trim(*err2)));
  if (auto dev = token_after(msg, " on device ", " ,")) e.component.device = std::string(*dev);
  return &e;
}

namespace {

bool verbs_failure(LineParser& p, const NcclHeader& h, sv msg) {
  Event* e = verbs_call_failure(p, msg, Layer::nccl);
  if (e) stamp(*e, h);
  return e != nullptr;
}

// "... comm 0x.. rank R nranks N cudaDev d nvmlDev n busId b commId 0x.. - Init COMPLETE", read
// in one pass over its words (the line names each value by the word before it).
Match init_line(LineParser& p, const NcclHeader& h, sv msg, bool complete) {
  sv comm, rank_word, nranks_word, bus, comm_id, cuda_dev, nvml_dev, parent;
  sv t = msg, previous;
  while (!t.empty()) {
    sv word = take_word(t);
    if (word.empty()) break;
    while (!word.empty() && (word.back() == ',' || word.back() == ')')) word.remove_suffix(1);
    if (previous == "comm" && comm.empty()) comm = word;
    else if (previous == "rank" && rank_word.empty()) rank_word = word;
    else if (previous == "nranks" && nranks_word.empty()) nranks_word = word;
    else if (previous == "busId" && bus.empty()) bus = word;
    else if (previous == "commId" && comm_id.empty()) comm_id = word;
    else if (previous == "cudaDev" && cuda_dev.empty()) cuda_dev = word;
    else if (previous == "nvmlDev" && nvml_dev.empty()) nvml_dev = word;
    else if (previous == "parent" && parent.empty()) parent = word;
    previous = word;
  }
  auto rank = take_int(rank_word);
  auto nranks = take_int(nranks_word);
  if (comm.empty() || !rank || !nranks || bus.empty()) return Match::damaged;
  std::string pci = names::pci_from_nccl_bus_id(bus);
  Event& e = p.emit(Layer::nccl, Severity::info, complete ? "nccl_init" : "nccl_init_start",
                    ComponentKind::gpu, msg);
  stamp(e, h);
  e.component.device = pci;
  e.keys.rank = int(*rank);
  if (auto id = take_hex(comm_id); id && *id != 0) e.keys.comm_hash = *id;
  e.set_attr("comm", std::string(comm));
  e.set_attr("nranks", std::to_string(*nranks));
  e.set_attr("bus_id", std::string(bus));
  if (auto d = take_int(cuda_dev)) e.set_attr("cuda_dev", std::to_string(*d));
  if (auto d = take_int(nvml_dev)) e.set_attr("nvml_dev", std::to_string(*d));
  if (!parent.empty()) e.set_attr("parent", std::string(parent));
  return Match::known;
}

// "Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA"
Match channel_line(LineParser& p, const NcclHeader& h, sv msg) {
  auto via = after(msg, " via NET/");
  if (!via) return Match::known;  // P2P/SHM channels: intra-node, nothing to join
  sv t = msg.substr(8);  // after "Channel "
  auto ch = take_uint(t);
  take_until(t, ":");
  if (!ch || !take(t, ':')) return Match::damaged;
  t = ltrim(t);
  auto src = take_uint(t);
  take_until(t, ">");
  if (!src || !take(t, '>')) return Match::damaged;
  t = ltrim(t);
  auto dst = take_uint(t);
  if (!dst) return Match::damaged;
  // "[bus] [receive] via ..." follows the destination (older releases print no direction).
  take_until(t, " ");
  t = ltrim(t);
  bool receive = starts_with(t, "[receive]");
  bool send = starts_with(t, "[send]");
  sv v = *via;
  sv transport = take_until(v, "/");
  take(v, '/');
  auto netdev = take_uint(v);
  if (!netdev) return Match::damaged;
  int local = receive ? int(*dst) : send ? int(*src) : -1;
  int peer = receive ? int(*src) : send ? int(*dst) : -1;
  // One event per (process, rank, NET device, direction): channels repeat the same facts.
  uint64_t key = std::hash<sv>{}(h.host.empty() ? p.host() : h.host) ^ (std::hash<sv>{}(h.pid) << 1);
  for (int64_t part : {int64_t(local), int64_t(*netdev), int64_t(receive)})
    key = (key ^ uint64_t(part)) * 1099511628211ULL;
  if (!p.seen_ids.insert(key).second) return Match::known;
  Event& e = p.emit(Layer::nccl, Severity::debug, "nccl_channel", ComponentKind::nic, msg);
  stamp(e, h);
  e.keys.rank = local;
  e.keys.peer = peer;
  e.keys.channel = int(*ch);
  e.set_attr("transport", std::string(transport));
  e.set_attr("net_dev", std::to_string(*netdev));
  return Match::known;
}

// "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE ... ; OOB ib0:10.0.0.1<0>"
Match net_devices_line(LineParser& p, const NcclHeader& h, sv msg) {
  std::string key = "dev:" + pid_key(h, p.host());
  if (!p.seen.insert(key).second) return Match::known;
  std::string devices;
  sv t = msg;
  size_t semi = t.find(';');
  sv list = t.substr(0, semi);
  size_t pos = 0;
  while ((pos = list.find('[', pos)) != sv::npos) {
    sv u = list.substr(pos + 1);
    auto idx = take_uint(u);
    if (idx && take(u, ']')) {
      sv name = take_until(u, " ");
      if (!devices.empty()) devices += ',';
      devices += std::to_string(*idx) + "=" + std::string(name);
    }
    ++pos;
  }
  Event& e = p.emit(Layer::nccl, Severity::debug, "nccl_net_devices", ComponentKind::host, msg);
  stamp(e, h);
  e.set_attr("devices", devices);
  if (semi != sv::npos) {
    if (auto oob = after(t.substr(semi), "OOB ")) {
      sv o = *oob;
      sv iface = take_until(o, ":");
      if (take(o, ':')) {
        sv ip = take_until(o, "< ");
        e.set_attr("oob_if", std::string(iface));
        e.set_attr("oob_ip", names::canonical_ip(ip));
      }
    }
  }
  return Match::known;
}

// Async events: "NET/IB : mlx5_0:1 Got non-fatal async event: port error(1)", the old
// "NET/IB : Got async event : port error", fatal events, GID table and speed changes.
Match async_event(LineParser& p, const NcclHeader& h, sv msg) {
  sv t = *after(msg, "NET/IB");
  while (!t.empty() && (is_alpha(t[0]))) t.remove_prefix(1);  // NET/IBP vendor forks
  t = ltrim(t);
  take(t, ':');
  t = ltrim(t);
  std::string device, port;
  sv save = t;
  sv word = take_until(t, " ");
  size_t colon = word.rfind(':');
  if (colon != sv::npos && colon > 0 && colon + 1 < word.size() && is_digit(word[colon + 1])) {
    device = std::string(word.substr(0, colon));
    port = std::string(word.substr(colon + 1));
  } else {
    t = save;
  }
  std::string low = to_lower(msg);
  sv kind = "ib_async_event";
  Severity sev = Severity::warning;
  // ibv_event_type_str() of the fatal events: DEVICE_FATAL, QP_FATAL, CQ_ERR, SRQ_ERR, WQ_FATAL,
  // QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR.
  const bool fatal_words = contains(low, "catastrophic error") || contains(low, "cq error") ||
                           contains(low, "wq fatal") || contains(low, "work queue error") ||
                           contains(low, "path migration request error");
  if (fatal_words || (contains(low, "fatal event") && !contains(low, "non-fatal"))) {
    kind = "ib_fatal_event";
    sev = Severity::critical;
  } else if (contains(low, "port error") || contains(low, "port_err")) {
    kind = "ib_port_error";
    sev = Severity::error;
  } else if (contains(low, "port active") || contains(low, "port_active")) {
    kind = "ib_port_active";
    sev = Severity::info;
  } else if (contains(low, "speed change")) {
    kind = "ib_speed_change";
  } else if (contains(low, "gid table") || contains(low, "lid change") || contains(low, "sm change") ||
             contains(low, "pkey") || contains(low, "reregister")) {
    kind = "ib_config_change";
    sev = Severity::info;
  }
  Event& e = p.emit(Layer::nccl, sev, kind, ComponentKind::nic, msg);
  stamp(e, h);
  e.component.device = device;
  e.component.port = port;
  return Match::known;
}

Match warn_line(LineParser& p, const NcclHeader& h, sv msg) {
  if (contains(msg, "Got completion from peer") || contains(msg, "Got completion with ")) {
    Event* e = nullptr;
    size_t before = p.out().events.size();
    if (!parse_ib_completion(p, msg, Layer::nccl)) return Match::damaged;
    if (p.out().events.size() > before) e = &p.out().events.back();
    if (e) stamp(*e, h);
    return Match::known;
  }
  if (contains(msg, "NET/IB") && (contains(msg, "async") || contains(msg, "GID table") ||
                                  contains(msg, "speed change")))
    return async_event(p, h, msg);
  if (contains(msg, "marked as failed")) {
    Event& e = p.emit(Layer::nccl, Severity::error, "ib_device_failed", ComponentKind::nic, msg);
    stamp(e, h);
    if (auto d = int_after(msg, "Device ")) e.set_attr("net_dev", std::to_string(*d));
    return Match::known;
  }
  if (verbs_failure(p, h, msg)) return Match::known;
  if (contains(msg, "Call to ") || contains(msg, "Connection reset") || contains(msg, "Connection closed") ||
      contains(msg, "Broken pipe") || contains(msg, "Connection refused") || contains(msg, "Socket recv failed") ||
      (starts_with(msg, "socket") && contains(msg, " failed"))) {
    Event& e = p.emit(Layer::nccl, Severity::error, "nccl_socket_error", ComponentKind::process, msg);
    stamp(e, h);
    set_socket_peer(e, msg);
    return Match::known;
  }
  if (contains(msg, "Failed to execute operation")) {
    Event& e = p.emit(Layer::nccl, Severity::error, "nccl_proxy_error", ComponentKind::process, msg);
    stamp(e, h);
    if (auto r = int_after(msg, " from rank ")) e.keys.peer = int(*r);
    return Match::known;
  }
  if (contains(msg, "Cuda failure") || contains(msg, "CUDA failure")) {
    Event& e = p.emit(Layer::nccl, Severity::error, "cuda_error", ComponentKind::process, msg);
    stamp(e, h);
    if (auto what = token_after(msg, "'", "'")) e.set_attr("error", std::string(*what));
    return Match::known;
  }
  bool benign = contains(msg, "plugin") || contains(msg, "Could not find") || contains(msg, "NCCL_");
  Event& e = p.emit(Layer::nccl, benign ? Severity::info : Severity::warning,
                    benign ? "nccl_config_warning" : "nccl_warning", ComponentKind::process, msg);
  stamp(e, h);
  return Match::known;
}

// Keep in step with info_line: the INFO lines it reads without producing anything.
bool info_line_is_quiet(sv msg) {
  if (starts_with(msg, "Channel ")) return find(msg, " via NET/") == sv::npos;
  const sv end = trim(msg);
  return !ends_with(end, "Init COMPLETE") && !ends_with(end, "Init START") && !ends_with(end, "Destroy COMPLETE") &&
         !starts_with(msg, "NET/IB");
}

// "comm 0x55d0 rank 3 nranks 16 cudaDev 3 busId 1b000 - Destroy COMPLETE": the rank left its
// communicator cleanly (the job ended, or the group was torn down on purpose).
Match destroy_line(LineParser& p, const NcclHeader& h, sv msg) {
  auto comm = token_after(msg, "comm ", " ");
  auto rank = int_after(msg, " rank ");
  if (!comm || !rank) return Match::damaged;
  Event& e = p.emit(Layer::nccl, Severity::info, "nccl_destroy", ComponentKind::process, msg);
  stamp(e, h);
  e.keys.rank = int(*rank);
  e.set_attr("comm", std::string(*comm));
  if (auto n = int_after(msg, " nranks ")) e.set_attr("nranks", std::to_string(*n));
  return Match::known;
}

Match info_line(LineParser& p, const NcclHeader& h, sv msg) {
  if (starts_with(msg, "Channel ")) return channel_line(p, h, msg);
  sv end = trim(msg);
  if (ends_with(end, "Init COMPLETE")) return init_line(p, h, msg, true);
  if (ends_with(end, "Init START")) return init_line(p, h, msg, false);
  if (ends_with(end, "Destroy COMPLETE")) return destroy_line(p, h, msg);
  if (!starts_with(msg, "NET/IB")) return Match::known;  // the many INFO lines with nothing to join on
  if (starts_with(msg, "NET/IB : Using") || starts_with(msg, "NET/IB: Using")) return net_devices_line(p, h, msg);
  if (contains(msg, "Got completion from peer")) return warn_line(p, h, msg);
  if (contains(msg, "async")) return async_event(p, h, msg);
  return Match::known;
}

}  // namespace

namespace {

// The message of a bare "host:pid:tid [dev] NCCL INFO msg" line, whose marker is at `info`, or
// nullopt when anything else stands before the marker (a collector prefix, a time, a rank tag,
// other spacing): those lines take the full path. Read backwards from the marker, which feed()
// has found already, instead of searching for it again as read_header does.
std::optional<sv> bare_info_message(sv line, size_t info) {
  if (line.empty() || !is_alpha(line[0]) || info < 8 || line[info - 1] != ' ' || line[info - 2] != ']')
    return std::nullopt;
  size_t open = info - 2;  // the device's digits end here
  while (open > 0 && is_digit(line[open - 1])) --open;
  if (open == info - 2 || open < 2 || line[open - 1] != '[' || line[open - 2] != ' ') return std::nullopt;
  const sv origin = line.substr(0, open - 2);  // host:pid:tid
  const size_t c2 = origin.rfind(':');
  if (c2 == sv::npos || c2 == 0 || origin.find(' ') != sv::npos) return std::nullopt;
  const size_t c1 = origin.rfind(':', c2 - 1);
  if (c1 == sv::npos) return std::nullopt;
  const sv pid = origin.substr(c1 + 1, c2 - c1 - 1), tid = origin.substr(c2 + 1);
  if (!all_digits(pid) || !all_digits(tid)) return std::nullopt;
  return ltrim(line.substr(info + std::string_view("NCCL INFO ").size()));
}

}  // namespace

bool is_quiet_nccl_info(sv line, size_t info, RecentKeys& channel_lines) {
  // Only "host:pid:tid [dev] " before the marker, so no collector prefix (no time, no rank tag)
  // that the full path would have to read: the origin starts the line and the marker follows
  // the device at once.
  const std::optional<sv> bare = bare_info_message(line, info);
  if (!bare) return false;
  const sv msg = *bare;
  if (info_line_is_quiet(msg)) return true;
  // A NET channel line repeats for every channel with only "Channel NN/M" changing; the first
  // of each kind is read (channel_line keeps one event per rank, device and direction).
  if (starts_with(msg, "Channel ")) {
    const size_t colon = msg.find(" : ");
    if (colon == sv::npos) return false;
    const uint64_t key = std::hash<sv>{}(line.substr(0, info)) * 31 + std::hash<sv>{}(msg.substr(colon));
    return !channel_lines.insert(key);
  }
  return false;
}

bool parse_ib_completion(LineParser& p, sv text, Layer layer) {
  auto rest = after(text, "Got completion from peer ");
  std::string ip;
  if (rest) {
    sv t = ltrim(*rest);
    sv peer = take_until(t, " ");
    ip = names::canonical_ip(peer);
    if (ip.empty()) return false;
  } else if (!contains(text, "Got completion with ")) {  // NCCL 2.4-era: no peer named
    return false;
  }
  int64_t status = -1;
  if (auto e = int_after(text, "with error ")) {
    status = *e;
  } else if (auto s = after(text, "status=")) {
    sv u = *s;
    if (auto v = take_uint(u)) {
      status = *v;
    } else {
      take_until(u, "( ");
      if (take(u, '(')) {
        if (auto v2 = take_uint(u)) status = *v2;
      }
    }
  }
  if (status < 0) return false;
  sv kind = status == 12   ? "retry_exceeded"
            : status == 13 ? "rnr_retry_exceeded"
            : status == 5  ? "ib_flush_error"
                           : "ib_completion_error";
  Event& e = p.emit(layer, status == 5 ? Severity::warning : Severity::error, kind,
                    ComponentKind::nic, text);
  if (!ip.empty()) e.set_attr("peer_ip", ip);
  e.set_attr("status", std::to_string(status));
  if (auto v = int_after(text, "vendor err ")) e.set_attr("vendor_err", std::to_string(*v));
  else if (auto v2 = int_after(text, "vendor_err=")) e.set_attr("vendor_err", std::to_string(*v2));
  if (auto hca = token_after(text, " hca ", " ,)\t")) {
    e.component.device = std::string(*hca);
    e.set_attr("hca", std::string(*hca));
  }
  if (auto g = token_after(text, "localGid ", " ")) e.set_attr("local_ip", names::canonical_ip(*g));
  if (auto g = after(text, "remoteGids")) {
    sv u = ltrim(*g);
    e.set_attr("remote_ip", names::canonical_ip(take_until(u, " ")));
  }
  if (contains(text, "(Send)")) e.set_attr("req_type", "Send");
  else if (contains(text, "(Recv)")) e.set_attr("req_type", "Recv");
  else if (auto r = token_after(text, "req_type=", " ")) e.set_attr("req_type", std::string(*r));
  return true;
}

Match recognise_nccl(LineParser& p, sv body) {
  if ((p.triggers() & kTorch) && contains(body, "ProcessGroupNCCL")) return Match::none;  // PyTorch quoting NCCL
  NcclHeader h;
  if (!read_header(body, h) || (h.level == "version" && !starts_with(body, "NCCL version"))) {
    // NCCL text without the NCCL marker: vendor forks ("NET/IBP:Got completion ...") and the
    // wrapped wording-3 error once joined.
    if ((contains(body, "Got completion from peer") || contains(body, "Got completion with ")) &&
        !contains(body, "ProcessGroupNCCL")) {
      if (!parse_ib_completion(p, body, Layer::nccl)) return Match::damaged;
      return Match::known;
    }
    if (starts_with(body, "NET/IB") && contains(body, "async")) return async_event(p, h, body);
    return Match::none;
  }
  if (h.level == "WARN" || h.level == "ERROR") return warn_line(p, h, h.msg);
  if (h.level == "INFO") return info_line(p, h, h.msg);
  return Match::known;  // TRACE, CALL, version
}

}  // namespace astral::monitor
