#pragma once
// The traffic patterns netbench measures, written once against Fabric.
#include <cstddef>
#include <vector>

#include "astral/netbench/netbench.hpp"
#include "netbench/fabric.hpp"

namespace astral::netbench {

struct PatternRun {
  std::vector<double> iteration_s;  // per timed iteration (empty for stream)
  double total_s = 0;               // timed part only
  bool verified = false;            // payload checked on this rank
};

struct PatternSpec {
  Pattern pattern;
  size_t bytes;
  int iterations;
  int warmup;
  int window;
};

// Runs `spec` on this rank. Ranks pair up (0-1, 2-3, ...) for pingpong, stream and
// bidirectional; all ranks take part in all-to-all and all-reduce.
PatternRun run_pattern(Fabric& fabric, const PatternSpec& spec, int rank, int ranks);

}  // namespace astral::netbench
