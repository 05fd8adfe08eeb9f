// Seer's tuner model driven the way NCCL 2.28 drives getCollInfo: a contiguous
// float[algorithms][protocols] table initialised to -1, NCCL's own estimates in the enabled
// entries, guard values around it.
#include <catch2/catch.hpp>

#include <cstring>

#include "astral/seer/inputs.hpp"
#include "astral/seer/nccl_tuner.hpp"

using namespace astral::seer;

namespace {

constexpr float kGuard = 1234.5f;
constexpr int kAlgo = 7, kProto = 3;  // NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS in 2.28.9

// NCCL's stack frame around the table, as far as the plugin can see it.
struct Frame {
  float before[8];
  float table[kAlgo][kProto];
  float after[8];
};

Frame nccl_frame(bool nvls_enabled, bool nvls_tree_enabled = false) {
  Frame f;
  std::fill(std::begin(f.before), std::end(f.before), kGuard);
  std::fill(std::begin(f.after), std::end(f.after), kGuard);
  for (auto& row : f.table)
    for (auto& e : row) e = -1.0f;  // initCollCostTable
  for (int a : {0, 1})              // tree, ring enabled with NCCL's estimates
    for (int p = 0; p < kProto; ++p) f.table[a][p] = 100.0f + 10 * a + p;
  if (nvls_enabled) f.table[4][2] = 90.0f;
  if (nvls_tree_enabled) f.table[5][2] = 90.0f;
  return f;
}

bool guards_intact(const Frame& f) {
  for (int i = 0; i < 8; ++i)
    if (f.before[i] != kGuard || f.after[i] != kGuard) return false;
  return true;
}

}  // namespace

TEST_CASE("seer tuner fills NCCL's contiguous cost table and nothing else") {
  HardwareSpec hw = load_hardware("a100-80gb");
  NcclTunerModel tuner(uniform_network(hw, 64), 64, 8);
  Frame f = nccl_frame(false);
  // NCCL passes the 2-D array cast to float**; the plugin indexes it as one block.
  float** as_nccl_passes_it = reinterpret_cast<float**>(f.table);
  int written = tuner.fill(4 /* AllReduce */, 1 << 20, reinterpret_cast<float*>(as_nccl_passes_it), kAlgo, kProto);
  CHECK(written == 6);  // tree and ring x 3 protocols
  CHECK(guards_intact(f));
  for (int a = 2; a < kAlgo; ++a)
    for (int p = 0; p < kProto; ++p) CHECK(f.table[a][p] == -1.0f);  // never enable a disabled entry
  CostTable ours;
  tuner.model().cost_table(Collective::kAllReduce, 1 << 20, ours);
  for (int a : {0, 1})
    for (int p = 0; p < kProto; ++p) CHECK(f.table[a][p] == Approx(ours[a][p] * 1e6));
}

TEST_CASE("seer tuner keeps NCCL's entries where Seer has no opinion") {
  HardwareSpec hw = load_hardware("a100-80gb");  // no NVLS in Seer's model of this GPU
  NcclTunerModel tuner(uniform_network(hw, 8), 8, 1);
  Frame f = nccl_frame(true, true);
  f.table[2][2] = 70.0f;  // CollNet Direct enabled by NCCL: Seer does not model it
  tuner.fill(4, 1 << 24, &f.table[0][0], kAlgo, kProto);
  CHECK(f.table[2][2] == 70.0f);
  CHECK(f.table[4][2] == 90.0f);
  CHECK(f.table[5][2] == 90.0f);
  CHECK(f.table[1][2] != 111.0f);  // ring/Simple replaced
  CHECK(guards_intact(f));
}

TEST_CASE("seer tuner: NCCL's minimum picks LL for tiny messages and Simple or NVLS for large ones") {
  auto pick = [](const Frame& f) {
    int best_a = -1, best_p = -1;
    for (int a = 0; a < kAlgo; ++a)
      for (int p = 0; p < kProto; ++p)
        if (f.table[a][p] >= 0 && (best_a < 0 || f.table[a][p] < f.table[best_a][best_p])) best_a = a, best_p = p;
    return std::make_pair(best_a, best_p);
  };
  HardwareSpec hw = load_hardware("h100-sxm");
  NcclTunerModel tuner(uniform_network(hw, 8), 8, 1);
  Frame small = nccl_frame(true), large = nccl_frame(true);
  tuner.fill(4, 256, &small.table[0][0], kAlgo, kProto);
  tuner.fill(4, size_t(1) << 30, &large.table[0][0], kAlgo, kProto);
  CHECK(pick(small).second == 0);  // LL
  CHECK(pick(large) == std::make_pair(4, 2));  // NVLS / Simple on one H100 node
}

TEST_CASE("seer tuner respects a smaller table and unknown collectives") {
  HardwareSpec hw = load_hardware("a100-80gb");
  NcclTunerModel tuner(uniform_network(hw, 16), 16, 2);
  // An older layout with fewer algorithms: only the first 6 x 3 block is touched.
  float block[1 + 6 * 3 + 1];
  std::fill(std::begin(block), std::end(block), 5.0f);
  block[0] = block[19] = kGuard;
  CHECK(tuner.fill(2 /* AllGather */, 1 << 20, block + 1, 6, 3) > 0);
  CHECK(block[0] == kGuard);
  CHECK(block[19] == kGuard);
  Frame f = nccl_frame(false);
  Frame copy = f;
  CHECK(tuner.fill(7, 1 << 20, &f.table[0][0], kAlgo, kProto) == 0);  // not a tuner collective
  CHECK(tuner.fill(-1, 1 << 20, &f.table[0][0], kAlgo, kProto) == 0);
  CHECK(tuner.fill(4, 1 << 20, nullptr, kAlgo, kProto) == 0);
  CHECK(std::memcmp(&f, &copy, sizeof f) == 0);
}

TEST_CASE("seer tuner uses NCCL's latency constants when given") {
  HardwareSpec hw = load_hardware("a100-80gb");
  Network net = uniform_network(hw, 8);
  LatencyConstants slow = LatencyConstants::defaults();
  for (auto& row : slow.hw[0])
    for (auto& v : row) v *= 10;  // NVLink steps 10x slower
  NcclTunerModel plain(net, 8, 1), tuned(net, 8, 1, &slow);
  Frame a = nccl_frame(false), b = nccl_frame(false);
  plain.fill(4, 4096, &a.table[0][0], kAlgo, kProto);
  tuned.fill(4, 4096, &b.table[0][0], kAlgo, kProto);
  CHECK(b.table[1][0] > 5 * a.table[1][0]);  // small ring/LL all-reduce is latency bound
  CHECK(communicator_group(64, 8).per_host == 8);
  CHECK(communicator_group(12, 5).per_host == 1);
}
