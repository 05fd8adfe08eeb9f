#pragma once
// Between the transport and the path planner (path_plan.hpp): the request both directions of a
// connection are planned from, once the connecting side knows both ends, and the conversion of
// each direction's PathPlan into what QPs are programmed with and what the peer is sent.
#include <memory>
#include <string>

#include "ib/connection.hpp"
#include "ib/path_plan.hpp"

namespace astral::plugin::ib {

// What the connecting side knows when it plans.
struct PlanInputs {
  PathPolicy policy = kDefaultPathPolicy;
  std::shared_ptr<const FabricModel> fabric;  // null without ASTRAL_FABRIC
  std::string host;                           // this host's name
  int qps = 1;
  bool split = false;
  int sl = 0;
  int tc = 0;
  uint64_t connection_id = 0;
};

// Plans both directions. False with `why` when the planner refuses (one line: cross-rail in a
// rail-only fabric, bad input); *mine is this end's, *theirs what the peer is sent.
// A fused device's QPs are planned per member pair (QP q: local member q % members, the peer's
// q % peer.members).
bool plan_connection(const PlanInputs& in, const IbDevice& local, const QpMeta& peer,
                     ConnectionPlan* mine, PlanMessage* theirs, std::string* why);

// The accepting side's plan, as the connecting side sent it (`peer`: the connecting side's QP
// metadata, whose members' base LIDs the IB DLIDs count from).
ConnectionPlan plan_from_message(const PlanMessage& message, bool split, const IbDevice& local,
                                 const QpMeta& peer);

// This host's name for the fabric model: ASTRAL_HOSTNAME, else gethostname().
std::string local_host_name();

}  // namespace astral::plugin::ib
