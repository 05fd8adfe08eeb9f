#include "astral/monitor/bundle.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {
namespace fs = std::filesystem;
using namespace text;

std::string_view Bundle::file_name(uint32_t index) const {
  return index < files.size() ? std::string_view(files[index].path) : std::string_view{};
}

std::string Bundle::canonical_host(std::string_view name) const {
  std::string h = names::canonical_host(name);
  if (auto it = host_aliases.find(h); it != host_aliases.end()) return it->second;
  if (auto it = ip_hosts.find(names::canonical_ip(name)); it != ip_hosts.end()) return it->second;
  return h;
}

std::optional<int64_t> parse_tz(std::string_view tz, int64_t at_utc_s) {
  sv t = trim(tz);
  if (t.empty()) return std::nullopt;
  if (t == "UTC" || t == "utc" || t == "Z" || t == "GMT") return 0;
  if (t[0] == '+' || t[0] == '-') {
    int sign = t[0] == '-' ? -1 : 1;
    sv u = t.substr(1);
    std::string digits;
    for (char c : u)
      if (is_digit(c)) digits += c;
      else if (c != ':') return std::nullopt;
    if (digits.size() != 2 && digits.size() != 4) return std::nullopt;
    int h = std::stoi(digits.substr(0, 2)), m = digits.size() == 4 ? std::stoi(digits.substr(2)) : 0;
    if (h > 14 || m > 59) return std::nullopt;
    return sign * (h * 3600 + m * 60);
  }
  // IANA name through the C library (single-threaded here: called before parsing starts).
  std::string name(t);
  if (!fs::exists("/usr/share/zoneinfo/" + name)) return std::nullopt;
  const char* old = std::getenv("TZ");
  std::string saved = old ? old : "";
  setenv("TZ", name.c_str(), 1);
  tzset();
  time_t when = time_t(at_utc_s);
  struct tm local {};
  localtime_r(&when, &local);
  int64_t offset = local.tm_gmtoff;
  if (old) setenv("TZ", saved.c_str(), 1);
  else unsetenv("TZ");
  tzset();
  return offset;
}

namespace {

struct FileJob {
  fs::path path;
  std::string relative;
  std::string host;
  bool switch_context = false;
  int64_t mtime_us = kUnknownTime;
};

std::string stem(const std::string& name) {
  std::string s = name;
  for (const char* ext : {".gz", ".log", ".txt", ".syslog", ".out", ".json"})
    if (s.size() > std::strlen(ext) && s.compare(s.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
      s.resize(s.size() - std::strlen(ext));
  return s;
}

int64_t mtime_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return kUnknownTime;
  return int64_t(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
}

std::vector<FileJob> list_files(const fs::path& root, std::vector<std::string>& hosts,
                                std::vector<std::string>& switches) {
  std::vector<FileJob> jobs;
  std::error_code ec;
  if (fs::is_regular_file(root, ec)) {
    jobs.push_back({root, root.filename().string(), "", false, mtime_of(root)});
    return jobs;
  }
  for (fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
       it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    fs::path rel = fs::relative(p, root, ec);
    std::vector<std::string> parts;
    for (const auto& part : rel) parts.push_back(part.string());
    FileJob job{p, rel.generic_string(), "", false, mtime_of(p)};
    if (parts.size() >= 2 && (parts[0] == "switches" || parts[0] == "switch")) {
      job.switch_context = true;
      job.host = parts.size() >= 3 ? parts[1] : stem(parts[1]);
      if (std::find(switches.begin(), switches.end(), job.host) == switches.end()) switches.push_back(job.host);
    } else if (parts.size() >= 2) {
      job.host = parts[0];
      if (std::find(hosts.begin(), hosts.end(), job.host) == hosts.end()) hosts.push_back(job.host);
    }
    jobs.push_back(std::move(job));
  }
  std::sort(jobs.begin(), jobs.end(), [](const FileJob& a, const FileJob& b) { return a.relative < b.relative; });
  return jobs;
}

std::string read_head(const fs::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::string buf(n, '\0');
  in.read(buf.data(), std::streamsize(n));
  buf.resize(size_t(in.gcount()));
  return buf;
}

bool is_fabric_kind(FileKind k) {
  return k == FileKind::fabric_json || k == FileKind::ibnetdiscover || k == FileKind::cabling_csv;
}

// Kernel uptimes of dmesg dumps dated from another file of the same host that carries both.
void date_uptimes(Bundle& b, const std::unordered_map<std::string, int64_t>& boot_by_host) {
  for (Event& e : b.events) {
    if (e.attr("time_from") != "file_time") continue;
    auto it = boot_by_host.find(b.files[e.file].host);
    if (it == boot_by_host.end()) continue;
    e.time_us = it->second + e.attr_int("uptime_us", 0);
    e.time_confidence_s = 1;
    e.set_attr("time_from", "boot_anchor");
  }
}

// Fabric reports that name a switch by GUID (ibdiagnet's S<system>/N<node>/P<port>, db_csv rows)
// or by a factory-default description (ibqueryerrors "Quantum Mellanox Technologies") name the
// switch the fabric file knows under that GUID.
void name_switches_by_guid(Bundle& b) {
  if (b.fabric.switch_guids().empty()) return;
  for (Event& e : b.events) {
    if (e.layer != Layer::switch_ || e.component.switch_name.empty()) continue;
    const std::string_view guid = e.attr("guid");
    if (guid.empty() || b.fabric.has_switch(e.component.switch_name)) continue;
    const std::string_view name = b.fabric.switch_of_guid(guid);
    if (name.empty()) continue;
    e.component.switch_name = std::string(name);
    e.host = e.component.switch_name;
  }
}

// Hosts in one form: the bundle folder wins over the name a container or NCCL printed, so that
// logs of one machine join; names that are other folders, switches or IPs keep their identity.
// The event names a machine other than the one whose folder holds it: a fabric-wide report, an
// address, or plant equipment's service (a CDU, a rack manager) wherever its reader ran.
bool names_another_machine(const Event& e, const std::string& host) {
  return !e.attr("reported_by").empty() || names::is_ip_address(host) || e.layer == Layer::facility ||
         !e.attr("site_kind").empty();
}

void canonicalise_hosts(Bundle& b) {
  std::unordered_map<std::string, bool> folder;
  for (const auto& h : b.hosts) folder[names::canonical_host(h)] = true;
  std::unordered_map<std::string, bool> switch_folder;
  for (const auto& s : b.switches) switch_folder[names::canonical_host(s)] = true;
  std::unordered_map<std::string, std::string> alias_of;    // log name -> folder
  std::unordered_map<std::string, bool> ambiguous;
  for (Event& e : b.events) {
    const FileStats& f = b.files[e.file];
    std::string file_host = names::canonical_host(f.host);
    std::string h = names::canonical_host(e.host);
    const bool refers_elsewhere = names_another_machine(e, h);
    if (!file_host.empty() && h != file_host && !folder.count(h) && !switch_folder.count(h) && !refers_elsewhere &&
        e.layer != Layer::switch_) {
      auto [it, fresh] = alias_of.emplace(h, file_host);
      if (!fresh && it->second != file_host) ambiguous[h] = true;
    }
  }
  for (auto& [alias, host] : alias_of)
    if (!ambiguous.count(alias)) b.host_aliases[alias] = host;
  for (Event& e : b.events) {
    const FileStats& f = b.files[e.file];
    std::string h = names::canonical_host(e.host);
    const bool refers_elsewhere = names_another_machine(e, h);
    if (e.layer == Layer::switch_) {
      // A switch file's lines name the switch; keep the folder name when the syslog host differs
      // (management hostnames) so cabling and logs agree.
      // Fabric-wide reports (ibqueryerrors, ibdiagnet, UFM) name the switch themselves (reported_by).
      if (e.attr("reported_by").empty() && f.kind == FileKind::text_log && !f.host.empty() &&
          switch_folder.count(names::canonical_host(f.host)))
        h = names::canonical_host(f.host);
      e.host = h;
      if (!e.component.switch_name.empty()) e.component.switch_name = h;
      continue;
    }
    if (!refers_elsewhere && !f.host.empty() && !folder.count(h)) h = names::canonical_host(f.host);
    else if (auto it = b.host_aliases.find(h); it != b.host_aliases.end()) h = it->second;
    e.host = h;
    if (!e.component.host.empty() || e.component.kind == ComponentKind::gpu || e.component.kind == ComponentKind::nic)
      e.component.host = h;
  }
}

void learn_addresses(Bundle& b) {
  for (const Cable& c : b.fabric.cables())
    if (!c.nic.ip.empty()) b.ip_hosts[names::canonical_ip(c.nic.ip)] = names::canonical_host(c.nic.host);
  for (const Event& e : b.events) {
    if (e.kind == "nccl_net_devices" && !e.attr("oob_ip").empty()) b.ip_hosts[std::string(e.attr("oob_ip"))] = e.host;
    if ((e.kind == "retry_exceeded" || e.kind == "ib_flush_error" || e.kind == "ib_completion_error") &&
        !e.attr("local_ip").empty())
      b.ip_hosts.emplace(std::string(e.attr("local_ip")), e.host);
  }
  // Events that named a node by address (NCCL RAS) now name the host.
  for (Event& e : b.events) {
    if (!names::is_ip_address(e.host)) continue;
    auto it = b.ip_hosts.find(names::canonical_ip(e.host));
    if (it == b.ip_hosts.end()) continue;
    e.host = it->second;
    e.component.host = it->second;
  }
}

// The same line shipped twice (kern.log and dmesg, duplicated collectors) is one event.
void remove_duplicates(Bundle& b) {
  std::unordered_map<std::string, std::vector<size_t>> seen;
  std::vector<bool> drop(b.events.size(), false);
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (e.message.empty()) continue;
    // NCCL's origin (pid, tid, cudaDev) is part of the identity: three processes that print the same
    // error are three events, not one line shipped three times.
    std::string key = e.host + '\x1f' + e.kind + '\x1f' + std::to_string(e.keys.rank) + '\x1f' +
                      std::string(e.attr("pid")) + ':' + std::string(e.attr("tid")) + ':' +
                      std::string(e.attr("cuda_dev")) + '\x1f' + e.message;
    auto& same = seen[key];
    for (size_t j : same) {
      const Event& o = b.events[j];
      bool close = !e.has_time() || !o.has_time() ||
                   std::llabs(e.time_us - o.time_us) <=
                       int64_t((2 + std::max(e.time_confidence_s, o.time_confidence_s)) * 1e6);
      if (close) {
        // Keep the better-dated copy.
        if (e.has_time() && (!o.has_time() || e.time_confidence_s < o.time_confidence_s)) {
          b.events[j].time_us = e.time_us;
          b.events[j].time_confidence_s = e.time_confidence_s;
        }
        drop[i] = true;
        ++b.files[e.file].duplicates;
        ++b.duplicates_removed;
        break;
      }
    }
    if (!drop[i]) same.push_back(i);
  }
  size_t w = 0;
  for (size_t i = 0; i < b.events.size(); ++i)
    if (!drop[i]) {
      if (w != i) b.events[w] = std::move(b.events[i]);
      ++w;
    }
  b.events.resize(w);
}

// One zone for the bundle's local times: the offset most files' times suggest (a file written
// as its lines happen ends, in local time, at its mtime plus the zone). Files whose times say
// nothing do not vote; without a clear majority, UTC. Year-less dates then move by whole years
// to the year the dated sources of the bundle are in, when the file times were no guide.
// Returns the zone applied (seconds east of UTC).
int64_t decide_zone_and_year(std::vector<ParseResult>& results, bool tz_known, bool year_known) {
  int64_t zone_applied_s = 0;
  if (!tz_known) {
    std::map<int64_t, int> votes;
    int voters = 0;
    for (const auto& r : results)
      if (r.zone_guess_s) ++votes[*r.zone_guess_s], ++voters;
    int64_t best = 0;
    int best_n = 0;
    for (auto& [z, n] : votes)
      if (n > best_n) best = z, best_n = n;
    if (voters > 0 && best_n * 10 >= voters * 6) zone_applied_s = best;
    for (auto& r : results) {
      if (zone_applied_s)
        for (uint32_t i : r.local_events) r.events[i].time_us -= zone_applied_s * 1000000;
      if (!r.local_events.empty())
        r.stats.notes.push_back(zone_applied_s ? "zone " + std::to_string(zone_applied_s / 3600.0) +
                                                     " h from the file times of the bundle"
                                               : "local times taken as UTC (no zone evident; use --tz)");
    }
  }
  if (year_known) return zone_applied_s;
  // Only the host's own dated files say which year its year-less lines are in: other hosts of the
  // bundle may be logs of another year (a pasted excerpt, an old node), and must not move them.
  std::map<std::string, std::vector<int64_t>> dated_of_host;
  for (const auto& r : results) {
    std::vector<bool> yearless(r.events.size(), false);
    for (uint32_t i : r.yearless_events) yearless[i] = true;
    for (size_t i = 0; i < r.events.size(); ++i)
      if (!yearless[i] && r.events[i].has_time() && r.events[i].time_confidence_s <= 3600 &&
          r.events[i].layer != Layer::bmc)
        dated_of_host[r.stats.host].push_back(r.events[i].time_us);
  }
  const int64_t season = 120LL * 86400000000LL;
  for (auto& r : results) {
    auto own = dated_of_host.find(r.stats.host);
    if (r.yearless_events.empty() || own == dated_of_host.end() || own->second.empty()) continue;
    std::vector<int64_t>& dated = own->second;
    std::nth_element(dated.begin(), dated.begin() + dated.size() / 2, dated.end());
    const int64_t anchor = dated[dated.size() / 2];
    size_t moved = 0;
    for (uint32_t i : r.yearless_events) {
      Event& e = r.events[i];
      if (!e.has_time()) continue;
      int64_t best = e.time_us;
      for (int k : {-1, 1}) {
        int64_t t = shift_years(e.time_us, k);
        if (std::llabs(t - anchor) + season < std::llabs(best - anchor)) best = t;
      }
      if (best != e.time_us) e.time_us = best, ++moved;
    }
    if (moved) r.stats.notes.push_back("year of year-less dates taken from the dated logs of the bundle");
  }
  return zone_applied_s;
}

}  // namespace

Bundle load_bundle(const std::string& path, const BundleOptions& options) {
  std::error_code ec;
  const bool folder = !path.empty() || options.sources.empty();
  if (folder && !fs::exists(path, ec)) throw std::runtime_error(path + ": no such bundle (a folder per host, or one log file)");
  Bundle b;
  b.root = path;
  std::vector<FileJob> jobs = folder ? list_files(path, b.hosts, b.switches) : std::vector<FileJob>{};
  if (folder && jobs.empty()) throw std::runtime_error(path + ": bundle has no files");
  if (!options.fabric_path.empty()) {
    b.fabric = load_fabric(options.fabric_path);
    b.fabric_sources.push_back(options.fabric_path);
  }
  if (!options.site_path.empty()) {
    b.site = facility::load_site_layout(options.site_path);
    b.site_sources.push_back(options.site_path);
  }
  // Detect kinds; fabric files and site layouts go to their loaders, the rest to the parsers.
  std::vector<FileKind> kinds(jobs.size());
  std::vector<size_t> to_parse;
  for (size_t i = 0; i < jobs.size(); ++i) {
    kinds[i] = detect_file_kind(read_head(jobs[i].path, 65536), jobs[i].relative);
    if (is_fabric_kind(kinds[i])) {
      if (options.fabric_path.empty()) {
        try {
          merge_fabric(b.fabric, load_fabric(jobs[i].path.string()));
          b.fabric_sources.push_back(jobs[i].relative);
        } catch (const std::exception& e) {
          if (options.progress) options.progress(std::string("warning: ") + e.what());
        }
      }
      continue;
    }
    if (kinds[i] == FileKind::site_layout) {
      if (options.site_path.empty() && b.site.empty()) {
        try {
          b.site = facility::load_site_layout(jobs[i].path.string());
          b.site_sources.push_back(jobs[i].relative);
        } catch (const std::exception& e) {
          if (options.progress) options.progress(std::string("warning: ") + e.what());
        }
      }
      continue;
    }
    to_parse.push_back(i);
  }
  // Folders named after a switch of the fabric hold switch logs wherever they sit.
  for (FileJob& job : jobs) {
    if (job.switch_context || job.host.empty() || !b.fabric.has_switch(job.host)) continue;
    job.switch_context = true;
    b.hosts.erase(std::remove(b.hosts.begin(), b.hosts.end(), job.host), b.hosts.end());
    if (std::find(b.switches.begin(), b.switches.end(), job.host) == b.switches.end()) b.switches.push_back(job.host);
  }
  std::optional<int64_t> tz = options.tz_offset_s;
  std::vector<ParseResult> results(to_parse.size());
  std::atomic<size_t> next{0}, done{0};
  unsigned threads = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, unsigned(std::max<size_t>(1, to_parse.size())));
  std::mutex progress_mutex;
  auto worker = [&]() {
    for (size_t k; (k = next.fetch_add(1)) < to_parse.size();) {
      const FileJob& job = jobs[to_parse[k]];
      ParseOptions po;
      po.time.year = options.year;
      po.time.tz_known = tz.has_value();
      po.time.tz_offset_s = tz.value_or(0);
      po.time.reference_us = job.mtime_us;
      po.default_host = job.host;
      po.switch_context = job.switch_context;
      po.file_index = uint32_t(k);
      po.file_name = job.relative;
      po.defer_zone = true;
      try {
        results[k] = parse_file(job.path.string(), po);
      } catch (const std::exception& e) {  // never out of a thread
        results[k].stats.path = job.relative;
        results[k].stats.host = job.host;
        results[k].stats.notes.push_back(e.what());
        results[k].stats.damaged = 1;
      }
      size_t d = ++done;
      if (options.progress && (d % 500 == 0)) {
        std::lock_guard lock(progress_mutex);
        options.progress("parsed " + std::to_string(d) + "/" + std::to_string(to_parse.size()) + " files");
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const LogSource& source : options.sources) {
    SourceContext context{b.fabric, uint32_t(results.size()), {}, options.progress};
    context.time.year = options.year;
    context.time.tz_known = tz.has_value();
    context.time.tz_offset_s = tz.value_or(0);
    SourceFiles more = source(context);
    for (auto* names : {&more.hosts, &more.switches}) {
      auto& into = names == &more.hosts ? b.hosts : b.switches;
      for (auto& n : *names)
        if (std::find(into.begin(), into.end(), n) == into.end()) into.push_back(n);
    }
    for (auto& r : more.files) results.push_back(std::move(r));
  }
  const int64_t zone_applied_s = decide_zone_and_year(results, tz.has_value(), options.year != 0);
  // Merge.
  size_t total = 0;
  for (auto& r : results) total += r.events.size();
  b.events.reserve(total);
  std::unordered_map<std::string, std::vector<int64_t>> boots;
  for (size_t k = 0; k < results.size(); ++k) {
    ParseResult& r = results[k];
    if (k < to_parse.size() && r.stats.kind == FileKind::text_log) r.stats.kind = kinds[to_parse[k]];
    b.files.push_back(std::move(r.stats));
    for (auto& e : r.events) b.events.push_back(std::move(e));
    for (auto& s : r.samples) b.samples.push_back(std::move(s));
    for (auto& a : r.uptime_anchors) boots[a.host].push_back(a.boot_us - (a.local ? zone_applied_s * 1000000 : 0));
    r = ParseResult{};
  }
  std::unordered_map<std::string, int64_t> boot_by_host;
  for (auto& [host, v] : boots) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    boot_by_host[host] = v[v.size() / 2];
  }
  date_uptimes(b, boot_by_host);
  name_switches_by_guid(b);
  canonicalise_hosts(b);
  learn_addresses(b);
  for (auto& s : b.samples) s.host = b.canonical_host(s.host.empty() ? b.files[s.file].host : s.host);
  remove_duplicates(b);
  std::stable_sort(b.events.begin(), b.events.end(), [](const Event& x, const Event& y) {
    if (x.has_time() != y.has_time()) return x.has_time();
    return x.time_us < y.time_us;
  });
  return b;
}

}  // namespace astral::monitor
