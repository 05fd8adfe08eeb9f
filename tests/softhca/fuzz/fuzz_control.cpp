// softhca's untrusted text inputs: the fabric file and fault commands (control socket datagrams,
// SOFTHCA_FAULTS). Both parsers must reject anything malformed with an error line, never crash.
#include <cstdint>
#include <string>
#include <string_view>

#include "../lib/internal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  if (auto f = softhca::parse_fabric(text, error)) {
    for (const auto& h : f->hosts)
      for (const auto& d : h.devices)
        for (const auto& p : d.ports)
          for (const auto& g : p.gids) (void)softhca::find_by_gid(*f, g.gid);
    if (!f->hosts.empty() && !f->hosts[0].devices.empty())
      (void)softhca::reachable(*f, {0, 0, 0}, {0, 0, 0});
    (void)softhca::find_by_lid(*f, 1);
  } else if (error.empty()) {
    __builtin_trap();  // a rejection must say why
  }
  error.clear();
  if (!softhca::parse_commands(text, error) && error.empty()) __builtin_trap();
  return 0;
}
