#include "ib/wire.hpp"

#include <cstring>
#include <fmt/format.h>

namespace astral::plugin::ib {

namespace {

// One member's addressing; "" when it is sound.
std::string member_error(const MemberAddress& m, bool ethernet) {
  if (m.mtu < 1 || m.mtu > 5) return fmt::format("mtu code {} is not an ibv_mtu", m.mtu);
  if (!ethernet && m.lid == 0) return "an InfiniBand port with LID 0";
  if (m.lmc > 7) return fmt::format("lmc {} is not in [0, 7]", m.lmc);
  if (m.rail < -1 || m.plane < -1) return fmt::format("rail {} / plane {}", m.rail, m.plane);
  return "";
}

}  // namespace

bool check_meta(const QpMeta& meta, bool local_ethernet, std::string* why) {
  if (meta.magic != kMetaMagic) {
    *why = fmt::format("not Astral QP metadata (magic {:#010x})", meta.magic);
  } else if (meta.version != kMetaVersion) {
    *why = fmt::format("QP metadata version {} (this library speaks {})", meta.version, kMetaVersion);
  } else if (meta.qps < 1 || meta.qps > kMaxQps) {
    *why = fmt::format("qps {} is not in [1, {}]", meta.qps, kMaxQps);
  } else if (meta.members < 1 || meta.members > kMaxMembers) {
    *why = fmt::format("members {} is not in [1, {}]", meta.members, kMaxMembers);
  } else if (meta.ethernet > 1 || bool(meta.ethernet) != local_ethernet) {
    *why = fmt::format("link layer {} there, {} here", meta.ethernet ? "Ethernet" : "InfiniBand",
                       local_ethernet ? "Ethernet" : "InfiniBand");
  } else if (meta.split > 1) {
    *why = fmt::format("split flag {}", meta.split);
  } else if (std::memchr(meta.host, 0, sizeof meta.host) == nullptr) {
    *why = "host name is not NUL-terminated within 32 bytes";
  } else {
    for (int m = 0; m < meta.members; ++m) {
      if (std::string e = member_error(meta.member[m], meta.ethernet); !e.empty()) {
        *why = fmt::format("member {}: {}", m, e);
        return false;
      }
    }
    for (int q = 0; q < meta.qps; ++q) {
      if (meta.qpn[q] == 0 || meta.qpn[q] > 0xffffff) {
        *why = fmt::format("qpn[{}] = {:#x} is not a 24-bit QP number", q, meta.qpn[q]);
        return false;
      }
    }
    return true;
  }
  return false;
}

uint32_t cts_check(const CtsEntry& entry) {
  CtsEntry copy = entry;
  copy.check = 0;
  uint64_t words[sizeof copy / 8];
  std::memcpy(words, &copy, sizeof copy);
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t w : words) {
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return uint32_t(h ^ (h >> 29));
}

bool check_plan(const PlanMessage& plan, int qps, std::string* why) {
  if (plan.magic != kPlanMagic) {
    *why = fmt::format("not an Astral path plan (magic {:#010x})", plan.magic);
  } else if (plan.qps != qps) {
    *why = fmt::format("a plan for {} QPs, {} were set up", plan.qps, qps);
  } else if (plan.sl > 15) {
    *why = fmt::format("service level {} is not in [0, 15]", plan.sl);
  } else if (plan.policy > 2) {
    *why = fmt::format("policy {} is not spread, pinned or off", plan.policy);
  } else {
    for (int q = 0; q < qps; ++q) {
      if (plan.flow_label[q] > 0xfffff) {
        *why = fmt::format("flow_label[{}] = {:#x} exceeds 20 bits", q, plan.flow_label[q]);
        return false;
      }
      if (plan.path_index[q] > 127) {
        *why = fmt::format("path_index[{}] = {} exceeds an LMC of 7", q, plan.path_index[q]);
        return false;
      }
    }
    return true;
  }
  return false;
}

}  // namespace astral::plugin::ib
