// Journal files (systemd-journal-remote's output, or any journal folder) as a bundle source.
// libsystemd's sd-journal reads the files: it knows the format's versions, compression and
// hash tables, and reads a file that is still being written. Entries go straight to the line
// parser with their receive time (no export to text and back); the line's own time, when it
// carries one, still wins, as it does for a log file.
#include <systemd/sd-journal.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "astral/monitor/sources.hpp"
#include "line_parser.hpp"
#include "names.hpp"

namespace astral::monitor {
namespace fs = std::filesystem;

namespace {

bool is_journal_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 8 && (name.ends_with(".journal") || name.ends_with(".journal~"));
}

std::vector<std::string> journal_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) return {dir};
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; it != end;
       it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec) && is_journal_file(it->path())) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The value of FIELD=value data, or "" when the entry lacks it.
std::string_view field(sd_journal* j, const char* name) {
  const void* data = nullptr;
  size_t size = 0;
  if (sd_journal_get_data(j, name, &data, &size) < 0) return {};
  std::string_view all(static_cast<const char*>(data), size);
  const size_t eq = all.find('=');
  return eq == std::string_view::npos ? std::string_view{} : all.substr(eq + 1);
}

// A journal file cut short (copied while written, a full disk) has a header that promises more
// than the file holds, and sd-journal refuses it. A copy whose header ends at the last whole
// object opens, and reads every entry written before the damage. Header fields (journal file
// format): header_size at 88, arena_size at 96, tail_object_offset at 136; each object starts
// with its type byte and its le64 size at 8, objects 8-byte aligned.
class RepairedCopy {
 public:
  explicit RepairedCopy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto le64 = [&](size_t at) {
      uint64_t v = 0;
      for (int i = 7; i >= 0; --i) v = (v << 8) | uint8_t(d[at + size_t(i)]);
      return v;
    };
    auto put64 = [&](size_t at, uint64_t v) {
      for (int i = 0; i < 8; ++i) d[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
    };
    if (d.size() < 272 || d.compare(0, 8, "LPKSHHRH") != 0) return;
    // The header's own fields are as damaged as the rest may be: every offset is checked
    // against the file before it is read, by subtraction (never at + size, which can wrap).
    const uint64_t header = le64(88);
    if (header < 144 || header > d.size()) return;  // 144: the fields written below are in it
    uint64_t at = header, last = 0;
    while (at <= d.size() && d.size() - at >= 16) {
      const uint64_t size = le64(at + 8);
      if (d[at] == 0 || size < 16 || size > d.size() - at) break;
      last = at;
      at = (at + size + 7) & ~uint64_t(7);
    }
    if (!last) return;
    put64(96, at - header);
    put64(136, last);
    d.resize(std::min<uint64_t>(at, d.size()));
    std::string dir = (fs::temp_directory_path() / "astral-journal-XXXXXX").string();
    if (!mkdtemp(dir.data())) return;
    dir_ = dir;
    path_ = dir + "/repaired.journal";
    std::ofstream(path_, std::ios::binary) << d;
  }
  ~RepairedCopy() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  RepairedCopy(const RepairedCopy&) = delete;
  RepairedCopy& operator=(const RepairedCopy&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// One host's lines in one journal file: a parsed file of the bundle.
struct HostStream {
  ParseOptions options;
  ParseResult result;
  std::unique_ptr<LineParser> parser;
};

struct FileReader {
  const JournalSourceOptions& options;
  const SourceContext& context;
  std::atomic<uint64_t>& budget;  // entries left over all files

  // Hosts in the order first seen; file indexes are assigned by the caller.
  std::vector<std::unique_ptr<HostStream>> read(const std::string& path, const std::string& label) {
    std::vector<std::unique_ptr<HostStream>> streams;
    std::map<std::string, size_t, std::less<>> by_host;
    sd_journal* j = nullptr;
    const char* paths[] = {path.c_str(), nullptr};
    int r = sd_journal_open_files(&j, paths, 0);
    std::string damage, cut;
    std::unique_ptr<RepairedCopy> repaired;
    if (r == -ENODATA || r == -EBADMSG) {  // truncated: read what was written before the cut
      repaired = std::make_unique<RepairedCopy>(path);
      const char* again[] = {repaired->path().c_str(), nullptr};
      if (!repaired->path().empty() && sd_journal_open_files(&j, again, 0) >= 0) {
        damage = std::string("file truncated: ") + std::strerror(-r);
        r = 0;
      }
    }
    if (r < 0) {
      auto& s = streams.emplace_back(std::make_unique<HostStream>());
      s->result.stats.path = label;
      s->result.stats.damaged = 1;
      s->result.stats.notes.push_back(label + ": cannot open journal file: " + std::strerror(-r));
      return streams;
    }
    int64_t latest_us = kUnknownTime;
    if (uint64_t from = 0, to = 0; sd_journal_get_cutoff_realtime_usec(j, &from, &to) > 0) latest_us = int64_t(to);
    r = options.window.from_us != kUnknownTime ? sd_journal_seek_realtime_usec(j, uint64_t(options.window.from_us))
                                               : sd_journal_seek_head(j);
    uint64_t entries = 0;
    while (r >= 0) {
      r = sd_journal_next(j);
      if (r <= 0) {
        if (r < 0) damage = std::strerror(-r);
        break;
      }
      uint64_t when = 0;
      if (sd_journal_get_realtime_usec(j, &when) < 0) continue;
      if (options.window.to_us != kUnknownTime && int64_t(when) > options.window.to_us) break;
      if (budget.fetch_sub(1) == 0) {
        budget = 0;
        cut = "line limit reached";
        break;
      }
      ++entries;
      std::string_view host = field(j, "_HOSTNAME");
      std::string name = host.empty() ? std::string("unknown") : names::canonical_host(host);
      auto [it, fresh] = by_host.try_emplace(name, streams.size());
      if (fresh) streams.push_back(open_stream(label, name, latest_us));
      HostStream& s = *streams[it->second];
      // A multi-line message is several lines of the same time (tracebacks, RAS blocks).
      std::string_view message = field(j, "MESSAGE");
      for (size_t pos = 0; pos <= message.size();) {
        size_t nl = message.find('\n', pos);
        if (nl == std::string_view::npos) nl = message.size();
        if (nl > pos || pos == 0) s.parser->feed_at(message.substr(pos, nl - pos), int64_t(when));
        pos = nl + 1;
      }
    }
    sd_journal_close(j);
    for (auto& s : streams) {
      s->parser->finish();
      if (!damage.empty()) {
        ++s->result.stats.damaged;
        s->result.stats.notes.push_back(label + ": journal damaged after " + std::to_string(entries) +
                                        " entries (" + damage + "); read up to the damage");
      }
      if (!cut.empty()) s->result.stats.notes.push_back(label + ": " + cut + "; later entries not read");
    }
    if (streams.empty() && !damage.empty()) {  // damaged before the first entry
      auto& s = streams.emplace_back(std::make_unique<HostStream>());
      s->result.stats.path = label;
      s->result.stats.damaged = 1;
      s->result.stats.notes.push_back(label + ": journal damaged before its first entry (" + damage + ")");
    }
    return streams;
  }

  std::unique_ptr<HostStream> open_stream(const std::string& label, const std::string& host, int64_t latest_us) {
    auto s = std::make_unique<HostStream>();
    s->options.time = context.time;
    s->options.time.reference_us = latest_us;
    s->options.default_host = host;
    s->options.switch_context = context.fabric.has_switch(host);
    s->options.file_name = label + "#" + host;
    s->options.defer_zone = true;
    s->result.stats.path = s->options.file_name;
    s->result.stats.kind = FileKind::text_log;
    s->result.stats.host = host;
    s->parser = std::make_unique<LineParser>(s->options, s->result);
    return s;
  }
};

SourceFiles read_journal_dir(const JournalSourceOptions& options, const SourceContext& context) {
  const std::vector<std::string> files = journal_files(options.dir);
  if (files.empty()) throw std::runtime_error(options.dir + ": no journal files (*.journal) there");
  std::atomic<uint64_t> budget{options.max_entries};
  std::vector<std::vector<std::unique_ptr<HostStream>>> per_file(files.size());
  std::atomic<size_t> next{0};
  FileReader reader{options, context, budget};
  const fs::path base = fs::is_directory(options.dir) ? fs::path(options.dir) : fs::path(options.dir).parent_path();
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < files.size();)
      per_file[k] = reader.read(files[k], "journal/" + fs::relative(files[k], base).string());
  };
  unsigned threads = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, unsigned(files.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  SourceFiles out;
  for (auto& streams : per_file)
    for (auto& s : streams) {
      const uint32_t index = context.first_file + uint32_t(out.files.size());
      for (Event& e : s->result.events) e.file = index;
      for (CollectiveSample& c : s->result.samples) c.file = index;
      if (!s->result.stats.host.empty() &&
          std::find(out.hosts.begin(), out.hosts.end(), s->result.stats.host) == out.hosts.end()) {
        auto& names = s->options.switch_context ? out.switches : out.hosts;
        names.push_back(s->result.stats.host);
      }
      out.files.push_back(std::move(s->result));
    }
  if (budget.load() == 0 && context.progress)
    context.progress(options.dir + ": stopped after " + std::to_string(options.max_entries) + " journal entries");
  return out;
}

}  // namespace

LogSource journal_source(JournalSourceOptions options) {
  return [options](const SourceContext& context) { return read_journal_dir(options, context); };
}

}  // namespace astral::monitor
