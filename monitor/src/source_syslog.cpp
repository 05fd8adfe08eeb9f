// A central rsyslog tree as a bundle source: each file mapped to the host it holds (from the
// layout, or from the template the collector writes with), switches named by the fabric read as
// switch logs, BMCs joined to the host they manage. Lines are read up to a budget and events
// outside the window dropped.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <thread>

#include "astral/monitor/sources.hpp"
#include "line_parser.hpp"
#include "names.hpp"

namespace astral::monitor {
namespace fs = std::filesystem;

namespace {

struct TreeFile {
  fs::path path;
  std::string relative;
  std::string host;  // "" when the file holds many hosts (the collector's own syslog)
};

// The collector's own files at the top of the tree name their hosts in every line.
bool is_shared_log(std::string_view name) {
  for (std::string_view common : {"syslog", "messages", "kern.log", "daemon.log", "user.log", "debug", "all.log"})
    if (name == common || (name.starts_with(common) && name.size() > common.size() && name[common.size()] == '.'))
      return true;
  return false;
}

// "leaf-r3-02-2025-11-29.log", "node03_20251129.log", "node03.log" -> the host part.
std::string host_of_file_name(std::string name) {
  for (std::string_view ext : {".gz", ".1", ".log", ".txt"})
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
  static const std::regex dated(R"(^(.+?)[-_.](\d{4}[-_.]?\d{2}[-_.]?\d{2}|\d{8})$)");
  std::smatch m;
  if (std::regex_match(name, m, dated)) return m[1];
  return name;
}

// rsyslog's template ("%HOSTNAME%/%$YEAR%.log") as a pattern over relative paths.
std::regex template_pattern(const std::string& tmpl) {
  std::string re = "^";
  int host_groups = 0;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] == '%') {
      size_t end = tmpl.find('%', i + 1);
      if (end == std::string::npos) throw std::runtime_error("--syslog-template " + tmpl + ": unclosed %PROPERTY%");
      std::string prop = tmpl.substr(i + 1, end - i - 1);
      prop = prop.substr(0, prop.find(':'));  // %HOSTNAME:::lowercase%
      std::transform(prop.begin(), prop.end(), prop.begin(), ::toupper);
      const bool host = prop == "HOSTNAME" || prop == "FROMHOST" || prop == "FROMHOST-IP" || prop == "SOURCE";
      re += host && host_groups++ == 0 ? "([^/]+?)" : "[^/]*?";
      i = end + 1;
      continue;
    }
    if (std::string_view("\\^$.|?*+()[]{}").find(tmpl[i]) != std::string_view::npos) re += '\\';
    re += tmpl[i++];
  }
  if (host_groups == 0) throw std::runtime_error("--syslog-template " + tmpl + ": names no %HOSTNAME%");
  return std::regex(re + "$");
}

std::vector<TreeFile> list_tree(const SyslogSourceOptions& o) {
  std::optional<std::regex> pattern;
  if (!o.path_template.empty()) {
    std::string t = o.path_template;
    if (t.starts_with(o.dir)) t = t.substr(o.dir.size());  // a full path as in rsyslog.conf
    while (t.starts_with("/")) t.erase(0, 1);
    pattern = template_pattern(t);
  }
  std::vector<TreeFile> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(o.dir, fs::directory_options::skip_permission_denied, ec), end; it != end;
       it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || name.ends_with(".gz") || name.ends_with(".xz") || name.ends_with(".zst")) continue;
    TreeFile f{it->path(), fs::relative(it->path(), o.dir, ec).generic_string(), ""};
    if (pattern) {
      std::smatch m;
      if (!std::regex_match(f.relative, m, *pattern)) continue;
      f.host = m[1];
    } else if (auto slash = f.relative.find('/'); slash != std::string::npos) {
      f.host = f.relative.substr(0, slash);
    } else if (!is_shared_log(name)) {
      f.host = host_of_file_name(name);
    }
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const TreeFile& a, const TreeFile& b) { return a.relative < b.relative; });
  return files;
}

// "node03-bmc", "bmc-node03", "node03.ipmi" -> "node03" when that is a host we know.
std::string managed_host(const std::string& name, const std::vector<std::string>& known, const FabricGraph& fabric) {
  static const std::regex bmc(R"(^(?:bmc|ipmi|idrac|ilo)[-_.](.+)$|^(.+?)[-_.](?:bmc|ipmi|idrac|ilo|mgmt)$)",
                              std::regex::icase);
  std::smatch m;
  if (!std::regex_match(name, m, bmc)) return {};
  std::string base = m[1].matched ? m[1].str() : m[2].str();
  base = names::canonical_host(base);
  if (fabric.has_host(base) || std::find(known.begin(), known.end(), base) != known.end()) return base;
  return {};
}

ParseResult read_tree_file(const TreeFile& f, const ParseOptions& po, std::atomic<int64_t>& budget,
                           const TimeWindow& window) {
  ParseResult out;
  out.stats.path = po.file_name;
  out.stats.kind = FileKind::text_log;
  out.stats.host = po.default_host;
  std::ifstream in(f.path, std::ios::binary);
  if (!in) {
    out.stats.damaged = 1;
    out.stats.notes.push_back(f.relative + ": cannot open");
    return out;
  }
  LineParser lp(po, out);
  std::string line;
  bool cut = false;
  while (std::getline(in, line)) {
    if (budget.fetch_sub(1) <= 0) {
      cut = true;
      break;
    }
    out.stats.bytes += line.size() + 1;
    lp.feed(line);
  }
  lp.finish();
  if (cut) out.stats.notes.push_back(f.relative + ": line limit reached; the rest of the file not read");
  if (window.bounded()) {  // lines are dated only once read: the window applies to the events
    std::vector<Event> kept;
    for (Event& e : out.events)
      if (!e.has_time() || window.contains(e.time_us)) kept.push_back(std::move(e));
    out.events = std::move(kept);
    out.local_events.clear();  // indexes no longer valid: zones are decided per file below
    out.yearless_events.clear();
  }
  out.stats.events = out.events.size();
  return out;
}

SourceFiles read_syslog_tree(const SyslogSourceOptions& o, const SourceContext& context) {
  std::error_code ec;
  if (!fs::is_directory(o.dir, ec)) throw std::runtime_error(o.dir + ": no such syslog folder");
  std::vector<TreeFile> files = list_tree(o);
  if (files.empty())
    throw std::runtime_error(o.dir + ": no log files laid out per host (HOST/*.log, HOST-DATE.log" +
                             std::string(o.path_template.empty() ? "" : ", or " + o.path_template) + ")");
  SourceFiles out;
  for (const TreeFile& f : files) {
    if (f.host.empty()) continue;
    const std::string h = names::canonical_host(f.host);
    auto& names = context.fabric.has_switch(h) ? out.switches : out.hosts;
    if (std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
  }
  // BMCs log about the host they manage: their files join that host.
  std::vector<std::string> bmcs;
  for (const std::string& h : out.hosts)
    if (!managed_host(h, out.hosts, context.fabric).empty()) bmcs.push_back(h);
  for (const std::string& h : bmcs) {
    const std::string base = managed_host(h, out.hosts, context.fabric);
    if (std::find(out.hosts.begin(), out.hosts.end(), base) == out.hosts.end()) out.hosts.push_back(base);
  }
  std::erase_if(out.hosts, [&](const std::string& h) { return std::count(bmcs.begin(), bmcs.end(), h) > 0; });
  std::vector<ParseOptions> options(files.size());
  for (size_t k = 0; k < files.size(); ++k) {
    ParseOptions& po = options[k];
    std::string host = names::canonical_host(files[k].host);
    if (std::string base = managed_host(host, out.hosts, context.fabric); !base.empty()) host = base;
    po.time = context.time;
    std::error_code mec;
    auto mtime = fs::last_write_time(files[k].path, mec);
    if (!mec)
      po.time.reference_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::file_clock::to_sys(mtime).time_since_epoch())
                                 .count();
    po.default_host = host;
    po.switch_context = context.fabric.has_switch(host);
    po.file_index = context.first_file + uint32_t(k);
    po.file_name = "syslog/" + files[k].relative;
    po.defer_zone = !o.window.bounded();  // a window drops events: the file decides its own zone then
  }
  out.files.resize(files.size());
  std::atomic<int64_t> budget{int64_t(std::min<uint64_t>(o.max_lines, INT64_MAX))};
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < files.size();)
      out.files[k] = read_tree_file(files[k], options[k], budget, o.window);
  };
  unsigned threads = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, unsigned(files.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (budget.load() <= 0 && context.progress)
    context.progress(o.dir + ": stopped after " + std::to_string(o.max_lines) + " syslog lines");
  return out;
}

}  // namespace

LogSource syslog_source(SyslogSourceOptions options) {
  return [options](const SourceContext& context) { return read_syslog_tree(options, context); };
}

}  // namespace astral::monitor
