#pragma once
// A bundle: what an operator collects after an incident. One folder per host holding any mix of
// files (types are detected from content), a `switches/` folder with one file or folder per
// switch, and optionally a fabric file (fabric JSON, ibnetdiscover output or a cabling CSV) and a
// site layout (facility/site.hpp: hosts in racks, the cooling and power equipment of each rack).
// Loading parses every file (in parallel), dates year- and zone-less lines, puts host names in
// one form, removes duplicate lines shipped twice and sorts the events by time.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "astral/facility/site.hpp"
#include "astral/monitor/event.hpp"
#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/parse.hpp"

namespace astral::monitor {

// What a source beyond the bundle folder (journal files, a syslog tree: sources.hpp) is given,
// and what it hands back: parsed files in the folder's form, so that they are dated, joined and
// diagnosed exactly as the folder's files are.
struct SourceContext {
  const FabricGraph& fabric;  // switches of the fabric have switch logs
  uint32_t first_file = 0;    // file index of the source's first file
  TimeContext time;           // --year / --tz
  std::function<void(std::string_view)> progress;
};
struct SourceFiles {
  std::vector<ParseResult> files;
  std::vector<std::string> hosts, switches;
};
using LogSource = std::function<SourceFiles(const SourceContext&)>;

struct BundleOptions {
  int year = 0;                           // --year: for year-less timestamps
  std::optional<int64_t> tz_offset_s;     // --tz: the hosts' zone (seconds east of UTC)
  std::string fabric_path;                // --fabric; a fabric file in the bundle is used otherwise
  std::string site_path;                  // --site; a site layout in the bundle is used otherwise
  unsigned jobs = 0;                      // parser threads; 0: one per core
  std::function<void(std::string_view)> progress;  // progress lines (stderr in the CLI)
  std::vector<LogSource> sources;  // read after the folder; the folder may then be "" (none)
};

struct Bundle {
  std::string root;
  std::vector<FileStats> files;  // Event::file indexes this
  std::vector<Event> events;     // by time; undated events last
  std::vector<CollectiveSample> samples;
  FabricGraph fabric;
  std::vector<std::string> fabric_sources;
  facility::SiteLayout site;  // empty when none was given or found
  std::vector<std::string> site_sources;
  std::vector<std::string> hosts;     // host folders
  std::vector<std::string> switches;  // entries of switches/
  std::map<std::string, std::string> host_aliases;  // name in the logs -> bundle host
  std::map<std::string, std::string> ip_hosts;      // address -> host
  uint64_t duplicates_removed = 0;

  std::string_view file_name(uint32_t index) const;
  std::string canonical_host(std::string_view name) const;  // alias- and IP-resolved
};

// Throws std::runtime_error with a one-line message naming the input when the bundle cannot be
// read at all (missing path, no files); damaged content never throws.
Bundle load_bundle(const std::string& path, const BundleOptions& options = {});

// "+08:00", "-0530", "UTC", "Z" or an IANA zone name (resolved with the system tz database at
// `at_utc_s`). nullopt if not understood.
std::optional<int64_t> parse_tz(std::string_view tz, int64_t at_utc_s);

}  // namespace astral::monitor
