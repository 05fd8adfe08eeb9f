#pragma once
// The mockup's eventing state (see MockupService in mockup.hpp).
#include <memory>

#include "astral/facility/mockup.hpp"

namespace astral::facility {

std::shared_ptr<MockupEvents> make_mockup_events(const MockupOptions& options);

}  // namespace astral::facility
