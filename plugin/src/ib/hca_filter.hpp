#pragma once
// ASTRAL_IB_HCA, with NCCL_IB_HCA's syntax: a comma-separated list of `device[:port]`; a leading
// `^` excludes the listed ports instead of selecting them; a leading `=` (after `^` if both)
// matches device names exactly instead of by prefix. Empty: every port. NCCL 2.30.7's
// `device:port:rail:plane` entries also place the port: rail and plane given there replace the
// node model's (as NCCL's railId / planeId come from NCCL_IB_HCA).
#include <string>
#include <vector>

namespace astral::plugin::ib {

class HcaFilter {
 public:
  static HcaFilter parse(const std::string& text);
  bool accepts(const std::string& device, int port) const;
  bool empty() const { return entries_.empty(); }
  // The rail and plane the list gives this port (an include list's first matching entry that
  // names them); each left unchanged where the list says nothing.
  void place(const std::string& device, int port, int* rail, int* plane) const;

 private:
  struct Entry {
    std::string device;
    int port = -1;  // -1: every port
    int rail = -1;  // -1: not given
    int plane = -1;
  };
  bool matches(const Entry& e, const std::string& device, int port) const;
  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace astral::plugin::ib
