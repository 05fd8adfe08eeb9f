#pragma once
// sources.json: what `astral facility serve|read|pue|events --config` polls and how the figures
// are derived. Credentials never live in it: each Redfish source names a credentials file or an
// environment prefix. Relative paths are relative to the config file. docs/facility.md has the
// full format with an example.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "astral/facility/derived.hpp"
#include "astral/facility/local.hpp"
#include "astral/facility/redfish.hpp"
#include "astral/facility/site.hpp"

namespace astral::facility {

struct FacilityConfig {
  PollOptions poll;
  std::chrono::milliseconds interval{15000};  // serve: time between polls
  std::vector<RedfishEndpoint> redfish;
  std::optional<std::string> hwmon_root;
  std::optional<std::string> rapl_root;
  std::optional<IpmiOptions> ipmi;
  std::vector<std::string> ipmi_files;  // recorded ipmitool output, read each poll
  std::optional<NvmlOptions> nvml;
  DeriveConfig derive;
  SiteLayout site;  // "site": inline, or a path to a site layout file
  std::vector<std::string> warnings;  // e.g. a credentials file others can read
};

// Throws std::runtime_error "<path>: <what is wrong and how to fix it>".
FacilityConfig load_config(const std::string& path);
FacilityConfig parse_config(const std::string& json_text, const std::string& base_dir,
                            const std::string& name_for_errors);

// Polls every configured source once (Redfish with bounded concurrency, then the local readers).
// `rapl` keeps RAPL counters between calls so power can be computed; pass the same one each time.
// Replaces the config's site layout (`--site FILE`) and warns about components whose source is
// none of the configured Redfish sources (the layout may describe more than one exporter polls).
void use_site_layout(FacilityConfig& config, SiteLayout site);

Snapshot poll_sources(const FacilityConfig& config, RaplMeter* rapl);

}  // namespace astral::facility
