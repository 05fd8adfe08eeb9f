#pragma once
// What a connection end runs on: one port, or a virtual NIC that makeVDevice fused from up to
// kMaxMembers ports of one rail (the planes of one NIC, or several NICs of a rail). NCCL 2.30
// asks for such fusions when NCCL_NET_MERGE_LEVEL or NCCL_NET_FORCE_MERGE group devices. QP q of
// a connection lives on member q % members; each member keeps its own addressing and keys.
#include <string>
#include <vector>

#include "ib/hca.hpp"

namespace astral::plugin::ib {

struct IbDevice {
  // What NCCL is told: the members' names joined by '+', the sum of their speeds, the common
  // rail, and the plane as NCCL's IB transport reports a fused one (below).
  NicPort identity;
  std::vector<IbPort> members;  // 1..kMaxMembers, one link layer
  bool gdr = false;             // every member has GPUDirect RDMA
  bool dmabuf = false;          // every member registers DMA-BUF
  bool ethernet() const { return members.front().ethernet; }
};

// A physical port as a device of one member.
IbDevice single_device(const IbPort& port);

// Fuses ports[devs[0..n)] into a virtual NIC; false with `why` (one line naming the devices)
// when they cannot be fused: not physical devices, repeated, more than kMaxMembers, different
// link layers, or on different rails (a vNIC spreads one rail's traffic over its planes; ports of
// two rails meet only through NVLink, so fusing them would send traffic across rails).
bool fuse_ports(const std::vector<IbPort>& ports, const int* devs, int n, IbDevice* out,
                std::string* why);

// The plane a vNIC reports: the members' plane when they share one, -1 when none is known, else
// NCCL's mask (bit 14, NCCL_IB_PLANE_VIRT_BIT, plus a bit per member plane), which never equals a
// physical plane, so that NCCL's graph search pairs fused devices only with matching ones.
int fused_plane(const std::vector<IbPort>& members);

}  // namespace astral::plugin::ib
