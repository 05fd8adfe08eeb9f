#pragma once
// One Perfetto-openable timeline (Chrome JSON trace, log-formats.md §5.1) of every layer of every
// host: a process per host and per switch, a thread per log layer and per rank; log events as
// instants, stuck collectives and timed collectives as slices, root causes on their own track.
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"

namespace astral::monitor {

// `diagnosis` may be null (events only). Times are the bundle's (aligned when diagnosed).
nlohmann::json timeline_json(const Bundle& bundle, const Diagnosis* diagnosis);
// Writes the trace to `path`; throws std::runtime_error naming the path when it cannot.
void write_timeline(const Bundle& bundle, const Diagnosis* diagnosis, const std::string& path);

}  // namespace astral::monitor
