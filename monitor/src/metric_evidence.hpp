#pragma once
// The hook that joins metric changes to the candidates of the other layers (until the network
// candidate builder has a metrics evidence collector of its own): a `metric_change` or
// `slow_transfers` event about a candidate's component, or the other end of its cable, is
// evidence for it.
#include <vector>

#include "analysis.hpp"

namespace astral::monitor {

void attach_metric_evidence(std::vector<Candidate>& candidates, const Bundle& b, const Symptoms& s);

}  // namespace astral::monitor
