// Fuzzes the ib transport's out-of-band messages as a peer sends them (plugin/src/ib/wire.hpp):
// its QP metadata, then the path plan of the accepting side's direction. Each must be rejected
// with a reason, or accepted and planned without a crash. Both ends run this code, so what this
// side plans and sends back must pass the peer's own check.
//
// Input: one byte of choices (bit 0: RoCE here; bits 1-2: the fabric model; bits 3-4: the path
// policy; bit 5: this end is a virtual NIC of two ports), then a QpMeta, then a PlanMessage
// (missing bytes are zero).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/topo/fabric.hpp"
#include "astral/topo/fabric_generate.hpp"
#include "ib/planning.hpp"
#include "ib/wire.hpp"

using namespace astral::plugin::ib;

namespace {

// Copies what there is of the input at `offset` into `out` (the rest stays zero).
template <typename T>
void load(T& out, const uint8_t* data, size_t size, size_t offset) {
  if (size > offset) std::memcpy(&out, data + offset, std::min(size - offset, sizeof out));
}

// Generated fabrics of 16 hosts (named as `astral fabric generate` names them), loaded once:
// same-rail Tier-2 with a hash model (pinned plans choose disjoint uplinks) and rail-only (cross-
// rail plans are refused).
std::shared_ptr<const FabricModel> fabric_model(astral::topo::FabricKind kind, bool hash) {
  astral::topo::GenerateOptions o;
  o.kind = kind;
  o.gpus = 128;
  o.radix = 8;
  nlohmann::json doc = astral::topo::fabric_to_json(astral::topo::generate_fabric(o));
  if (hash) doc["hash_model"] = {{"seed", 5}, {"polarisation", 0.0}};
  std::string error;
  auto model = FabricModel::from_json(doc, "fuzz-fabric.json", &error);
  if (!model) __builtin_trap();
  return model;
}

IbPort local_port(bool ethernet, int plane) {
  IbPort p;
  p.name = plane ? "mlx5_1" : "mlx5_0";
  p.rail = 2;
  p.plane = plane;
  p.port = 1;
  p.ethernet = ethernet;
  p.lid = ethernet ? 0 : 7;
  p.lmc = ethernet ? 0 : 2;
  p.mtu = IBV_MTU_4096;
  p.gid_index = ethernet ? 3 : 0;
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const FabricModel> same_rail =
      fabric_model(astral::topo::FabricKind::kSameRailT2, true);
  static const std::shared_ptr<const FabricModel> rail_only =
      fabric_model(astral::topo::FabricKind::kRailOnly, false);
  if (size == 0) return 0;
  const uint8_t choices = data[0];
  const bool ethernet = choices & 1;
  QpMeta peer{};
  load(peer, data, size, 1);
  PlanMessage message{};
  load(message, data, size, 1 + sizeof peer);

  std::string why;
  if (!check_meta(peer, ethernet, &why)) {
    if (why.empty()) __builtin_trap();  // a refusal always says why
    return 0;
  }
  IbDevice local = single_device(local_port(ethernet, 0));
  if (choices & 0x20) {
    const std::vector<IbPort> ports = {local_port(ethernet, 0), local_port(ethernet, 1)};
    const int devs[] = {0, 1};
    if (!fuse_ports(ports, devs, 2, &local, &why)) __builtin_trap();
  }
  // The connecting side: plans both directions from the peer's metadata.
  PlanInputs in;
  const int fabric = (choices >> 1) & 3;
  in.fabric = fabric == 1 ? same_rail : fabric == 2 ? rail_only : nullptr;
  in.policy = PathPolicy((choices >> 3) % 3);
  in.host = "node0001";
  in.qps = peer.qps;
  in.split = peer.split;
  in.connection_id = 0x1234;
  ConnectionPlan mine;
  PlanMessage theirs{};
  if (plan_connection(in, local, peer, &mine, &theirs, &why)) {
    if (mine.qps != peer.qps) __builtin_trap();
    std::string refused;
    if (!check_plan(theirs, peer.qps, &refused)) __builtin_trap();  // the peer would drop it
  } else if (why.empty()) {
    __builtin_trap();
  }
  // The accepting side: the connecting side's metadata and the plan it sent.
  if (!check_plan(message, peer.qps, &why)) return 0;
  ConnectionPlan accepted = plan_from_message(message, peer.split != 0, local, peer);
  if (accepted.qps != peer.qps) __builtin_trap();
  for (int q = 0; q < accepted.qps; ++q)
    if (accepted.flow_label[size_t(q)] > 0xfffff) __builtin_trap();
  return 0;
}
