// Layout search: enumerate, check, prune by memory, predict with the extrapolated schedule, keep
// the best k and predict those again exactly.
#include "astral/seer/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace astral::seer {
namespace {

std::vector<int> divisors(int n, int max) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(n, max); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::vector<int> powers_of_two(int max) {
  std::vector<int> out;
  for (int v = 1; v <= max; v *= 2) out.push_back(v);
  return out;
}

// Stage splits of `layers` over `pp` stages (first, last; 0 = even): the even split where pp x vp
// divides the layers, and first = last = one less than the middle stages where that is whole.
std::vector<std::pair<int, int>> stage_splits(int layers, int pp, int vp, bool lighter_ends) {
  std::vector<std::pair<int, int>> out;
  if (layers % (pp * vp) == 0) out.emplace_back(0, 0);
  if (lighter_ends && vp == 1 && pp > 2 && (layers + 2) % pp == 0 && (layers + 2) / pp >= 2)
    out.emplace_back((layers + 2) / pp - 1, (layers + 2) / pp - 1);
  return out;
}

}  // namespace

int default_global_batch(const ModelSpec& model) {
  // About 4M tokens per step, rounded to a multiple of 64 sequences.
  int b = int(std::lround(4194304.0 / model.seq_len / 64.0)) * 64;
  return std::max(b, 64);
}

std::vector<TrainConfig> enumerate_layouts(const ModelSpec& model, const Network& net, int gpus,
                                           const SearchOptions& o, const HardwareSpec* hw) {
  const int gb = o.global_batch > 0 ? o.global_batch : default_global_batch(model);
  // Tensor parallelism beyond one NVLink domain is never competitive; pipelines up to one layer
  // per stage; micro-batches and virtual stages in the ranges Megatron users pick.
  auto tps = o.tp.empty() ? powers_of_two(std::max(net.gpus_per_host, 1)) : o.tp;
  auto pps = o.pp.empty() ? divisors(model.layers, model.layers) : o.pp;
  if (o.pp.empty() && o.lighter_end_stages)  // pipelines whose lighter ends make the split whole
    for (int pp = 3; pp <= model.layers; ++pp)
      if ((model.layers + 2) % pp == 0 && model.layers % pp != 0) pps.push_back(pp);
  std::vector<DType> dtypes = o.dtypes.empty() ? std::vector<DType>{o.base.dtype} : o.dtypes;
  if (hw) dtypes.erase(std::remove_if(dtypes.begin(), dtypes.end(),
                                      [&](DType d) { return d == DType::kFp8 && hw->peak(DType::kFp8) <= 0; }),
                       dtypes.end());
  auto mbs = o.micro_batch.empty() ? std::vector<int>{1, 2, 4, 8} : o.micro_batch;
  auto vps = o.vp.empty() ? std::vector<int>{1, 2, 3, 4, 6, 8} : o.vp;
  std::vector<int> eps = o.ep;
  if (eps.empty()) eps = model.is_moe() ? divisors(model.experts, model.experts) : std::vector<int>{1};
  // Context parallelism only pays for long sequences; each size must split them in 2 x cp chunks.
  std::vector<int> cps = o.cp;
  if (cps.empty()) cps = model.seq_len >= 16384 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1};
  std::vector<std::pair<int, int>> tp_cp;
  for (int tp : tps)
    for (int cp : cps)
      if (cp == 1 || (model.seq_len % (2 * cp) == 0 && o.base.flash_attention)) tp_cp.emplace_back(tp, cp);
  std::vector<TrainConfig> out;
  for (auto [tp, cp] : tp_cp) {
    if (gpus % (tp * cp) != 0) continue;
    for (int pp : pps) {
      if (gpus % (tp * cp * pp) != 0) continue;
      const int dp = gpus / (tp * cp * pp);
      for (int mb : mbs) {
        if (gb % (mb * dp) != 0) continue;
        for (int vp : vps) {
          if (vp > 1 && pp == 1) continue;
          const auto splits = stage_splits(model.layers, pp, vp, o.lighter_end_stages);
          for (int ep : eps) {
            if ((tp * cp * dp) % ep != 0) continue;
            for (Recompute rc : o.recompute)
              for (bool sp : o.sequence_parallel) {
                // Fused attention keeps no score matrix, so selective recomputation has nothing to
                // drop: it is the same layout as no recomputation.
                if (rc == Recompute::kSelective && o.base.flash_attention &&
                    std::find(o.recompute.begin(), o.recompute.end(), Recompute::kNone) != o.recompute.end())
                  continue;
                if (sp && tp == 1) continue;
                for (bool dist : o.distributed_optimizer) {
                  if (dist && dp == 1) continue;
                  TrainConfig c = o.base;
                  c.global_batch = gb;
                  c.micro_batch = mb;
                  c.tp = tp, c.cp = cp, c.pp = pp, c.dp = dp, c.ep = ep, c.vp = vp;
                  c.recompute = rc;
                  c.sequence_parallel = sp;
                  c.distributed_optimizer = dist;
                  for (auto [first, last] : splits)
                    for (DType dtype : dtypes) {
                      c.first_stage_layers = first, c.last_stage_layers = last;
                      c.dtype = dtype;
                      out.push_back(c);
                    }
                }
              }
          }
        }
      }
    }
  }
  return out;
}

SearchResult search(const ModelSpec& model, const HardwareSpec& hw, const Network& net, int gpus,
                    const SearchOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult result;
  std::vector<TrainConfig> layouts = enumerate_layouts(model, net, gpus, options, &hw);
  result.enumerated = layouts.size();
  result.global_batch = options.global_batch > 0 ? options.global_batch : default_global_batch(model);
  const size_t k = size_t(std::max(options.top_k, 1));
  // Best k so far, worst at the front of a max-heap on step time.
  std::vector<Candidate> best;
  auto worse = [](const Candidate& a, const Candidate& b) { return a.prediction.step_time < b.prediction.step_time; };
  double closest = 1e300;
  PredictOptions fast;
  fast.fast_schedule = true;
  const size_t report_every = std::max<size_t>(layouts.size() / 100, 256);
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (options.progress && i % report_every == 0) options.progress(i, layouts.size());
    TrainConfig& c = layouts[i];
    if (!validation_error(model, c, gpus).empty()) {
      ++result.invalid;
      continue;
    }
    const Workload work(model, hw, net, c);
    const MemoryEstimate mem = peak_memory(work);
    if (!mem.fits()) {
      ++result.out_of_memory;
      double over = mem.total() - mem.capacity;
      if (over < closest) closest = over, result.closest_oom = mem;
      continue;
    }
    fast.skip_above = best.size() < k ? 0.0 : best.front().prediction.step_time;
    Prediction p = predict(work, gpus, fast);
    if (p.skipped) {
      ++result.bounded;
      continue;
    }
    ++result.evaluated;
    if (best.size() < k) {
      best.push_back({c, std::move(p)});
      std::push_heap(best.begin(), best.end(), worse);
    } else if (p.step_time < best.front().prediction.step_time) {
      std::pop_heap(best.begin(), best.end(), worse);
      best.back() = {c, std::move(p)};
      std::push_heap(best.begin(), best.end(), worse);
    }
  }
  if (options.progress) options.progress(layouts.size(), layouts.size());
  // The finalists again, with the exact event simulation.
  for (auto& cand : best) cand.prediction = predict(model, hw, net, cand.config, gpus);
  std::sort(best.begin(), best.end(), worse);
  result.top = std::move(best);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace astral::seer
