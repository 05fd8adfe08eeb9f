// astral/common/checked.hpp and json_number.hpp: range first, then cast; every edge of the range.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "astral/common/checked.hpp"
#include "astral/common/json_number.hpp"

using astral::checked_add;
using astral::checked_cast;
using astral::checked_mul;
using astral::checked_round;
using astral::checked_sub;
using astral::checked_whole;
using astral::json_integer;

TEST_CASE("checked_cast between integers keeps values that fit and refuses the rest") {
  CHECK(checked_cast<int8_t>(127) == int8_t(127));
  CHECK(checked_cast<int8_t>(-128) == int8_t(-128));
  CHECK_FALSE(checked_cast<int8_t>(128));
  CHECK_FALSE(checked_cast<int8_t>(-129));
  CHECK_FALSE(checked_cast<uint32_t>(-1));
  CHECK(checked_cast<int64_t>(uint64_t(INT64_MAX)) == INT64_MAX);
  CHECK_FALSE(checked_cast<int64_t>(uint64_t(INT64_MAX) + 1));
  CHECK(checked_cast<uint64_t>(INT64_MAX) == uint64_t(INT64_MAX));
}

TEST_CASE("checked_cast from doubles checks the range before the cast") {
  constexpr double two63 = 9223372036854775808.0;  // 2^63: one past INT64_MAX
  CHECK(checked_cast<int64_t>(-two63) == INT64_MIN);
  CHECK_FALSE(checked_cast<int64_t>(two63));
  CHECK(checked_cast<int64_t>(std::nextafter(two63, 0.0)) == int64_t(9223372036854774784));
  CHECK_FALSE(checked_cast<int64_t>(1e30));  // the Seer finding: {"layers": 1111...1008}
  CHECK_FALSE(checked_cast<int64_t>(-1e30));
  CHECK_FALSE(checked_cast<int>(std::numeric_limits<double>::quiet_NaN()));
  CHECK_FALSE(checked_cast<int>(std::numeric_limits<double>::infinity()));
  CHECK(checked_cast<int>(2147483647.9) == 2147483647);  // truncates toward zero, like static_cast
  CHECK_FALSE(checked_cast<int>(2147483648.0));
  CHECK(checked_cast<int>(-2.9) == -2);
  CHECK(checked_cast<uint8_t>(255.5) == uint8_t(255));
  CHECK_FALSE(checked_cast<uint8_t>(256.0));
  CHECK_FALSE(checked_cast<uint32_t>(-0.5));  // refused on the safe side
  CHECK(checked_cast<uint64_t>(18446744073709549568.0) == uint64_t(18446744073709549568u));
  CHECK_FALSE(checked_cast<uint64_t>(18446744073709551616.0));  // 2^64
  CHECK(checked_cast<int>(1.5f) == 1);
}

TEST_CASE("checked_whole wants whole numbers") {
  CHECK(checked_whole<int>(8.0) == 8);
  CHECK_FALSE(checked_whole<int>(8.5));
  CHECK_FALSE(checked_whole<int>(1e10));
}

TEST_CASE("checked arithmetic reports overflow instead of wrapping") {
  CHECK(checked_mul<int64_t>(9'223'372'036'854, 1'000'000) == int64_t(9'223'372'036'854'000'000));
  CHECK_FALSE(checked_mul<int64_t>(68269777084456, 1'000'000));  // the dmesg finding
  CHECK_FALSE(checked_add<int64_t>(INT64_MAX, 1));
  CHECK(checked_add<int64_t>(INT64_MAX, -1) == INT64_MAX - 1);
  CHECK_FALSE(checked_sub<int64_t>(INT64_MIN, 1));
  CHECK_FALSE(checked_sub<int64_t>(int64_t(1) << 62, -(int64_t(1) << 62)) );
  CHECK(checked_sub<uint32_t>(5u, 3u) == 2u);
  CHECK_FALSE(checked_sub<uint32_t>(3u, 5u));
}

TEST_CASE("json_integer reads integers in range, written as integers or whole floats") {
  using nlohmann::json;
  CHECK(json_integer<int>(json(42)) == 42);
  CHECK(json_integer<int>(json(42.0)) == 42);
  CHECK_FALSE(json_integer<int>(json(42.5)));
  CHECK_FALSE(json_integer<int>(json(1e30)));
  CHECK_FALSE(json_integer<int>(json(int64_t(1) << 40)));
  CHECK_FALSE(json_integer<int64_t>(json(UINT64_MAX)));
  CHECK(json_integer<uint64_t>(json(UINT64_MAX)) == UINT64_MAX);
  CHECK_FALSE(json_integer<uint32_t>(json(-1)));
  CHECK_FALSE(json_integer<int>(json("42")));
  CHECK_FALSE(json_integer<int>(json(nullptr)));
  CHECK_FALSE(json_integer<int>(json(true)));
}

TEST_CASE("checked_round rounds halves away from zero and refuses what does not fit") {
  CHECK(checked_round<int64_t>(2.5) == 3);
  CHECK(checked_round<int64_t>(-2.5) == -3);
  CHECK(checked_round<int64_t>(2.4) == 2);
  CHECK(checked_round<int64_t>(-9.0e18) == int64_t(-9'000'000'000'000'000'000));
  CHECK_FALSE(checked_round<int64_t>(1.8e19));
  CHECK_FALSE(checked_round<int64_t>(-1.8e19));
  CHECK_FALSE(checked_round<int64_t>(std::ldexp(1.0, 63)));
  CHECK_FALSE(checked_round<int64_t>(std::numeric_limits<double>::infinity()));
  CHECK_FALSE(checked_round<int64_t>(std::nan("")));
  CHECK(checked_round<int32_t>(2147483647.4) == INT32_MAX);
  CHECK_FALSE(checked_round<int32_t>(2147483647.5));
}
