#pragma once
// Minimal JSON text helpers for the streaming exporters (no DOM: traces can hold millions of
// events).
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace astral::trace::json {

inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += fmt::format("\\u{:04x}", c);  // non-ASCII bytes from damaged names stay valid JSON
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

inline std::string hex(uint64_t v) { return fmt::format("\"0x{:016x}\"", v); }

// Builds the body of a JSON object: add("k", v)... then str() gives {"k":v,...}.
class Object {
 public:
  Object& raw(std::string_view key, std::string_view json_value) {
    if (!body_.empty()) body_ += ',';
    body_ += quote(key);
    body_ += ':';
    body_ += json_value;
    return *this;
  }
  Object& str(std::string_view key, std::string_view value) { return raw(key, quote(value)); }
  Object& num(std::string_view key, int64_t v) { return raw(key, std::to_string(v)); }
  Object& unum(std::string_view key, uint64_t v) { return raw(key, std::to_string(v)); }
  Object& hex(std::string_view key, uint64_t v) { return raw(key, json::hex(v)); }
  Object& boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  std::string str() const { return "{" + body_ + "}"; }
  bool empty() const { return body_.empty(); }

 private:
  std::string body_;
};

inline std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(b) / double(1ull << 10));
  return fmt::format("{} B", b);
}

}  // namespace astral::trace::json
