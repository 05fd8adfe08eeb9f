// libFuzzer target: the fabric JSON loader (`astral fabric show|paths|sim --fabric FILE`, and the
// monitor's site model). Any document must load or fail with FabricError naming the element; a
// fabric that loads is summarised, written back, and its link labels parse back to the same links.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "astral/topo/fabric.hpp"
#include "astral/topo/fabric_summary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::topo;
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_discarded()) return 0;
  try {
    const Fabric fabric = fabric_from_json(doc);
    (void)format_summary(summarize(fabric));
    (void)fabric_from_json(fabric_to_json(fabric));  // what we write, we read
    const size_t links = std::min<size_t>(fabric.links().size(), 64);
    for (size_t i = 0; i < links; ++i) {
      const auto found = fabric.find_link("#" + std::to_string(i));
      if (!found || *found != int(i)) __builtin_trap();
      (void)fabric.link_label(int(i));
    }
  } catch (const FabricError&) {
  }
  return 0;
}
