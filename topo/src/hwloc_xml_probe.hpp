// Internal: hwloc's XML import tried in a short-lived child process first.
#pragma once

#include <string>

namespace astral::topo::detail {

// Imports `path` with hwloc in a forked child and throws TopologyError, naming the file, when the
// import crashed or did not finish there. Returns normally when the child imported it, or
// rejected it cleanly (the caller's own import then says why), or could not be started.
void probe_hwloc_xml_in_child(const std::string& path);

}  // namespace astral::topo::detail
