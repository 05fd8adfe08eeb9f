// libFuzzer target: NCCL topology XML (what a user hands to `astral topo` as NCCL_TOPO_FILE). The
// reader must accept or reject any bytes with TopologyError; a parsed tree then goes through the
// pairing check against a real node (the HGX fixture), which must not crash either.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "astral/topo/nccl_xml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::topo;
  static const Node node = load_hwloc_xml(ASTRAL_FIXTURES_DIR "/astral/topo/hgx-h100-8x400g/hwloc.xml");
  try {
    const NcclXmlElement root = parse_nccl_topology(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.xml");
    (void)check_nccl_pairing(node, root);
  } catch (const TopologyError&) {
  }
  return 0;
}
