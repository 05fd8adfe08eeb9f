#pragma once
// Reading a PyTorch profiler (Kineto) trace, as torch.profiler's export_chrome_trace writes it,
// into the few records Seer's calibration needs: GPU kernels (cat "kernel"), the CPU operators
// that launched them (cat "cpu_op", with "Input Dims" / "Input type" when the profiler ran with
// record_shapes=True), the runtime launches that link the two ("correlation" -> "External id"),
// and the ProfilerStep#N annotations. The file is parsed as a stream (nlohmann's SAX interface),
// so a trace of hundreds of MB never becomes a JSON tree in memory.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace astral::seer {

struct KinetoKernel {
  int name = 0;            // index into KinetoTrace::names
  double ts = 0, dur = 0;  // microseconds
  int device = 0;
  std::int64_t external_id = -1;  // args."External id" (newer PyTorch writes it on kernels too)
  std::int64_t correlation = -1;  // args.correlation, shared with the runtime launch
};

struct KinetoCpuOp {
  std::string name;                               // "aten::mm", "aten::native_layer_norm", ...
  std::vector<std::vector<std::int64_t>> dims;    // args."Input Dims": one shape per input ([] for scalars)
  std::vector<std::string> types;                 // args."Input type": "c10::BFloat16", "float", ...
};

struct KinetoTrace {
  std::string origin;                 // the input's name, for messages
  std::vector<std::string> names;     // distinct kernel names
  std::vector<KinetoKernel> kernels;  // in file order
  std::unordered_map<std::int64_t, KinetoCpuOp> cpu_ops;       // by External id (ops with input shapes)
  std::unordered_map<std::int64_t, std::int64_t> launches;     // runtime correlation -> External id
  std::vector<double> gpu_steps, cpu_steps;  // ProfilerStep#N durations, microseconds
  int rank = -1;                             // distributedInfo.rank, -1 when absent
  long events = 0;                           // traceEvents entries read
  // The CPU operator that launched `k`, or nullptr (no shapes recorded, or no link in the trace).
  const KinetoCpuOp* launcher(const KinetoKernel& k) const;
};

// Reads the trace at `path`. Throws std::runtime_error with one line naming `path` and the field:
// not JSON or truncated (with the byte offset), no traceEvents array (not a Kineto trace), or no
// GPU kernel events.
KinetoTrace read_kineto_trace(const std::string& path);
// The same from text in memory (tests); `origin` names it in errors.
KinetoTrace parse_kineto_trace(const std::string& text, const std::string& origin);

}  // namespace astral::seer
