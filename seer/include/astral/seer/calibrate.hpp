#pragma once
// Calibrating the operator model from measured operator times. A CSV (docs/seer.md) lists GEMM
// shapes, element-wise byte counts and fused-attention shapes with their measured time; the fit
// adjusts the hardware profile's efficiencies (GEMM, memory, flash forward/backward) and the
// per-kernel overhead to minimise the squared log error, and reports the error before and after.
#include <string>
#include <vector>

#include "astral/seer/spec.hpp"

namespace astral::seer {

enum class MeasuredKind { kGemm, kMemory, kFlashForward, kFlashBackward };

struct OperatorMeasurement {
  MeasuredKind kind = MeasuredKind::kGemm;
  std::string name;
  double m = 0, n = 0, k = 0, batch = 1;  // GEMM shape; flash: m = sequence, n = heads, k = head_dim
  double bytes = 0;                        // memory-bound kernels
  DType dtype = DType::kBf16;
  double seconds = 0;                      // measured
  int line = 0;
};

// Parses the CSV text; `origin` names the input in errors ("ops.csv:12: ...").
std::vector<OperatorMeasurement> parse_operator_csv(const std::string& text, const std::string& origin);

// Seer's time for one measured operator with this hardware profile.
double model_seconds(const HardwareSpec& hw, const OperatorMeasurement& op);

struct CalibrationResult {
  HardwareSpec calibrated;
  double mean_abs_pct_before = 0;
  double mean_abs_pct_after = 0;
  struct Row {
    std::string name;
    double measured = 0, before = 0, after = 0;
  };
  std::vector<Row> rows;
  std::vector<std::string> fitted;  // parameters the data could constrain
};

// Fits the efficiencies that the measurements constrain (GEMM rows fit `gemm`, memory rows
// `memory`, flash rows `flash_fwd`/`flash_bwd`; the kernel overhead when there are >= 3 rows).
CalibrationResult calibrate(const HardwareSpec& hw, const std::vector<OperatorMeasurement>& ops);

}  // namespace astral::seer
