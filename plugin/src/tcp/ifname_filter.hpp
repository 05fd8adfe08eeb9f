#pragma once
// Interface selection with NCCL_SOCKET_IFNAME's syntax: "[^][=]name[,name...]". A leading '^'
// excludes the listed names, '=' requires an exact match (default: prefix match, so "eth" matches
// eth0 and eth10).
#include <string>
#include <string_view>
#include <vector>

namespace astral::plugin {

class IfnameFilter {
 public:
  static IfnameFilter parse(std::string_view spec);

  bool empty() const { return names_.empty() && !exclude_; }
  bool excludes() const { return exclude_; }
  // True when `ifname` passes the filter.
  bool accepts(std::string_view ifname) const;
  // True when the filter names `ifname` explicitly (an include list that matches it).
  bool names(std::string_view ifname) const { return !exclude_ && listed(ifname); }

 private:
  bool listed(std::string_view ifname) const;

  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

}  // namespace astral::plugin
