// libFuzzer target: any bytes through content detection and the text-log parser (host and
// switch context). Parsers must never crash, hang or throw on bad input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "astral/monitor/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace astral::monitor;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseOptions o;
  o.default_host = "fuzz";
  o.time.reference_us = 1767225600LL * 1000000;
  (void)parse_buffer(text, FileKind::text_log, o);
  o.switch_context = true;
  o.defer_zone = true;
  (void)parse_buffer(text, FileKind::text_log, o);
  (void)detect_file_kind(text, "fuzz.log");
  return 0;
}
