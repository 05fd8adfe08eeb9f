// simdjson (Debian's libsimdjson-dev) instead of a parser of our own: it is a well-kept library,
// validates UTF-8 and numbers as strictly as nlohmann, and is an order of magnitude faster.
#include "json_parse.hpp"

#include <simdjson.h>

#include <cstdint>
#include <string>

namespace astral::facility::detail {

namespace {

using nlohmann::json;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Bounds the recursion below: a fiber's stack is 256 KiB, and Redfish nests a dozen levels.
constexpr int kMaxJsonDepth = 96;

// Builds `out` from `e`; false when the document is deeper than kMaxJsonDepth.
bool to_nlohmann(element e, json& out, int depth) {
  if (depth > kMaxJsonDepth) return false;
  switch (e.type()) {
    case element_type::OBJECT: {
      out = json::object();
      auto& members = out.get_ref<json::object_t&>();
      for (auto field : simdjson::dom::object(e)) {
        json& slot = members[std::string(field.key)];  // a repeated key overwrites, as nlohmann does
        if (!to_nlohmann(field.value, slot, depth + 1)) return false;
      }
      return true;
    }
    case element_type::ARRAY: {
      out = json::array();
      auto& items = out.get_ref<json::array_t&>();
      for (element item : simdjson::dom::array(e)) {
        items.emplace_back();
        if (!to_nlohmann(item, items.back(), depth + 1)) return false;
      }
      return true;
    }
    case element_type::STRING:
      out = std::string(std::string_view(e));
      return true;
    case element_type::INT64: {
      std::int64_t v = std::int64_t(e);
      if (v >= 0) out = static_cast<std::uint64_t>(v);  // nlohmann keeps non-negative integers unsigned
      else out = v;
      return true;
    }
    case element_type::UINT64:
      out = std::uint64_t(e);
      return true;
    case element_type::DOUBLE:
      out = double(e);
      return true;
    case element_type::BOOL:
      out = bool(e);
      return true;
    case element_type::NULL_VALUE:
      out = nullptr;
      return true;
  }
  return false;
}

}  // namespace

std::optional<json> parse_json_fast(std::string_view text) {
  // One parser per thread, reused: its buffers grow to the largest payload and stay. A fiber does
  // not yield between parse and build, so the fibers of one loop can share it.
  thread_local simdjson::dom::parser parser;
  element root;
  if (parser.parse(text.data(), text.size(), true).get(root) != simdjson::SUCCESS) return std::nullopt;
  json out;
  if (!to_nlohmann(root, out, 0)) return std::nullopt;
  return out;
}

}  // namespace astral::facility::detail
