#include "ib/planning.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace astral::plugin::ib {
namespace {

PathEndpoint local_endpoint(const IbPort& port, const std::string& host) {
  PathEndpoint e;
  e.host = host;
  e.rail = port.rail;
  e.plane = port.plane;
  e.port = port.port;
  e.link_layer = port.ethernet ? LinkLayer::kRoCE : LinkLayer::kInfiniBand;
  e.base_lid = port.lid;
  e.lmc = port.lmc;
  e.gid_index = port.gid_index;
  return e;
}

PathEndpoint peer_endpoint(const QpMeta& meta) {
  PathEndpoint e;
  e.host = meta.host;
  e.rail = meta.rail;
  e.plane = meta.plane;
  e.port = meta.port;
  e.link_layer = meta.ethernet ? LinkLayer::kRoCE : LinkLayer::kInfiniBand;
  e.base_lid = meta.lid;
  e.lmc = meta.lmc;
  e.gid_index = meta.gid_index;
  return e;
}

ConnectionPlan to_connection_plan(const PathPlan& plan, const PathRequest& request, bool split) {
  ConnectionPlan c;
  c.qps = static_cast<int>(plan.qps.size());
  c.split = split;
  c.sl = uint8_t(plan.sl);
  c.tc = uint8_t(plan.tc);
  for (const QpPath& q : plan.qps) {
    c.flow_label[size_t(q.qp)] = q.flow_label & kFlowLabelMask;
    c.path_bits[size_t(q.qp)] = uint8_t(q.path_index);
  }
  c.text = format_plan(plan, request);
  c.trace_path = to_trace_path(plan);
  return c;
}

}  // namespace

std::string local_host_name() {
  if (const char* name = std::getenv("ASTRAL_HOSTNAME"); name && *name) return name;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

bool plan_connection(const PlanInputs& in, const IbPort& local, const QpMeta& peer,
                     ConnectionPlan* mine, PlanMessage* theirs, std::string* why) {
  PathRequest request;
  request.policy = in.policy;
  request.local = local_endpoint(local, in.host);
  request.remote = peer_endpoint(peer);
  request.nqps = in.qps;
  request.sl = in.sl;
  request.tc = in.tc;
  request.connection_id = in.connection_id;
  request.fabric = in.fabric.get();
  PathPlan forward = plan_paths(request);
  PathRequest back_request = reversed(request);
  PathPlan back = plan_paths(back_request);
  if (!forward.ok() || !back.ok()) {
    *why = forward.ok() ? back.error : forward.error;
    return false;
  }
  *mine = to_connection_plan(forward, request, in.split);
  *theirs = PlanMessage{};
  theirs->magic = kPlanMagic;
  theirs->qps = uint16_t(back.qps.size());
  theirs->sl = uint8_t(back.sl);
  theirs->tc = uint8_t(back.tc);
  theirs->policy = uint8_t(back.policy);
  for (const QpPath& q : back.qps) {
    theirs->flow_label[q.qp] = q.flow_label & kFlowLabelMask;
    theirs->path_index[q.qp] = uint8_t(q.path_index);
  }
  return true;
}

ConnectionPlan plan_from_message(const PlanMessage& message, bool split, const IbPort& local,
                                 const QpMeta& peer) {
  // Rebuilt as a PathPlan so that the log line and the trace record read as the sender's do.
  PathPlan plan;
  plan.policy = static_cast<PathPolicy>(message.policy);
  plan.link_layer = local.ethernet ? LinkLayer::kRoCE : LinkLayer::kInfiniBand;
  plan.port = local.port;
  plan.plane = local.plane;
  plan.rail = local.rail;
  plan.sl = message.sl;
  plan.tc = message.tc;
  plan.gid_index = local.ethernet ? local.gid_index : -1;
  plan.source = "the connecting side's plan";
  for (int q = 0; q < message.qps; ++q) {
    QpPath p;
    p.qp = q;
    p.flow_label = message.flow_label[q];
    p.udp_sport = p.flow_label ? flow_label_to_udp_sport(p.flow_label) : 0;
    p.path_index = message.path_index[q];
    if (!local.ethernet) p.dlid = uint16_t(peer.lid + (p.path_index & ((1 << peer.lmc) - 1)));  // as at RTR
    plan.qps.push_back(p);
  }
  PathRequest request;
  request.local = local_endpoint(local, local_host_name());
  request.remote.host.assign(peer.host, strnlen(peer.host, sizeof peer.host));
  return to_connection_plan(plan, request, split);
}

}  // namespace astral::plugin::ib
