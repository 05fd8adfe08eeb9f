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
    // device[:port[:rail[:plane]]] (NCCL 2.30.7); a field that is not a number is ignored.
    std::stringstream fields(item);
    std::string field;
    std::getline(fields, e.device, ':');
    int* numbers[] = {&e.port, &e.rail, &e.plane};
    for (int* number : numbers) {
      if (!std::getline(fields, field, ':')) break;
      char* end = nullptr;
      long value = std::strtol(field.c_str(), &end, 10);
      bool ok = !field.empty() && *end == '\0' && value >= (number == &e.port ? 1 : 0) && value < 32768;
      if (ok) *number = static_cast<int>(value);
    }
    if (!e.device.empty()) f.entries_.push_back(e);
  }
  return f;
}

bool HcaFilter::matches(const Entry& e, const std::string& device, int port) const {
  bool name = exact_ ? device == e.device : device.compare(0, e.device.size(), e.device) == 0;
  return name && (e.port < 0 || e.port == port);
}

bool HcaFilter::accepts(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) listed = listed || matches(e, device, port);
  return listed != exclude_;
}

void HcaFilter::place(const std::string& device, int port, int* rail, int* plane) const {
  if (exclude_) return;
  bool rail_set = false, plane_set = false;
  for (const Entry& e : entries_) {
    if (!matches(e, device, port)) continue;
    if (e.rail >= 0 && !rail_set) *rail = e.rail, rail_set = true;
    if (e.plane >= 0 && !plane_set) *plane = e.plane, plane_set = true;
  }
}

}  // namespace astral::plugin::ib
