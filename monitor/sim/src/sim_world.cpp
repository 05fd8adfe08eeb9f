#include "sim_world.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <utime.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "names.hpp"
#include "text.hpp"

namespace astral::monitor::sim {
namespace fs = std::filesystem;

namespace {
const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
// Plausible PCI buses of an 8-GPU, 8-NIC HGX board (GPU and NIC pairs share a PCIe switch).
const int kGpuBus[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb, 0x1b, 0x2d, 0x3d, 0x60, 0x9d, 0xae, 0xbd, 0xde};
const int kNicBus[] = {0x0c, 0x1f, 0x38, 0x47, 0x8c, 0x9f, 0xb8, 0xc7, 0x0d, 0x20, 0x39, 0x48, 0x8d, 0xa0, 0xb9, 0xc8};

std::string hex_bdf(int bus) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0000:%02x:00.0", bus & 0xff);
  return buf;
}
}  // namespace

std::string two(int v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d", v);
  return buf;
}

Civil to_civil(int64_t us) {
  int64_t days = us >= 0 ? us / 86400000000LL : -((-us + 86400000000LL - 1) / 86400000000LL);
  int64_t rem = us - days * 86400000000LL;
  auto c = text::civil_from_days(days);
  int64_t secs = rem / 1000000;
  return {int(c.year), int(c.month), int(c.day), int(secs / 3600), int(secs / 60 % 60), int(secs % 60),
          rem % 1000000, int(((days % 7) + 11) % 7)};
}

World::World(const FabricGraph& fabric, const SimulateOptions& o) : rng(o.seed * 0x9E3779B97F4A7C15ULL + uint64_t(o.fault) * 0x2545F4914F6CDD1DULL + 17), options(o) {
  // Hosts of the fabric in order of first appearance.
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const Cable& c : fabric.cables())
    if (seen.insert(c.nic.host).second) names.push_back(c.nic.host);
  const int gpus = std::max(1, o.gpus_per_host);
  const int job_hosts = (o.ranks + gpus - 1) / gpus;
  if (o.ranks < 2) throw std::runtime_error("simulate: --ranks must be at least 2");
  if (int(names.size()) < job_hosts)
    throw std::runtime_error("simulate: the fabric has " + std::to_string(names.size()) + " hosts, " +
                             std::to_string(o.ranks) + " ranks need " + std::to_string(job_hosts));
  const int first = int(pick(0, int64_t(names.size()) - job_hosts));
  std::vector<int> chosen;
  for (int i = 0; i < job_hosts; ++i) chosen.push_back(first + i);
  // Bystanders: machines of the same fabric outside the job (unrelated errors land there).
  for (int tries = 0; tries < 8 && chosen.size() < size_t(job_hosts + 2) && names.size() > size_t(job_hosts); ++tries) {
    int k = int(pick(0, int64_t(names.size()) - 1));
    if (std::find(chosen.begin(), chosen.end(), k) == chosen.end()) chosen.push_back(k);
  }
  era = Era(pick(0, 9) == 0 ? 0 : pick(1, 3));
  nccl = era == Era::v1 ? NcclEra(pick(0, 1)) : NcclEra(pick(0, 4));
  roce = chance(0.6);
  job_layout = era == Era::v1 ? 2 : int(pick(0, 2));
  static const int64_t zones[] = {0, 8 * 3600, -7 * 3600, 3600, 19800, -5 * 3600};
  tz_s = zones[pick(0, 5)];
  comm_hash = rng();
  timeout_ms = chance(0.7) ? 600000 : 1800000;
  const int64_t start = o.start_us ? o.start_us : (int64_t(1767225600) + pick(0, 300 * 86400)) * 1000000;
  start_us = start;
  this->fabric = &fabric;
  for (size_t k = 0; k < chosen.size(); ++k) {
    Host h;
    h.name = names[size_t(chosen[k])];
    h.job = int(k) < job_hosts;
    for (int g = 0; g < gpus; ++g) h.gpu_bdf.push_back(hex_bdf(kGpuBus[g % 16] + (g / 16)));
    std::vector<const Cable*> cables = fabric.cables_of_host(h.name);
    std::sort(cables.begin(), cables.end(), [](const Cable* a, const Cable* b) {
      if (a->nic.rail != b->nic.rail) return a->nic.rail < b->nic.rail;
      return names::nic_ordinal(a->nic.nic) < names::nic_ordinal(b->nic.nic);
    });
    const int index = chosen[k];
    for (size_t n = 0; n < cables.size(); ++n) {
      Nic nic;
      nic.name = cables[n]->nic.nic;
      nic.rail = cables[n]->nic.rail >= 0 ? cables[n]->nic.rail : int(n);
      int bus = kNicBus[n % 16];
      nic.bdf = hex_bdf(bus);
      nic.netdev = (roce ? "enp" : "ibp") + std::to_string(bus) + (roce ? "s0np0" : "s0");
      nic.ip = cables[n]->nic.ip.empty() ? "10." + std::to_string(100 + nic.rail) + "." + std::to_string(index / 250) +
                                               "." + std::to_string(index % 250 + 1)
                                         : cables[n]->nic.ip;
      nic.sw = cables[n]->sw.switch_name;
      nic.port = cables[n]->sw.port;
      h.nics.push_back(nic);
    }
    h.oob_ip = "172.16." + std::to_string(index / 250) + "." + std::to_string(index % 250 + 1);
    h.skew_us = int64_t(std::clamp(std::normal_distribution<double>(0, 1.5)(rng), -5.0, 5.0) * 1e6);
    if (chance(0.1)) h.skew_us = (chance(0.5) ? 1 : -1) * pick(20, 90) * 1000000;
    h.boot_us = start - pick(1, 40) * 86400000000LL - pick(0, 86400) * 1000000LL;
    h.kernel_style = int(pick(0, 3));
    hosts.push_back(std::move(h));
  }
  int rank = 0;
  for (int hi = 0; hi < job_hosts; ++hi)
    for (int g = 0; g < gpus && rank < o.ranks; ++g) {
      Rank r;
      r.rank = rank++;
      r.host = hi;
      r.local = g;
      r.pid = 20000 + pick(0, 2000000);
      size_t nics = std::max<size_t>(1, hosts[size_t(hi)].nics.size());
      r.nic = int(nics >= size_t(gpus) ? size_t(g) : size_t(g) * nics / size_t(gpus));
      char ptr[24];
      std::snprintf(ptr, sizeof ptr, "0x%llx", static_cast<unsigned long long>(0x55a000000000ULL + (rng() & 0xffffffff0ULL)));
      r.comm_ptr = ptr;
      hosts[size_t(hi)].ranks.push_back(r.rank);
      ranks.push_back(r);
    }
  for (const Host& h : hosts)
    for (const Nic& n : h.nics) {
      if (switch_index.count(n.sw)) continue;
      Switch s;
      s.name = n.sw;
      std::string_view p = n.port;
      if (text::starts_with(p, "Ethernet")) s.style = int(pick(0, 1));
      else if (text::starts_with(p, "swp")) s.style = 2;
      else if (text::starts_with(p, "Eth") || p.find('/') != std::string_view::npos) s.style = 3;
      else s.style = chance(0.5) ? 2 : 3;
      s.skew_us = pick(-60, 60) * 1000000 + pick(0, 999999);
      s.boot_us = start - pick(20, 200) * 86400000000LL;
      switch_index[s.name] = int(switches.size());
      switches.push_back(s);
    }
}

std::string World::port_name(int sw, const std::string& port) const {
  int style = switches[size_t(sw)].style;
  bool bare = !port.empty() && text::is_digit(port[0]);
  if (!bare) return port;
  if (style == 3) return "Eth1/" + port;
  if (style == 2) return "swp" + port;
  return port;
}

std::string World::pg_prefix(const Rank& r) const {
  std::string rank = std::to_string(r.rank);
  switch (era) {
    case Era::v1: return "[Rank " + rank + "]";
    case Era::v2_4: return "[PG 0 Rank " + rank + "]";
    case Era::v2_5: return "[PG 0 (default_pg) Rank " + rank + "]";
    default: return "[PG ID 0 PG GUID 0(default_pg) Rank " + rank + "]";
  }
}

std::string World::job_file(const Rank& r) const {
  const Host& h = hosts[size_t(r.host)];
  if (job_layout == 1) return h.name + "/logs/rank" + std::to_string(r.rank) + ".log";
  if (job_layout == 2) return h.name + "/pod-" + h.name + ".log";
  return h.name + "/train.log";
}

void World::raw_line(const std::string& path, int64_t t, const std::string& line, int64_t skew) {
  files[path].push_back({t, line});
  file_skew.emplace(path, skew);
}

// Job output: CRI pods prefix every line with the container runtime's UTC time.
static std::string cri_prefix(int64_t t_host) {
  Civil c = to_civil(t_host);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld%03dZ stderr F ", c.year, c.month, c.day, c.hour,
                c.minute, c.second, static_cast<long long>(c.micros), int(t_host % 1000 + 1000) % 1000);
  return buf;
}

void World::nccl_line(const Rank& r, int64_t t, const std::string& level, const std::string& msg,
                      const std::string& source) {
  const Host& h = hosts[size_t(r.host)];
  int64_t local = t + h.skew_us + tz_s * 1000000;
  std::string line;
  if (level == "WARN" && nccl >= NcclEra::v2_26) {
    Civil c = to_civil(local);
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%04d-%02d-%02d %02d:%02d:%02d] ", c.year, c.month, c.day, c.hour, c.minute, c.second);
    line = buf;
  }
  line += h.name + ":" + std::to_string(r.pid) + ":" + std::to_string(r.pid + 3 + r.local) + " [" +
          std::to_string(r.local) + "] ";
  if (level == "WARN") line += (source.empty() ? "misc/socket.cc:538" : source) + " NCCL WARN " + msg;
  else line += "NCCL " + level + " " + msg;
  std::string path = job_file(r);
  if (job_layout == 2) line = cri_prefix(t + h.skew_us) + line;
  raw_line(path, t, line, h.skew_us);
}

void World::torch_line(const Rank& r, int64_t t, char severity, int src_line, const std::string& msg) {
  const Host& h = hosts[size_t(r.host)];
  int64_t local = t + h.skew_us + tz_s * 1000000;
  Civil c = to_civil(local);
  std::string line;
  if (era == Era::v1) {
    line = std::string("[") + severity + " ProcessGroupNCCL.cpp:" + std::to_string(src_line) + "] " + msg;
  } else {
    char buf[96];
    std::snprintf(buf, sizeof buf, "[rank%d]:[%c%d%02d %02d:%02d:%02d.%06lld%03d ProcessGroupNCCL.cpp:%d] ", r.rank,
                  severity, c.month, c.day, c.hour, c.minute, c.second, static_cast<long long>(c.micros),
                  int(pick(0, 999)), src_line);
    line = buf + msg;
  }
  if (job_layout == 2) line = cri_prefix(t + h.skew_us) + line;
  raw_line(job_file(r), t, line, h.skew_us);
}

void World::python_line(const Rank& r, int64_t t, const std::string& msg) {
  const Host& h = hosts[size_t(r.host)];
  std::string line = msg;
  if (job_layout == 2) line = cri_prefix(t + h.skew_us) + line;
  raw_line(job_file(r), t, line, h.skew_us);
}

void World::kernel_line(int hi, int64_t t, const std::string& msg) {
  const Host& h = hosts[size_t(hi)];
  int64_t host_t = t + h.skew_us;
  int64_t local = host_t + tz_s * 1000000;
  Civil c = to_civil(local);
  int64_t up = std::max<int64_t>(0, t - h.boot_us);
  char uptime[40];
  std::snprintf(uptime, sizeof uptime, "[%5lld.%06lld] ", static_cast<long long>(up / 1000000),
                static_cast<long long>(up % 1000000));
  char buf[96];
  auto syslog = [&]() {
    std::snprintf(buf, sizeof buf, "%s %2d %02d:%02d:%02d ", kMonths[c.month - 1], c.day, c.hour, c.minute, c.second);
    return std::string(buf) + h.name + " kernel: " + uptime + msg;
  };
  switch (h.kernel_style) {
    case 0: raw_line(h.name + "/kern.log", t, syslog(), h.skew_us); break;
    case 1: {
      int64_t off = tz_s / 60;
      std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld%c%02lld:%02lld ", c.year, c.month, c.day,
                    c.hour, c.minute, c.second, static_cast<long long>(c.micros), off < 0 ? '-' : '+',
                    static_cast<long long>(std::llabs(off) / 60), static_cast<long long>(std::llabs(off) % 60));
      raw_line(h.name + "/journal.txt", t, buf + h.name + " kernel: " + msg, h.skew_us);
      break;
    }
    case 2:
      std::snprintf(buf, sizeof buf, "[%s %s %2d %02d:%02d:%02d %04d] ", kDays[c.weekday], kMonths[c.month - 1], c.day,
                    c.hour, c.minute, c.second, c.year);
      raw_line(h.name + "/dmesg.txt", t, buf + msg, h.skew_us);
      break;
    default:
      raw_line(h.name + "/dmesg.txt", t, uptime + msg, h.skew_us);
      raw_line(h.name + "/kern.log", t, syslog(), h.skew_us);  // the same lines through syslog
  }
}

void World::switch_line(int si, int64_t t, const std::string& severity, const std::string& program,
                        const std::string& msg) {
  const Switch& s = switches[size_t(si)];
  int64_t local = t + s.skew_us + (s.style == 2 ? 0 : tz_s * 1000000);
  Civil c = to_civil(local);
  char buf[96];
  std::string line;
  switch (s.style) {
    case 0:
      std::snprintf(buf, sizeof buf, "%04d %s %2d %02d:%02d:%02d.%06lld ", c.year, kMonths[c.month - 1], c.day, c.hour,
                    c.minute, c.second, static_cast<long long>(c.micros));
      line = buf + s.name + " " + severity + " " + program + ": " + msg;
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%s %2d %02d:%02d:%02d.%06lld ", kMonths[c.month - 1], c.day, c.hour, c.minute,
                    c.second, static_cast<long long>(c.micros));
      line = buf + s.name + " " + severity + " " + program + ": " + msg;
      break;
    case 2:
      std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00 ", c.year, c.month, c.day, c.hour,
                    c.minute, c.second, static_cast<long long>(c.micros));
      line = buf + s.name + " " + program + (program == "kernel" ? "" : "[" + std::to_string(1000 + si) + "]") + ": " + msg;
      break;
    default: {
      std::snprintf(buf, sizeof buf, "%s %2d %02d:%02d:%02d ", kMonths[c.month - 1], c.day, c.hour, c.minute, c.second);
      std::string sev = severity == "WARNING" ? "WARNING" : severity == "ERR" ? "ERR" : "NOTICE";
      line = buf + s.name + " " + program + "[" + std::to_string(3000 + si) + "]: [" + program + "." + sev + "]: " + msg;
    }
  }
  raw_line("switches/" + s.name + ".log", t, line, s.skew_us);
}

void World::sel_line(int hi, int64_t t, const std::string& sensor, const std::string& event, bool asserted) {
  const Host& h = hosts[size_t(hi)];
  std::string path = h.name + "/sel.txt";
  int64_t bmc = t + h.skew_us * 20 + tz_s * 1000000;  // BMC clocks drift further; ipmitool prints local time
  Civil c = to_civil(bmc);
  char buf[160];
  size_t id = files[path].size() + 1;
  std::snprintf(buf, sizeof buf, "%4zx | %02d/%02d/%04d | %02d:%02d:%02d | ", id, c.month, c.day, c.year, c.hour,
                c.minute, c.second);
  raw_line(path, t, buf + sensor + " | " + event + " | " + (asserted ? "Asserted" : "Deasserted"), h.skew_us * 20);
}

void World::write(const std::string& out_dir) {
  fs::create_directories(out_dir);
  for (auto& [path, lines] : files) {
    std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.true_us < b.true_us; });
    fs::path p = fs::path(out_dir) / path;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    if (!out) throw std::runtime_error(p.string() + ": cannot write");
    const bool dump = text::ends_with(path, ".json");  // dumps are written once, whole
    // The facility reader writes its events file itself, a whole line at a time; nothing ships it.
    const bool own_writer = text::ends_with(path, ".events.jsonl");
    const bool dup = options.noise && !dump && chance(0.3);
    const bool cut_last = options.noise && !dump && chance(0.15) && !own_writer;
    const bool cut_one = options.noise && !dump && chance(0.1) && !own_writer;
    const size_t victim = lines.empty() ? 0 : size_t(pick(0, int64_t(lines.size()) - 1));
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string text = lines[i].text;
      bool last = i + 1 == lines.size();
      if ((cut_one && i == victim && !last) || (cut_last && last)) {
        text = text.substr(0, size_t(pick(int64_t(text.size() / 4), int64_t(std::max<size_t>(text.size() / 4, text.size() - 1)))));
        if (cut_last && last) {
          out << text;  // a crash while writing: no newline
          break;
        }
      }
      out << text << '\n';
      if (dup && chance(0.01)) out << text << '\n';  // log shipper sent it twice
    }
    out.close();
    if (!lines.empty()) {
      int64_t mtime_us = lines.back().true_us + file_skew[path] + pick(0, 3000000);
      struct timespec times[2];
      times[0].tv_sec = times[1].tv_sec = time_t(mtime_us / 1000000);
      times[0].tv_nsec = times[1].tv_nsec = long(mtime_us % 1000000) * 1000;
      utimensat(AT_FDCWD, p.c_str(), times, 0);
    }
  }
}

}  // namespace astral::monitor::sim
