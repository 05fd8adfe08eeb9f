#pragma once
// ASTRAL_IB_HCA, with NCCL_IB_HCA's syntax: a comma-separated list of `device[:port]`; a leading
// `^` excludes the listed ports instead of selecting them; a leading `=` (after `^` if both)
// matches device names exactly instead of by prefix. Empty: every port.
#include <string>
#include <vector>

namespace astral::plugin::ib {

class HcaFilter {
 public:
  static HcaFilter parse(const std::string& text);
  bool accepts(const std::string& device, int port) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string device;
    int port = -1;  // -1: every port
  };
  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace astral::plugin::ib
