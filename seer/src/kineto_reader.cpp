// Streaming reader of PyTorch profiler (Kineto) traces. nlohmann's SAX parser (already a
// dependency) over a memory-mapped file: the trace is never held as a JSON tree (a 200 MB trace
// would take gigabytes as one), and only the fields calibration needs are kept. simdjson would
// parse faster, but it is a new dependency and its on-demand API needs the whole document padded
// in memory; the SAX pass meets the 10 s budget for 200 MB with room (tools/bench/seer_kineto.cpp).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "astral/seer/kineto.hpp"

namespace astral::seer {
namespace {

// Nesting, counted from the document: 1 the top object, 2 traceEvents, 3 an event, 4 its args,
// 5 an args array ("Input Dims", "Input type"), 6 one input's shape.
constexpr int kEventDepth = 3, kArgsDepth = 4, kArgArrayDepth = 5, kShapeDepth = 6;

enum class EventCat { kOther, kKernel, kCpuOp, kRuntime, kGpuAnnotation, kCpuAnnotation };

EventCat category_of(const std::string& cat) {
  if (cat == "kernel" || cat == "Kernel") return EventCat::kKernel;
  if (cat == "cpu_op" || cat == "operator" || cat == "Operator") return EventCat::kCpuOp;
  if (cat == "cuda_runtime" || cat == "Runtime" || cat == "cuda_driver") return EventCat::kRuntime;
  if (cat == "gpu_user_annotation") return EventCat::kGpuAnnotation;
  if (cat == "user_annotation") return EventCat::kCpuAnnotation;
  return EventCat::kOther;
}

// The event being read; reset per event, buffers reused.
struct PendingEvent {
  std::string ph, cat, name;
  double ts = 0, dur = 0;
  std::int64_t external_id = -1, correlation = -1;
  int device = 0;
  std::vector<std::vector<std::int64_t>> dims;
  std::vector<std::string> types;
  void reset() {
    ph.clear(), cat.clear(), name.clear();
    ts = dur = 0;
    external_id = correlation = -1;
    device = 0;
    dims.clear(), types.clear();
  }
};

class KinetoSax {
 public:
  explicit KinetoSax(KinetoTrace& out) : out_(out) {}

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(std::int64_t v) { return integer(v); }
  bool number_unsigned(std::uint64_t v) { return integer(static_cast<std::int64_t>(v)); }
  bool number_float(double v, const std::string&) { return number(v); }
  bool binary(nlohmann::json::binary_t&) { return true; }

  bool string(std::string& v) {
    if (depth_ == kEventDepth && in_events_) {
      const std::string& k = key_[kEventDepth];
      if (k == "ph") ev_.ph = v;
      else if (k == "cat") ev_.cat = v;
      else if (k == "name") ev_.name.swap(v);
    } else if (depth_ == kArgArrayDepth && in_args() && key_[kArgsDepth] == "Input type") {
      ev_.types.push_back(v);
    }
    return true;
  }

  bool start_object(std::size_t) {
    ++depth_;
    if (depth_ == 1) saw_object_ = true;
    if (depth_ == kEventDepth && in_events_) ev_.reset();
    return true;
  }
  bool end_object() {
    if (depth_ == kEventDepth && in_events_) finish_event();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    ++depth_;
    if (depth_ == 2 && key_[1] == "traceEvents") in_events_ = saw_events_ = true;
    if (depth_ == kShapeDepth && in_args() && key_[kArgsDepth] == "Input Dims") ev_.dims.emplace_back();
    return true;
  }
  bool end_array() {
    if (depth_ == 2) in_events_ = false;
    --depth_;
    return true;
  }
  bool key(std::string& k) {
    if (depth_ < int(sizeof key_ / sizeof key_[0])) key_[depth_].swap(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_position_ = position;
    error_ = e.what();
    return false;
  }

  bool saw_object() const { return saw_object_; }
  bool saw_events() const { return saw_events_; }
  std::size_t error_position() const { return error_position_; }
  const std::string& error() const { return error_; }

 private:
  bool in_args() const { return in_events_ && depth_ >= kArgsDepth && key_[kEventDepth] == "args"; }

  bool integer(std::int64_t v) {
    if (depth_ == kShapeDepth && in_args() && key_[kArgsDepth] == "Input Dims") {
      ev_.dims.back().push_back(v);
      return true;
    }
    if (depth_ == kArgsDepth && in_args()) {
      const std::string& k = key_[kArgsDepth];
      if (k == "External id") ev_.external_id = v;
      else if (k == "correlation") ev_.correlation = v;
      else if (k == "device") ev_.device = int(v);
      return true;
    }
    if (depth_ == 2 && key_[1] == "distributedInfo" && key_[2] == "rank") out_.rank = int(v);
    return number(double(v));
  }

  bool number(double v) {
    if (depth_ == kEventDepth && in_events_) {
      if (key_[kEventDepth] == "ts") ev_.ts = v;
      else if (key_[kEventDepth] == "dur") ev_.dur = v;
    }
    return true;
  }

  void finish_event() {
    ++out_.events;
    if (ev_.ph != "X") return;
    switch (category_of(ev_.cat)) {
      case EventCat::kKernel: {
        auto [it, added] = name_index_.try_emplace(ev_.name, int(out_.names.size()));
        if (added) out_.names.push_back(ev_.name);
        out_.kernels.push_back({it->second, ev_.ts, ev_.dur, ev_.device, ev_.external_id, ev_.correlation});
        break;
      }
      case EventCat::kCpuOp:
        if (ev_.external_id >= 0 && !ev_.dims.empty())
          out_.cpu_ops[ev_.external_id] = KinetoCpuOp{ev_.name, std::move(ev_.dims), std::move(ev_.types)};
        break;
      case EventCat::kRuntime:
        if (ev_.correlation >= 0 && ev_.external_id >= 0) out_.launches[ev_.correlation] = ev_.external_id;
        break;
      case EventCat::kGpuAnnotation:
      case EventCat::kCpuAnnotation:
        if (ev_.name.rfind("ProfilerStep#", 0) == 0)
          (category_of(ev_.cat) == EventCat::kGpuAnnotation ? out_.gpu_steps : out_.cpu_steps).push_back(ev_.dur);
        break;
      case EventCat::kOther: break;
    }
  }

  KinetoTrace& out_;
  int depth_ = 0;
  std::string key_[8];
  bool in_events_ = false, saw_events_ = false, saw_object_ = false;
  PendingEvent ev_;
  std::unordered_map<std::string, int> name_index_;
  std::size_t error_position_ = 0;
  std::string error_;
};

KinetoTrace parse_range(const char* begin, const char* end, const std::string& origin) {
  KinetoTrace trace;
  trace.origin = origin;
  KinetoSax sax(trace);
  const bool ok = nlohmann::json::sax_parse(begin, end, &sax);
  if (!ok) {
    const bool truncated = sax.error_position() >= std::size_t(end - begin);
    throw std::runtime_error(fmt::format("{}: not valid JSON at byte {}{}", origin, sax.error_position(),
                                         truncated ? " (the file ends early: truncated?)" : ""));
  }
  if (!sax.saw_object() || !sax.saw_events())
    throw std::runtime_error(fmt::format("{}: traceEvents: missing (not a PyTorch profiler trace; write one with "
                                         "torch.profiler's export_chrome_trace)",
                                         origin));
  if (trace.kernels.empty())
    throw std::runtime_error(fmt::format("{}: traceEvents: no GPU kernel events (cat \"kernel\"; was the profiler "
                                         "run with ProfilerActivity.CUDA?)",
                                         origin));
  return trace;
}

// A read-only mapping of a whole file, unmapped on scope exit.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw std::runtime_error(fmt::format("{}: not a regular file", path));
    }
    size_ = std::size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw std::runtime_error(fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
      }
      ::madvise(p, size_, MADV_SEQUENTIAL);
      data_ = static_cast<const char*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* begin() const { return data_ ? data_ : ""; }
  const char* end() const { return begin() + size_; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

const KinetoCpuOp* KinetoTrace::launcher(const KinetoKernel& k) const {
  std::int64_t id = k.external_id;
  if (id < 0 && k.correlation >= 0) {
    auto l = launches.find(k.correlation);
    if (l != launches.end()) id = l->second;
  }
  if (id < 0) return nullptr;
  auto op = cpu_ops.find(id);
  return op == cpu_ops.end() ? nullptr : &op->second;
}

KinetoTrace parse_kineto_trace(const std::string& text, const std::string& origin) {
  return parse_range(text.data(), text.data() + text.size(), origin);
}

KinetoTrace read_kineto_trace(const std::string& path) {
  MappedFile file(path);
  return parse_range(file.begin(), file.end(), path);
}

}  // namespace astral::seer
