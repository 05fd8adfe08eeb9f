// libFuzzer target: hwloc XML (`astral topo audit --hwloc-xml`, lstopo output from any node). The
// bytes go through the same path as a file: load_hwloc_xml (hwloc's XML import, tried first in a
// child process so that a crash inside libhwloc is an error, not a finding:
// topo/src/hwloc_xml_probe.cpp; then the node builder). Whatever loads must also round-trip: the
// NCCL topology written for it must be accepted by our own NCCL XML reader, or the writer emits
// files NCCL would reject.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "astral/topo/nccl_xml.hpp"
#include "astral/topo/node.hpp"

// hwloc 2.9's XML import can leak the objects of a topology it rejects half-way (inside libhwloc,
// not Astral: seen on malformed input by this target). Those leaks are not findings here.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhwloc.so\n"; }

namespace {
// One in-memory file for the whole run (no temporary files left behind), rewritten per input.
const std::string& memory_file(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("fuzz-hwloc.xml", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size)) __builtin_trap();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::topo;
  const std::string& path = memory_file(data, size);
  Node node;
  try {
    node = load_hwloc_xml(path);
  } catch (const TopologyError&) {
    return 0;
  }
  const std::string nccl = write_nccl_topology(node);
  const NcclXmlElement root = parse_nccl_topology(nccl, "written.xml");  // throws: a finding
  (void)check_nccl_pairing(node, root);
  return 0;
}
