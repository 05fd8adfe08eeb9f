// Fuzz target: what a Redfish service (or anyone who can reach our push listener) sends us about
// events. The bytes are an event stream (text/event-stream) whose messages are Redfish Event
// payloads; the same bytes are also offered as one payload (what a push POST carries), as an
// RFC 3339 time, and as an Authorization header. Nothing may crash, hang or throw, and the
// stream parser must not depend on how the bytes were split into reads.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "astral/facility/eventservice.hpp"
#include "astral/facility/http_server.hpp"

using namespace astral::facility;

namespace {

bool same_messages(const std::vector<SseMessage>& a, const std::vector<SseMessage>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].event != b[i].event || a[i].data != b[i].data) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // The whole stream in one read, with a small limit so the size checks are reached too.
  SseParser whole(512);
  const std::vector<SseMessage> messages = whole.feed(input);
  // The same bytes in reads of 1..8 bytes (the sizes drawn from the input itself).
  SseParser pieces(512);
  std::vector<SseMessage> again;
  for (std::size_t at = 0; at < input.size() && !pieces.bad();) {
    const std::size_t step = 1 + uint8_t(input[at]) % 8;
    for (auto& m : pieces.feed(input.substr(at, step))) again.push_back(std::move(m));
    at += step;
  }
  if (!same_messages(messages, again) || whole.bad() != pieces.bad()) __builtin_trap();
  if (whole.bad() && whole.error().empty()) __builtin_trap();  // a bad stream says why
  for (const SseMessage& m : messages) {
    const ParsedEvent e = parse_redfish_event(m.data, "fuzz-bmc", m.id);
    if (e.alarms.size() != e.ids.size()) __builtin_trap();  // every alarm has its dedupe key
  }
  const ParsedEvent pushed = parse_redfish_event(input, "fuzz-bmc");
  if (pushed.alarms.size() != pushed.ids.size()) __builtin_trap();
  (void)parse_rfc3339(input);
  HttpRequest request;
  request.headers["authorization"] = std::string(input);
  (void)basic_auth_matches(request, Credentials{"admin", "secret"});
  (void)bearer_token_matches(request, "token");
  return 0;
}
