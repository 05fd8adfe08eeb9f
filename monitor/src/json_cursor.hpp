#pragma once
// A forward-only JSON reader over a buffer, without a DOM: the structured dumps of a large job
// (a Flight Recorder file per rank, Inspector records per collective) are read field by field at
// hundreds of MB/s, values not needed are skipped. Any syntax error stops it (ok() turns false);
// callers then fall back to the full parser.
#include <cstdint>
#include <string>
#include <string_view>

namespace astral::monitor {

class JsonCursor {
 public:
  explicit JsonCursor(std::string_view text) : s_(text) {}

  bool ok() const { return ok_; }
  bool at_end();  // only whitespace left
  size_t offset() const { return i_; }

  // Objects: `if (c.enter_object()) while (c.next_member(key)) { ...read or skip the value... }`
  bool enter_object();
  bool next_member(std::string_view& key);
  // Arrays: `if (c.enter_array()) while (c.next_element()) { ...read or skip... }`
  bool enter_array();
  bool next_element();

  bool read_string(std::string& out);  // unescapes
  bool read_int(int64_t& out);         // integers; a null or other value leaves out unchanged
  bool read_number(double& out);
  bool read_bool(bool& out);
  bool skip();                         // any value
  // The raw text of the next value (skipped), e.g. to keep "input_sizes" as written.
  std::string_view raw_value();
  char peek();

 private:
  void ws() {  // compact JSON (what dumps are) has none: one compare on the usual path
    while (i_ < s_.size() && static_cast<unsigned char>(s_[i_]) <= ' ' &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  // Before the next member/element: false (and leaves the level) at `close`; fails on a
  // missing ',' between items.
  bool separator(char close);
  // Index of the quote that closes a string whose text starts at `start`; npos if unclosed.
  size_t string_end(size_t start) const;
  bool fail() { return ok_ = false; }
  bool expect(char c);
  std::string_view s_;
  size_t i_ = 0;
  bool ok_ = true;
  // Per nesting level: whether the first member/element was read.
  uint64_t first_bits_ = 0;
  int depth_ = 0;
};

}  // namespace astral::monitor
