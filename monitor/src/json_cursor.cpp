#include "json_cursor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "astral/common/checked.hpp"

namespace astral::monitor {

bool JsonCursor::separator(char close) {
  ws();
  if (i_ >= s_.size()) return fail();
  if (s_[i_] == close) {
    ++i_;
    --depth_;
    return false;
  }
  const uint64_t bit = uint64_t(1) << depth_;
  if (!(first_bits_ & bit)) {
    if (s_[i_] != ',') return fail();
    ++i_;
    ws();
  }
  first_bits_ &= ~bit;
  return true;
}

size_t JsonCursor::string_end(size_t start) const {
  // A quote closes the string unless an odd number of backslashes stands before it.
  auto closes = [&](size_t at) {
    size_t backslashes = 0;
    while (at - backslashes > start && s_[at - backslashes - 1] == '\\') ++backslashes;
    return backslashes % 2 == 0;
  };
  // Keys and most values are short: their first bytes are looked at directly, since a call to
  // memchr costs more than the few compares that find their end.
  const size_t quick = std::min(s_.size(), start + 32);
  size_t from = start;
  for (; from < quick; ++from)
    if (s_[from] == '"' && closes(from)) return from;
  // Then memchr to each quote.
  while (from < s_.size()) {
    const void* hit = memchr(s_.data() + from, '"', s_.size() - from);
    if (!hit) break;
    const size_t at = size_t(static_cast<const char*>(hit) - s_.data());
    if (closes(at)) return at;
    from = at + 1;
  }
  return std::string_view::npos;
}

char JsonCursor::peek() {
  ws();
  return i_ < s_.size() ? s_[i_] : '\0';
}

bool JsonCursor::at_end() {
  ws();
  return i_ >= s_.size();
}

bool JsonCursor::expect(char c) {
  ws();
  if (i_ >= s_.size() || s_[i_] != c) return fail();
  ++i_;
  return true;
}

bool JsonCursor::enter_object() {
  if (!ok_ || !expect('{') || depth_ >= 63) return fail();
  ++depth_;
  first_bits_ |= uint64_t(1) << depth_;
  return true;
}

bool JsonCursor::enter_array() {
  if (!ok_ || !expect('[') || depth_ >= 63) return fail();
  ++depth_;
  first_bits_ |= uint64_t(1) << depth_;
  return true;
}

bool JsonCursor::next_member(std::string_view& key) {
  if (!ok_ || !separator('}')) return false;
  if (i_ >= s_.size() || s_[i_] != '"') return fail();
  const size_t start = ++i_;
  const size_t end = string_end(start);
  if (end == std::string_view::npos) return fail();
  key = s_.substr(start, end - start);
  i_ = end + 1;
  if (i_ < s_.size() && s_[i_] == ':') {  // the usual compact form
    ++i_;
    return true;
  }
  return expect(':');
}

bool JsonCursor::next_element() { return ok_ && separator(']'); }

bool JsonCursor::read_string(std::string& out) {
  ws();
  if (i_ >= s_.size() || s_[i_] != '"') return skip();
  ++i_;
  out.clear();
  while (i_ < s_.size() && s_[i_] != '"') {
    size_t run = i_;
    while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\') ++i_;
    out.append(s_.data() + run, i_ - run);
    if (i_ < s_.size() && s_[i_] == '\\') {
      if (i_ + 1 >= s_.size()) return fail();
      char e = s_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u':  // keep the escape as written: log identifiers are ASCII
          if (i_ + 4 > s_.size()) return fail();
          out += "\\u";
          out.append(s_.data() + i_, 4);
          i_ += 4;
          break;
        default: out += e;
      }
    }
  }
  if (i_ >= s_.size()) return fail();
  ++i_;
  return true;
}

bool JsonCursor::read_int(int64_t& out) {
  ws();
  if (i_ < s_.size() && (s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9'))) {
    bool neg = s_[i_] == '-';
    size_t j = i_ + neg;
    int64_t v = 0;
    size_t digits = 0;
    while (j < s_.size() && s_[j] >= '0' && s_[j] <= '9') {
      // Nanosecond wall times have 19 digits: keep every digit that fits, drop the rest (saturate).
      const int d = s_[j] - '0';
      if (v <= (INT64_MAX - d) / 10) v = v * 10 + d;
      else v = INT64_MAX;
      ++j, ++digits;
    }
    if (j < s_.size() && (s_[j] == '.' || s_[j] == 'e' || s_[j] == 'E')) {
      double d = 0;
      if (!read_number(d)) return false;
      // 1e300 saturates as too many digits do; a bare cast of it would be undefined behaviour.
      const auto whole = checked_cast<int64_t>(d);
      out = whole ? *whole : d < 0 ? INT64_MIN : INT64_MAX;
      return true;
    }
    if (!digits) return fail();
    out = neg ? -v : v;
    i_ = j;
    return true;
  }
  return skip();
}

bool JsonCursor::read_number(double& out) {
  ws();
  if (i_ < s_.size() && (s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9'))) {
    char buf[64];
    size_t j = i_, n = 0;
    while (j < s_.size() && n + 1 < sizeof buf &&
           (s_[j] == '-' || s_[j] == '+' || s_[j] == '.' || s_[j] == 'e' || s_[j] == 'E' || (s_[j] >= '0' && s_[j] <= '9')))
      buf[n++] = s_[j++];
    buf[n] = '\0';
    char* end = nullptr;
    out = std::strtod(buf, &end);
    if (end == buf) return fail();
    i_ = j;
    return true;
  }
  return skip();
}

bool JsonCursor::read_bool(bool& out) {
  ws();
  if (s_.compare(i_, 4, "true") == 0) {
    out = true;
    i_ += 4;
    return true;
  }
  if (s_.compare(i_, 5, "false") == 0) {
    out = false;
    i_ += 5;
    return true;
  }
  return skip();
}

bool JsonCursor::skip() {
  if (!ok_) return false;
  ws();
  if (i_ >= s_.size()) return fail();
  char c = s_[i_];
  if (c == '"') {
    const size_t end = string_end(i_ + 1);
    if (end == std::string_view::npos) return fail();
    i_ = end + 1;
    return true;
  }
  if (c == '{' || c == '[') {
    // Balanced skip; strings may hold brackets.
    int depth = 0;
    while (i_ < s_.size()) {
      char d = s_[i_];
      if (d == '"') {
        const size_t end = string_end(i_ + 1);
        if (end == std::string_view::npos) return fail();
        i_ = end;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) {
          ++i_;
          return true;
        }
      }
      ++i_;
    }
    return fail();
  }
  // number, true, false, null
  size_t start = i_;
  while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']' && s_[i_] != ' ' && s_[i_] != '\n' &&
         s_[i_] != '\t' && s_[i_] != '\r')
    ++i_;
  return i_ > start ? true : fail();
}

std::string_view JsonCursor::raw_value() {
  ws();
  size_t start = i_;
  if (!skip()) return {};
  return s_.substr(start, i_ - start);
}

}  // namespace astral::monitor
