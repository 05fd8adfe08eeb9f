// Exported verbs that are pure (strings, rate tables) or that softhca does not model (UD address
// handles, SRQs, multicast, ECE, imports): the latter fail the way a provider without the feature
// does (EOPNOTSUPP / NULL with errno), so a caller's fallback path is exercised.
#include <cerrno>

#include "internal.hpp"

namespace {

struct RateRow {
  ibv_rate rate;
  int mult, mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},       {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},     {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 5, 14062},     {IBV_RATE_56_GBPS, 22, 56250},    {IBV_RATE_112_GBPS, 45, 112500},
    {IBV_RATE_168_GBPS, 67, 168750},  {IBV_RATE_25_GBPS, 10, 25781},    {IBV_RATE_100_GBPS, 40, 103125},
    {IBV_RATE_200_GBPS, 80, 206250},  {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000}, {IBV_RATE_1200_GBPS, 480, 1275000}};

template <typename T>
T* unsupported() {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace

extern "C" {

const char* ibv_wc_status_str(enum ibv_wc_status status) {
  static const char* const names[] = {"success",
                                      "local length error",
                                      "local QP operation error",
                                      "local EE context operation error",
                                      "local protection error",
                                      "Work Request Flushed Error",
                                      "memory management operation error",
                                      "bad response error",
                                      "local access error",
                                      "remote invalid request error",
                                      "remote access error",
                                      "remote operation error",
                                      "transport retry counter exceeded",
                                      "RNR retry counter exceeded",
                                      "local RDD violation error",
                                      "remote invalid RD request",
                                      "aborted error",
                                      "invalid EE context number",
                                      "invalid EE context state",
                                      "fatal error",
                                      "response timeout error",
                                      "general error",
                                      "TM error",
                                      "TM Rendezvous Request Tag Error"};
  unsigned i = static_cast<unsigned>(status);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const names[] = {
      "CQ error",           "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established", "send queue drained",
      "path migrated",      "path migration request error",        "local catastrophic error",
      "port active",        "port error",                          "LID change",
      "P_Key change",       "SM change",                           "SRQ catastrophic error",
      "SRQ limit reached",  "last WQE reached",                    "client reregistration",
      "GID table change",   "WQ fatal"};
  unsigned i = static_cast<unsigned>(event);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

const char* ibv_node_type_str(enum ibv_node_type t) {
  switch (t) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(enum ibv_port_state s) {
  static const char* const names[] = {"no state change (NOP)", "down", "init", "armed", "active", "active defer"};
  unsigned i = static_cast<unsigned>(s);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& r : kRates)
    if (r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) { return unsupported<ibv_ah>(); }
ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) { return unsupported<ibv_ah>(); }
int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) { return EOPNOTSUPP; }
int ibv_destroy_ah(ibv_ah*) { return EOPNOTSUPP; }
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) { return EOPNOTSUPP; }
ibv_srq* ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) { return unsupported<ibv_srq>(); }
int ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) { return EOPNOTSUPP; }
int ibv_query_srq(ibv_srq*, ibv_srq_attr*) { return EOPNOTSUPP; }
int ibv_destroy_srq(ibv_srq*) { return EOPNOTSUPP; }
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) { return IBV_REREG_MR_ERR_INPUT; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
// Only QPs created through ibv_create_qp_ex have a qp_ex; softhca creates none (rdma-core's answer).
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) { return nullptr; }
int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) { return 1; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }
ibv_context* ibv_import_device(int) { return unsupported<ibv_context>(); }
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return unsupported<ibv_pd>(); }
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return unsupported<ibv_mr>(); }
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return unsupported<ibv_dm>(); }
void ibv_unimport_dm(ibv_dm*) {}

}  // extern "C"
