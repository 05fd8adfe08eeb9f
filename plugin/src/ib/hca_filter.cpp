#include "ib/hca_filter.hpp"

#include <cstdlib>
#include <sstream>

namespace astral::plugin::ib {

HcaFilter HcaFilter::parse(const std::string& text) {
  HcaFilter f;
  std::string list = text;
  if (!list.empty() && list[0] == '^') f.exclude_ = true, list.erase(0, 1);
  if (!list.empty() && list[0] == '=') f.exact_ = true, list.erase(0, 1);
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    Entry e;
    // NCCL 2.30 also accepts dev:port:rail:plane; the fields after the port are not selection.
    auto colon = item.find(':');
    e.device = item.substr(0, colon);
    if (colon != std::string::npos) {
      char* end = nullptr;
      long port = std::strtol(item.c_str() + colon + 1, &end, 10);
      if (end != item.c_str() + colon + 1 && port > 0) e.port = static_cast<int>(port);
    }
    if (!e.device.empty()) f.entries_.push_back(e);
  }
  return f;
}

bool HcaFilter::accepts(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) {
    bool name = exact_ ? device == e.device : device.compare(0, e.device.size(), e.device) == 0;
    if (name && (e.port < 0 || e.port == port)) listed = true;
  }
  return listed != exclude_;
}

}  // namespace astral::plugin::ib
