// libFuzzer target: fabric loaders (cabling CSV, ibnetdiscover, fabric JSON). Bad input may be
// rejected with std::runtime_error, never crash.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "astral/monitor/fabric_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::monitor;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try { (void)parse_cabling_csv(text, "fuzz.csv"); } catch (const std::runtime_error&) {}
  try { (void)parse_ibnetdiscover(text, "fuzz.ibnet"); } catch (const std::runtime_error&) {}
  try {
    FabricGraph g = parse_fabric_json(text, "fuzz.json");
    for (const Cable& c : g.cables()) (void)g.cable_at(c.sw.switch_name, c.sw.port);
  } catch (const std::runtime_error&) {}
  return 0;
}
