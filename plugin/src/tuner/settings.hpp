#pragma once
// The tuner's settings, read from the environment at each communicator's init (so one process can
// hold communicators made under different settings). Every variable is documented in README.md
// ("Seer", the NCCL tuner). A malformed value is reported with one warning naming the variable and
// the default used instead; it never fails the job.
#include <string>
#include <vector>

#include "core/config.hpp"

namespace astral::plugin::tuner {

struct Settings {
  bool enabled = true;              // ASTRAL_TUNER=off leaves NCCL's cost table untouched
  std::string hardware = "h100-sxm";  // ASTRAL_TUNER_HW: bundled profile name or JSON path
  std::string network;              // ASTRAL_TUNER_NETWORK: Seer network JSON, bundled name or
                                    // astral-fabric file; "" = uniform fabric from the hardware
  std::string host = "live";        // ASTRAL_TUNER_HOST: live | off | hwloc XML path (rails, GPUs)
  std::string ecmp_table;           // ASTRAL_TUNER_ECMP_TABLE: `astral fabric ecmp-table` output
                                    // for the ASTRAL_TUNER_NETWORK fabric; "" = the tiers' own
  int qps = 1;                      // NCCL_IB_QPS_PER_CONNECTION: the table's QP column

  bool operator==(const Settings&) const = default;
};

// Parses the settings; problems are appended to `warnings` (one line each) and defaults used.
Settings parse_settings(const EnvLookup& env, std::vector<std::string>* warnings);

}  // namespace astral::plugin::tuner
