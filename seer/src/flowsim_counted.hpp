#pragma once
// ECMP collisions counted from the hash model instead of hashed QP by QP. The per-connection
// simulator hashes each QP at each stage with a 64-bit mixer seeded per switch, i.e. every QP
// picks each stage's group member uniformly and independently. So the QPs that a class of
// connections sends from one leaf switch toward one destination leaf split over each group as a
// multinomial draw, and the QPs of many classes arriving at one switch for one destination split
// as one draw of their sum. EcmpCounter adds QP counts per (entry switch, destination leaf), then
// walks each destination's ECMP DAG once, farthest switches first, drawing the split at each
// switch: the cost is the fabric's switch links per destination leaf, not the QPs.
// It is one realisation of the same hash model as the reference (not the reference's own hashes),
// so loads agree with it statistically: the larger the fabric the closer (bench_flowsim; the
// agreement test in tests/seer/flowsim_counted_test.cpp). Pinned paths and polarisation (hashes
// correlated across stages) are not counted: those stay hashed per QP (counting_applies).
#include <cstdint>
#include <string>
#include <vector>

#include "flowsim_build.hpp"

namespace astral::seer::detail {

// Whether ECMP collisions may be counted for this routing; `why` says why not.
bool counting_applies(const FlowSimOptions& options, std::string* why = nullptr);

class EcmpCounter {
 public:
  EcmpCounter(const topo::Router& router, ResourceLoads& loads, std::uint64_t salt);
  // `qps` QPs of `subflow_bytes` each entering the fabric at leaf switch `sw` toward leaf index
  // `leaf`.
  void add(int sw, int leaf, std::uint64_t qps, double subflow_bytes);
  // Splits everything added so far down the ECMP groups and loads it.
  void flush();

 private:
  struct Pending {
    int leaf = -1;
    std::vector<std::uint64_t> at;  // QPs waiting at each switch
    std::vector<int> touched;
  };
  Pending& slot_for(int leaf);
  void propagate(Pending& p);
  void load(int resource, std::uint64_t count);

  const topo::Router& router_;
  ResourceLoads& loads_;
  std::uint64_t salt_, round_ = 0;
  double subflow_bytes_ = 0;
  std::vector<Pending> slots_;
  std::vector<std::vector<int>> levels_;  // switches by hops to the destination leaf
};

}  // namespace astral::seer::detail
