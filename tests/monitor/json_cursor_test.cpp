// The structured dumps' forward-only JSON reader (monitor/src/json_cursor.hpp) on strings whose
// closing quote lies inside or beyond the bytes it looks at directly before using memchr, with
// escaped quotes and backslashes at every position, and on integers written with exponents.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "json_cursor.hpp"

using astral::monitor::JsonCursor;

TEST_CASE("JSON cursor: keys and strings end at the first unescaped quote, wherever it lies") {
  for (size_t length = 0; length < 80; ++length) {
    for (size_t escape_at = 0; escape_at <= length; escape_at += 3) {
      // The key: `length` letters with \" (or \\ at odd positions) spliced in at escape_at.
      std::string key(length, 'k');
      const bool quote = escape_at % 2 == 0;
      key.insert(escape_at, quote ? "\\\"" : "\\\\");
      const std::string text = "{\"" + key + "\":\"v" + std::string(length, 'x') + "\",\"n\":7}";
      INFO(text);
      JsonCursor c(text);
      REQUIRE(c.enter_object());
      std::string_view k;
      REQUIRE(c.next_member(k));
      CHECK(k == key);  // raw, as written
      std::string value;
      REQUIRE(c.read_string(value));
      CHECK(value == "v" + std::string(length, 'x'));
      REQUIRE(c.next_member(k));
      CHECK(k == "n");
      int64_t n = 0;
      REQUIRE(c.read_int(n));
      CHECK(n == 7);
      CHECK_FALSE(c.next_member(k));
      CHECK(c.ok());
    }
  }
  JsonCursor unclosed("{\"abc\\\"");
  REQUIRE(unclosed.enter_object());
  std::string_view k;
  CHECK_FALSE(unclosed.next_member(k));
  CHECK_FALSE(unclosed.ok());
}

TEST_CASE("JSON cursor: integers with exponents saturate instead of overflowing") {
  for (auto [text, want] : {std::pair<const char*, int64_t>{"[1e300]", INT64_MAX},
                            {"[-1e300]", INT64_MIN},
                            {"[1e999]", INT64_MAX},
                            {"[2.5e3]", 2500},
                            {"[123456789012345678901234]", INT64_MAX}}) {
    INFO(text);
    JsonCursor c(text);
    REQUIRE(c.enter_array());
    REQUIRE(c.next_element());
    int64_t v = 0;
    REQUIRE(c.read_int(v));
    CHECK(v == want);
  }
}
