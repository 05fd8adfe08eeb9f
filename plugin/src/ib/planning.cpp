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

PathEndpoint peer_endpoint(const QpMeta& meta, int member) {
  const MemberAddress& m = meta.member[member];
  PathEndpoint e;
  e.host.assign(meta.host, strnlen(meta.host, sizeof meta.host));
  e.rail = m.rail;
  e.plane = m.plane;
  e.port = m.port;
  e.link_layer = meta.ethernet ? LinkLayer::kRoCE : LinkLayer::kInfiniBand;
  e.base_lid = m.lid;
  e.lmc = m.lmc;
  e.gid_index = m.gid_index;
  return e;
}

// Where QP q of a connection runs: this end's member q % local and the peer's q % remote.
struct MemberPair {
  int local, remote;
};
MemberPair pair_of(int q, int local_members, int remote_members) {
  return {q % local_members, q % remote_members};
}

// Plans one direction QP by QP: each QP's path is the plan of its member pair (planned once per
// pair, for all the connection's QPs, so labels stay distinct per QP). The header (port, plane,
// GID) is member 0's; with several members each QP also names its local port.
PathPlan plan_members(const PathRequest& base, const std::vector<PathEndpoint>& locals,
                      const std::vector<std::string>& local_names,
                      const std::vector<PathEndpoint>& remotes, PathRequest* first_request) {
  PathPlan merged;
  std::vector<PathPlan> by_pair(locals.size() * remotes.size());
  std::vector<bool> planned(by_pair.size(), false);
  const bool fused = locals.size() > 1 || remotes.size() > 1;
  for (int q = 0; q < base.nqps; ++q) {
    MemberPair mp = pair_of(q, int(locals.size()), int(remotes.size()));
    size_t k = size_t(mp.local) * remotes.size() + size_t(mp.remote);
    if (!planned[k]) {
      PathRequest r = base;
      r.local = locals[size_t(mp.local)];
      r.remote = remotes[size_t(mp.remote)];
      by_pair[k] = plan_paths(r);
      planned[k] = true;
      if (!by_pair[k].ok()) return by_pair[k];
      if (q == 0) {
        merged = by_pair[k];
        merged.qps.clear();
        *first_request = r;
      }
    }
    QpPath path = by_pair[k].qps[size_t(q)];
    if (fused) path.device = local_names[size_t(mp.local)];
    merged.qps.push_back(path);
  }
  return merged;
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

namespace {

std::vector<PathEndpoint> local_endpoints(const IbDevice& device, const std::string& host,
                                          std::vector<std::string>* names) {
  std::vector<PathEndpoint> out;
  for (const IbPort& p : device.members) {
    out.push_back(local_endpoint(p, host));
    names->push_back(p.name);
  }
  return out;
}

std::vector<PathEndpoint> peer_endpoints(const QpMeta& peer) {
  std::vector<PathEndpoint> out;
  for (int m = 0; m < peer.members; ++m) out.push_back(peer_endpoint(peer, m));
  return out;
}

}  // namespace

bool plan_connection(const PlanInputs& in, const IbDevice& local, const QpMeta& peer,
                     ConnectionPlan* mine, PlanMessage* theirs, std::string* why) {
  PathRequest base;
  base.policy = in.policy;
  base.nqps = in.qps;
  base.sl = in.sl;
  base.tc = in.tc;
  base.connection_id = in.connection_id;
  base.fabric = in.fabric.get();
  std::vector<std::string> local_names, peer_names(size_t(peer.members));
  auto locals = local_endpoints(local, in.host, &local_names);
  auto remotes = peer_endpoints(peer);
  PathRequest request, back_request;
  PathPlan forward = plan_members(base, locals, local_names, remotes, &request);
  // The other direction, QP by QP from the peer's members to ours (its QP q is on its member
  // q % peer.members, as ours is on q % members).
  PathPlan back = plan_members(reversed(base), remotes, peer_names, locals, &back_request);
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

ConnectionPlan plan_from_message(const PlanMessage& message, bool split, const IbDevice& local,
                                 const QpMeta& peer) {
  // Rebuilt as a PathPlan so that the log line and the trace record read as the sender's do.
  const IbPort& first = local.members.front();
  const int members = static_cast<int>(local.members.size());
  PathPlan plan;
  plan.policy = static_cast<PathPolicy>(message.policy);
  plan.link_layer = first.ethernet ? LinkLayer::kRoCE : LinkLayer::kInfiniBand;
  plan.port = first.port;
  plan.plane = first.plane;
  plan.rail = local.identity.rail;
  plan.sl = message.sl;
  plan.tc = message.tc;
  plan.gid_index = first.ethernet ? first.gid_index : -1;
  plan.source = "the connecting side's plan";
  for (int q = 0; q < message.qps; ++q) {
    MemberPair mp = pair_of(q, members, peer.members);
    const MemberAddress& remote = peer.member[mp.remote];
    QpPath p;
    p.qp = q;
    p.flow_label = message.flow_label[q];
    p.udp_sport = p.flow_label ? flow_label_to_udp_sport(p.flow_label) : 0;
    p.path_index = message.path_index[q];
    // As at RTR: the peer member's base LID plus the path index within its LMC.
    if (!first.ethernet) p.dlid = uint16_t(remote.lid + (p.path_index & ((1 << remote.lmc) - 1)));
    if (members > 1 || peer.members > 1) p.device = local.members[size_t(mp.local)].name;
    plan.qps.push_back(p);
  }
  PathRequest request;
  request.local = local_endpoint(first, local_host_name());
  request.remote = peer_endpoint(peer, 0);
  return to_connection_plan(plan, request, split);
}

}  // namespace astral::plugin::ib
