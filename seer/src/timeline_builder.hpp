#pragma once
// Expands simulated pipeline tasks into per-operator timeline events for one representative rank
// per stage (tensor-parallel rank 0, data-parallel rank 0).
#include <vector>

#include "astral/seer/predict.hpp"

namespace astral::seer::detail {

class TimelineBuilder {
 public:
  // layers_only: one compute event per transformer layer instead of one per operator.
  TimelineBuilder(const Workload& work, const PipelineSpec& spec, std::vector<TimelineEvent>& out,
                  bool layers_only = false);
  void task(const PipelineTask& t);
  // After a stage's last task: gradient reduction, optimizer step, parameter gather.
  void step_end(int stage, double end, double grad, double grad_exposed, double gather, double optimizer);

 private:
  void ops(const std::vector<Op>& ops, const PipelineTask& t, int layer, double& cursor);
  void emit(std::string name, const char* kind, const char* lane, const PipelineTask* t, int stage, int layer,
            const char* phase, double start, double duration);
  int rank_of(int stage) const;

  const Workload& work_;
  const PipelineSpec& spec_;
  std::vector<TimelineEvent>& out_;
  bool layers_only_ = false;
};

}  // namespace astral::seer::detail
