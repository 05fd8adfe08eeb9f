// File-level parsing: content-based type detection and the streaming reader that feeds lines to
// the LineParser (or hands whole structured files to their readers).
#include "astral/monitor/parse.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "line_parser.hpp"
#include "structured.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

std::string_view to_string(FileKind k) {
  switch (k) {
    case FileKind::text_log: return "text_log";
    case FileKind::events_jsonl: return "events_jsonl";
    case FileKind::flight_recorder: return "flight_recorder";
    case FileKind::nccl_ras: return "nccl_ras";
    case FileKind::nccl_inspector: return "nccl_inspector";
    case FileKind::fabric_json: return "fabric_json";
    case FileKind::nvidia_smi: return "nvidia_smi";
    case FileKind::site_layout: return "site_layout";
    case FileKind::ibnetdiscover: return "ibnetdiscover";
    case FileKind::cabling_csv: return "cabling_csv";
    case FileKind::astral_trace: return "astral_trace";
    case FileKind::binary: return "binary";
    case FileKind::empty: return "empty";
  }
  return "unknown";
}

FileKind detect_file_kind(sv head, sv name) {
  // Every format shows itself in its first few kilobytes; looking further only costs time.
  head = head.substr(0, 4096);
  if (trim(head).empty()) return FileKind::empty;
  // Binary files show control bytes (other than line ends, tabs and ANSI escapes) at once.
  static constexpr auto kControl = [] {
    std::array<uint8_t, 256> is {};
    for (int c = 0; c < 0x20; ++c) is[size_t(c)] = c != '\n' && c != '\r' && c != '\t' && c != 0x1b;
    return is;
  }();
  unsigned control = 0;
  const sv sample = head.substr(0, 512);
  for (unsigned char c : sample) control += kControl[c];
  if (control > sample.size() / 10 + 1) return FileKind::binary;
  if (ends_with(name, ".events.jsonl")) return FileKind::events_jsonl;
  sv t = trim(head);
  // JSON: an object, or an array of objects ("[Tue Aug 30 ..." and "[ 12.5]" are dmesg).
  const sv after_bracket = t[0] == '[' ? ltrim(trim(t.substr(1))) : sv();
  if (t[0] == '{' || (!after_bracket.empty() && (after_bracket[0] == '{' || after_bracket[0] == ']'))) {
    if ((contains(t, "\"entries\"") || contains(t, "'entries'")) &&
        (contains(t, "collective_seq_id") || contains(t, "pg_config") || contains(t, "pg_status") ||
         contains(t, "\"version\"") || contains(t, "'version'")))
      return FileKind::flight_recorder;
    if (contains(t, "\"coll_perf\"") || contains(t, "inspector_output_format_version")) return FileKind::nccl_inspector;
    if ((contains(t, "\"communicators\"") && contains(t, "nccl_version")) ||
        (contains(t, "\"event\"") && contains(t, "\"PEER_")))
      return FileKind::nccl_ras;
    if (contains(t, "\"layer\"") && contains(t, "\"kind\"") && contains(t, "\"time\"")) return FileKind::events_jsonl;
    if ((contains(t, "\"hosts\"") || contains(t, "\"fabric\"")) &&
        (contains(t, "\"switches\"") || contains(t, "\"links\"") || contains(t, "\"nics\"") ||
         contains(t, "\"switch_port\"")))
      return FileKind::fabric_json;
    if (contains(t, "\"racks\"") && (contains(t, "\"cooled_by\"") || contains(t, "\"powered_by\"") ||
                                     contains(t, "\"components\"")))
      return FileKind::site_layout;
  }
  if (contains(t.substr(0, 256), "NVSMI LOG")) return FileKind::nvidia_smi;
  const sv top = t.substr(0, 512);  // ibnetdiscover and CSV headers come first
  if (contains(top, "Topology file: generated") || contains(top, "switchguid=") || starts_with(t, "vendid=") ||
      (contains(top, "\nCa\t") && contains(top, "\"H-")) || (contains(top, "\nSwitch\t") && contains(top, "\"S-")))
    return FileKind::ibnetdiscover;
  {
    sv first = t.substr(0, std::min<size_t>(t.find('\n'), 256));
    if (contains(first, ",") && icontains(first, "host") && icontains(first, "switch") &&
        (icontains(first, "port") || icontains(first, "nic")))
      return FileKind::cabling_csv;
  }
  if (starts_with(head, "ASTRALTR")) return FileKind::astral_trace;
  return FileKind::text_log;
}

namespace {

void parse_text(sv content, LineParser& lp) {
  size_t pos = 0;
  while (pos < content.size()) {
    const void* hit = memchr(content.data() + pos, '\n', content.size() - pos);
    size_t nl = hit ? size_t(static_cast<const char*>(hit) - content.data()) : content.size();
    lp.feed(content.substr(pos, nl - pos));
    pos = nl + 1;
  }
}

uint64_t count_lines(sv content) {
  uint64_t n = 0;
  for (size_t pos = 0; (pos = content.find('\n', pos)) != sv::npos; ++pos) ++n;
  if (!content.empty() && content.back() != '\n') ++n;
  return n;
}

}  // namespace

ParseResult parse_buffer(sv content, FileKind kind, const ParseOptions& options) {
  ParseResult out;
  out.stats.path = options.file_name;
  out.stats.kind = kind;
  out.stats.host = options.default_host;
  out.stats.bytes = content.size();
  switch (kind) {
    case FileKind::text_log: {
      out.events.reserve(content.size() / 512);
      LineParser lp(options, out);
      parse_text(content, lp);
      lp.finish();
      return out;
    }
    case FileKind::events_jsonl: parse_events_jsonl(content, options, out); break;
    case FileKind::flight_recorder: parse_flight_recorder(content, options, out); break;
    case FileKind::nccl_inspector: parse_inspector(content, options, out); break;
    case FileKind::nvidia_smi: parse_nvidia_smi(content, options, out); break;
    case FileKind::nccl_ras: {
      parse_ras_json(content, options, out);
      break;
    }
    default: break;  // fabric files are read by the fabric loaders; binaries are skipped
  }
  out.stats.lines = count_lines(content);
  out.stats.events = out.events.size();
  return out;
}

namespace {

// One read buffer per parser thread: a bundle is thousands of small files, and allocating (and
// zero-filling) a buffer per file cost more than parsing most of them.
constexpr size_t kBlock = 1 << 20;
char* thread_block() {
  thread_local std::unique_ptr<char[]> block(new char[kBlock]);
  return block.get();
}

size_t read_some(int fd, char* into, size_t size, const std::string& path) {
  while (true) {
    ssize_t got = ::read(fd, into, size);
    if (got >= 0) return size_t(got);
    if (errno != EINTR) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
  }
}

}  // namespace

ParseResult parse_file(const std::string& path, const ParseOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  char* const block = thread_block();
  size_t got = read_some(fd, block, kBlock, path);
  const FileKind kind = detect_file_kind(sv(block, std::min<size_t>(got, 65536)), path);
  if (kind != FileKind::text_log) {
    // Structured files are read whole (they are small next to the logs); a pipe may deliver a
    // short first read, so the block is filled until end of file.
    for (size_t more = 1; got < kBlock && more > 0; got += more) more = read_some(fd, block + got, kBlock - got, path);
    if (got < kBlock) return parse_buffer(sv(block, got), kind, options);
    std::string whole(block, got);
    while ((got = read_some(fd, block, kBlock, path)) > 0) whole.append(block, got);
    return parse_buffer(whole, kind, options);
  }
  ParseResult out;
  out.stats.path = options.file_name;
  out.stats.kind = kind;
  out.stats.host = options.default_host;
  out.events.reserve(got / 512);
  LineParser lp(options, out);
  // Stream: complete lines of each block are parsed; the tail waits for the next block.
  std::string carry;
  uint64_t bytes = 0;
  while (got > 0) {
    bytes += got;
    sv data(block, got);
    if (!carry.empty()) {
      size_t nl = data.find('\n');
      if (nl == sv::npos) {
        carry.append(data);
        data = {};
      } else {
        carry.append(data.substr(0, nl));
        lp.feed(carry);
        carry.clear();
        data.remove_prefix(nl + 1);
      }
    }
    size_t last_nl = data.rfind('\n');
    if (last_nl != sv::npos) {
      parse_text(data.substr(0, last_nl + 1), lp);
      carry.append(data.substr(last_nl + 1));
    } else {
      carry.append(data);
    }
    got = read_some(fd, block, kBlock, path);
  }
  if (!carry.empty()) lp.feed(carry);
  lp.finish();
  out.stats.bytes = bytes;
  return out;
}

}  // namespace astral::monitor
