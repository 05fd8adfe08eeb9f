#pragma once
// Calibrating the operator model from a PyTorch profiler (Kineto) trace of a few steps
// (`astral seer calibrate --kineto trace.json`). Every GPU kernel is classified as `seer compare`
// does (classify_kernel). Kernels whose launching CPU operator recorded its input shapes become
// operator measurements:
//   gemm       aten::mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm: m, n, k, batch, dtype
//   attention  flash / scaled-dot-product forward and backward: batch, sequence, heads, head dim
//   memory     element-wise, norm, softmax and dropout kernels: bytes read and written, from the
//              input shapes and types (the output counted as large as the first input)
// Identical shapes are averaged, and the efficiencies (gemm, memory, flash_fwd, flash_bwd, kernel
// overhead) are fitted to them with `calibrate`. Collectives are counted, not fitted (their
// efficiencies come from `calibrate --steps` or the profile). A kernel that cannot be classified
// is counted and listed, never guessed.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/kineto.hpp"
#include "astral/seer/spec.hpp"

namespace astral::seer {

struct KinetoKindTally {
  std::string kind;  // classify_kernel's kind
  long kernels = 0;
  double seconds = 0;  // total in the trace
  long measured = 0;   // kernels that became measurements (their operator's shapes known)
};

struct KinetoUnclassified {
  std::string name;
  long count = 0;
  double seconds = 0;
};

struct KinetoCalibration {
  CalibrationResult fit;
  int device = 0;
  int steps = 0;             // ProfilerStep#N annotations (0: none in the trace)
  double step_seconds = 0;   // mean measured step, 0 without annotations
  long kernels = 0;          // on the device read
  long unclassified = 0;     // kernels of kind "other"
  long without_shapes = 0;   // classified compute kernels whose operator's shapes are unknown
  std::vector<KinetoKindTally> kinds;              // by time, largest first
  std::vector<KinetoUnclassified> unclassified_names;  // by time, largest first
};

struct KinetoCalibrationOptions {
  int rank = -1;  // when >= 0, the trace's distributedInfo.rank must be this
};

// Throws std::runtime_error naming `trace.origin` and the field when the trace is for another rank
// or no kernel can be tied to an operator with shapes (nothing to fit).
KinetoCalibration calibrate_kineto(const HardwareSpec& hw, const KinetoTrace& trace,
                                   const KinetoCalibrationOptions& options = {});

nlohmann::json to_json(const KinetoCalibration& c);
std::string format_kineto_calibration(const KinetoCalibration& c, const std::string& origin);

}  // namespace astral::seer
