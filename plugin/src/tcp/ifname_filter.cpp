#include "tcp/ifname_filter.hpp"

namespace astral::plugin {

IfnameFilter IfnameFilter::parse(std::string_view spec) {
  IfnameFilter filter;
  if (!spec.empty() && spec.front() == '^') {
    filter.exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    filter.exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    // NCCL allows "name:port" (used for HCAs); an interface has no port, so drop it.
    item = item.substr(0, item.find(':'));
    if (!item.empty()) filter.names_.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return filter;
}

bool IfnameFilter::listed(std::string_view ifname) const {
  for (const auto& name : names_) {
    if (exact_ ? ifname == name : ifname.substr(0, name.size()) == name) return true;
  }
  return false;
}

bool IfnameFilter::accepts(std::string_view ifname) const {
  return exclude_ ? !listed(ifname) : listed(ifname);
}

}  // namespace astral::plugin
