#pragma once
// Helpers for softhca's own tests: the environment every test process starts with (fabric
// two-hosts.json, host alpha, a private rendezvous directory), RC QP set-up through the real
// verbs.h API, and bounded waits for completions and async events.
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern "C" int softhca_control(const char* text);

namespace softhca_test {

// Set before main (and so before the library reads it); removed when the process ends.
struct Env {
  std::string dir;
  Env() {
    char tmpl[] = "/tmp/softhca-XXXXXX";
    dir = mkdtemp(tmpl) ? tmpl : "/tmp";
    setenv("SOFTHCA_FABRIC", SOFTHCA_FABRICS "/two-hosts.json", 1);
    setenv("SOFTHCA_HOST", "alpha", 1);
    setenv("SOFTHCA_DIR", dir.c_str(), 1);
    setenv("SOFTHCA_PATH_LOG", (dir + "/path.jsonl").c_str(), 1);
    // Streams stop taking segments at 1000 unsent bytes (default 4 MiB), so that every test
    // crosses the high-water mark and resumes below it many times per message.
    setenv("SOFTHCA_HIGH_WATER", "1000", 1);
  }
  ~Env() {
    std::error_code ec;
    if (dir != "/tmp") std::filesystem::remove_all(dir, ec);
  }
};
inline Env& env() {
  static Env e;
  return e;
}

inline ibv_context* open_device(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n; ++i)
    if (std::string(ibv_get_device_name(list[i])) == name) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  return ctx;
}

constexpr unsigned kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// One RC QP with its own CQ and a registered buffer.
struct Rc {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf;
  ibv_mr* mr = nullptr;
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(buf.data()) + off; }
};

inline Rc make_rc(ibv_pd* pd, size_t bytes, unsigned mr_access = kAllAccess, int cqe = 256) {
  // A device fatal stays for the process: run as one process (not one case per CTest entry), a
  // later test on that device gets no PD, and fails here rather than crashing.
  if (!pd) throw std::runtime_error("make_rc: no protection domain (ibv_alloc_pd failed)");
  Rc r;
  r.buf.assign(bytes, 0);
  r.mr = ibv_reg_mr(pd, r.buf.data(), bytes, static_cast<int>(mr_access));
  r.cq = ibv_create_cq(pd->context, cqe, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = r.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {64, 64, 4, 4, 64};
  r.qp = ibv_create_qp(pd, &init);
  return r;
}

inline void destroy(Rc& r) {
  if (r.qp) ibv_destroy_qp(r.qp);
  if (r.cq) ibv_destroy_cq(r.cq);
  if (r.mr) ibv_dereg_mr(r.mr);
  r = Rc{};
}

constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC;

inline int to_init(ibv_qp* qp, unsigned access = kAllAccess) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  return ibv_modify_qp(qp, &a, kInitMask);
}

struct Path {
  uint16_t dlid = 0;
  int sgid_index = -1;  // >= 0: a GRH to dgid
  ibv_gid dgid{};
  uint32_t flow_label = 0;
  uint8_t traffic_class = 0, sl = 0;
  uint8_t min_rnr_timer = 1;
};

inline int to_rtr(ibv_qp* qp, uint32_t dest_qpn, const Path& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.dlid = p.dlid;
  a.ah_attr.sl = p.sl;
  a.ah_attr.port_num = 1;
  if (p.sgid_index >= 0) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = p.dgid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(p.sgid_index);
    a.ah_attr.grh.flow_label = p.flow_label;
    a.ah_attr.grh.traffic_class = p.traffic_class;
    a.ah_attr.grh.hop_limit = 255;
  }
  return ibv_modify_qp(qp, &a, kRtrMask);
}

inline int to_rts(ibv_qp* qp, uint8_t timeout = 18, uint8_t retry = 7, uint8_t rnr_retry = 7) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = timeout;
  a.retry_cnt = retry;
  a.rnr_retry = rnr_retry;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a, kRtsMask);
}

// Two QPs on alpha's IB device (LID 1) connected to each other: loopback through the engine.
inline bool connect_pair(Rc& a, Rc& b, uint8_t timeout = 18, uint8_t retry = 7, uint8_t rnr_retry = 7,
                         uint8_t min_rnr_timer = 1) {
  Path p;
  p.dlid = 1;
  p.min_rnr_timer = min_rnr_timer;
  return to_init(a.qp) == 0 && to_init(b.qp) == 0 && to_rtr(a.qp, b.qp->qp_num, p) == 0 &&
         to_rtr(b.qp, a.qp->qp_num, p) == 0 && to_rts(a.qp, timeout, retry, rnr_retry) == 0 &&
         to_rts(b.qp, timeout, retry, rnr_retry) == 0;
}

inline int post(ibv_qp* qp, ibv_wr_opcode op, const Rc& local, size_t off, uint32_t len, uint64_t raddr = 0,
                uint32_t rkey = 0, uint64_t wr_id = 1, uint32_t imm = 0, uint32_t lkey_override = 0) {
  ibv_sge sge{local.addr(off), len, lkey_override ? lkey_override : local.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = imm;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

inline int post_recv(const Rc& r, size_t off, uint32_t len, uint64_t wr_id = 100) {
  ibv_sge sge{r.addr(off), len, r.mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(r.qp, &wr, &bad);
}

// Up to n completions, waiting at most `seconds` (a bound against hangs, not a speed check).
inline std::vector<ibv_wc> wait_wcs(ibv_cq* cq, size_t n, double seconds = 20) {
  std::vector<ibv_wc> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, 16, wc);
    out.insert(out.end(), wc, wc + got);
    if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

inline bool wait_async(ibv_context* ctx, ibv_async_event& ev, int timeout_ms = 10000) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return false;
  return ibv_get_async_event(ctx, &ev) == 0;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace softhca_test
