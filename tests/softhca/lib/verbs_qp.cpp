// Exported QP verbs, the RC state machine as the kernel checks it (ib_modify_qp_is_ok's table of
// required and optional attributes per transition, ibv_modify_qp(3)), and the ops-table entry
// points (post_send, post_recv, poll_cq, req_notify_cq) that verbs.h calls inline.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "internal.hpp"

using namespace softhca;

namespace softhca {
Qp* to_qp(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }
}  // namespace softhca

namespace {

Engine& eng() { return Engine::get(); }

struct Transition {
  bool valid = false;
  unsigned required = 0, optional = 0;
};

// RC only; indices are ibv_qp_state values RESET..ERR (SQE is a UD/UC state for RC QPs).
Transition transition(ibv_qp_state from, ibv_qp_state to) {
  constexpr unsigned kAltMig = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return {true, 0, 0};
  switch (from) {
    case IBV_QPS_RESET:
      if (to == IBV_QPS_INIT) return {true, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
      break;
    case IBV_QPS_INIT:
      if (to == IBV_QPS_INIT) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
      if (to == IBV_QPS_RTR)
        return {true,
                IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                    IBV_QP_MIN_RNR_TIMER,
                IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
      break;
    case IBV_QPS_RTR:
      if (to == IBV_QPS_RTS)
        return {true, IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                IBV_QP_CUR_STATE | kAltMig | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER};
      break;
    case IBV_QPS_RTS:
      if (to == IBV_QPS_RTS)
        return {true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | kAltMig | IBV_QP_MIN_RNR_TIMER};
      if (to == IBV_QPS_SQD) return {true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY};
      break;
    case IBV_QPS_SQD:
      if (to == IBV_QPS_RTS)
        return {true, 0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | kAltMig | IBV_QP_MIN_RNR_TIMER};
      if (to == IBV_QPS_SQD)
        return {true, 0,
                IBV_QP_PKEY_INDEX | IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
                    IBV_QP_PATH_MIG_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC};
      break;
    default: break;
  }
  return {};
}

const PortSpec& local_port(const Qp* q, int port) {
  const Engine& e = eng();
  return e.fabric.hosts[e.host].devices[q->ctx->dev->index].ports[port - 1];
}

// The address vector: what a RoCE provider resolves (GID entry, neighbour) or an IB one accepts.
int check_av(Qp* q, const ibv_ah_attr& av) {
  Engine& e = eng();
  const PortSpec& lp = local_port(q, q->port);
  if (lp.ethernet && !av.is_global) return EINVAL;  // RoCE needs a GRH
  if (av.is_global && av.grh.sgid_index >= lp.gids.size()) return EINVAL;
  if (!lp.ethernet && av.dlid == 0) return EINVAL;
  PortAddr self{e.host, q->ctx->dev->index, q->port - 1};
  PortAddr dst = lp.ethernet ? find_by_gid(e.fabric, av.grh.dgid) : find_by_lid(e.fabric, av.dlid);
  if (dst.valid() && !reachable(e.fabric, self, dst)) dst = {};
  if (lp.ethernet && !dst.valid()) return ETIMEDOUT;  // no neighbour answers for that GID
  q->peer = dst;  // an unknown IB LID is accepted: its packets go nowhere and time out
  if (dst.valid()) {
    const HostSpec& h = e.fabric.hosts[dst.host];
    char qpn[16];
    std::snprintf(qpn, sizeof qpn, "%06x", q->dest_qpn);
    q->peer_file = e.dir + "/qp/" + h.name + "/" + h.devices[dst.dev].name + "/" + qpn;
  }
  return 0;
}

int check_values(Qp* q, const ibv_qp_attr& a, unsigned mask) {
  const auto& ports = eng().fabric.hosts[eng().host].devices[q->ctx->dev->index].ports;
  if ((mask & IBV_QP_PORT) && (a.port_num < 1 || a.port_num > ports.size())) return EINVAL;
  int port = (mask & IBV_QP_PORT) ? a.port_num : q->port;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= (ports[port - 1].ethernet ? 1 : 128)) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096)) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > 16) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > 16) return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > 0xffffff) return EINVAL;
  constexpr unsigned kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (a.qp_access_flags & ~kAccess)) return EINVAL;
  return 0;
}

void apply_values(Qp* q, const ibv_qp_attr& a, unsigned mask) {
  if (mask & IBV_QP_PORT) q->port = a.port_num;
  if (mask & IBV_QP_PKEY_INDEX) q->pkey_index = a.pkey_index;
  if (mask & IBV_QP_ACCESS_FLAGS) q->access = a.qp_access_flags;
  if (mask & IBV_QP_PATH_MTU) q->mtu = a.path_mtu;
  if (mask & IBV_QP_DEST_QPN) q->dest_qpn = a.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) q->rq_psn = a.rq_psn & 0xffffff;
  if (mask & IBV_QP_SQ_PSN) q->sq_psn = a.sq_psn & 0xffffff;
  if (mask & IBV_QP_TIMEOUT) q->timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) q->retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q->rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_MIN_RNR_TIMER) q->min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q->max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q->max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_AV) q->av = a.ah_attr;
}

void reset_qp(Qp* q) {
  q->sq.clear();
  q->rq.clear();
  q->reads.clear();
  q->in = {};
  q->next_send = 0;
  q->next_offset = 0;
  q->ack_deadline.reset();
  q->rnr_resume.reset();
  q->peer = {};
  q->peer_file.clear();
}

int modify(Qp* q, const ibv_qp_attr& a, unsigned mask) {
  Engine& e = eng();
  if (e.fatal[q->ctx->dev->index]) return EIO;
  ibv_qp_state cur = q->qp.state;
  if ((mask & IBV_QP_CUR_STATE) && a.cur_qp_state != cur) return EINVAL;
  ibv_qp_state next = (mask & IBV_QP_STATE) ? a.qp_state : cur;
  Transition t = transition(cur, next);
  if (!t.valid) return EINVAL;
  if ((mask & t.required) != t.required) return EINVAL;
  if (mask & ~(t.required | t.optional | IBV_QP_STATE)) return EINVAL;
  if (int rc = check_values(q, a, mask)) return rc;
  if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
    Qp trial = *q;  // the AV is checked against the final attributes without touching q on failure
    apply_values(&trial, a, mask);
    if (int rc = check_av(&trial, trial.av)) return rc;
    if (trial.mtu > local_port(q, trial.port).mtu) return EINVAL;
  }
  apply_values(q, a, mask);
  if (next == IBV_QPS_RESET) reset_qp(q);
  if (next == IBV_QPS_ERR) {
    e.qp_to_error(q);
    return 0;
  }
  if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
    check_av(q, q->av);
    q->expected_psn = q->rq_psn;
    log_rtr(e, q);
  }
  if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
    q->next_psn = q->sq_psn;
    q->retries_left = q->retry_cnt;
    q->rnr_left = q->rnr_retry;
  }
  q->qp.state = next;
  return 0;
}

bool valid_sges(const ibv_sge* s, int n, const ibv_pd* pd, bool local_write) {
  Engine& e = eng();
  for (int i = 0; i < n; ++i) {
    if (s[i].length == 0) continue;
    Mr* m = lookup_mr(e, s[i].lkey, pd);
    if (!m || !mr_covers(m, s[i].addr, s[i].length)) return false;
    if (local_write && !(m->access & IBV_ACCESS_LOCAL_WRITE)) return false;
  }
  return true;
}

int queue_send(Qp* q, const ibv_send_wr* wr) {
  switch (wr->opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ: break;
    default: return EINVAL;  // atomics, memory windows, TSO: not modelled
  }
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_send_sge) return EINVAL;
  if (q->sq.size() >= q->cap.max_send_wr) return ENOMEM;
  SendWr w;
  w.wr_id = wr->wr_id;
  w.op = wr->opcode;
  w.flags = wr->send_flags;
  w.imm = wr->imm_data;
  w.raddr = wr->wr.rdma.remote_addr;
  w.rkey = wr->wr.rdma.rkey;
  for (int i = 0; i < wr->num_sge; ++i) w.len += wr->sg_list[i].length;
  w.is_inline = (wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ;
  if (w.is_inline) {
    if (w.len > q->cap.max_inline_data) return EINVAL;
    for (int i = 0; i < wr->num_sge; ++i) {
      const auto* p = reinterpret_cast<const uint8_t*>(wr->sg_list[i].addr);
      w.inline_data.insert(w.inline_data.end(), p, p + wr->sg_list[i].length);
    }
  } else {
    w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    w.local_error = !valid_sges(wr->sg_list, wr->num_sge, q->qp.pd, wr->opcode == IBV_WR_RDMA_READ);
  }
  w.psn = q->next_psn;
  q->next_psn = (q->next_psn + 1) & 0xffffff;
  q->sq.push_back(std::move(w));
  return 0;
}

}  // namespace

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  Engine& e = eng();
  if (attr->qp_type != IBV_QPT_RC) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  const ibv_qp_cap& cap = attr->cap;
  if (!attr->send_cq || !attr->recv_cq || attr->srq || cap.max_send_wr > 32768 || cap.max_recv_wr > 32768 ||
      cap.max_send_sge > 30 || cap.max_recv_sge > 30 || cap.max_inline_data > 512) {
    errno = EINVAL;
    return nullptr;
  }
  Context* c = to_ctx(pd->context);
  std::lock_guard lock(e.mu);
  if (e.fatal[c->dev->index]) {
    errno = EIO;
    return nullptr;
  }
  auto* q = new Qp;
  q->ctx = c;
  q->cap = cap;
  q->cap.max_send_wr = std::max(cap.max_send_wr, 1u);
  q->cap.max_recv_wr = std::max(cap.max_recv_wr, 1u);
  q->cap.max_send_sge = std::max(cap.max_send_sge, 1u);
  q->cap.max_recv_sge = std::max(cap.max_recv_sge, 1u);
  q->cap.max_inline_data = std::max(cap.max_inline_data, 64u);
  attr->cap = q->cap;
  q->sig_all = attr->sq_sig_all != 0;
  ibv_qp& qp = q->qp;
  qp.context = pd->context;
  qp.qp_context = attr->qp_context;
  qp.pd = pd;
  qp.send_cq = attr->send_cq;
  qp.recv_cq = attr->recv_cq;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  std::string file;
  qp.qp_num = e.alloc_qpn(c->dev->index, file);
  if (qp.qp_num == 0) {
    delete q;
    errno = ENOMEM;
    return nullptr;
  }
  qp.handle = qp.qp_num;
  e.qps[(uint64_t(c->dev->index) << 32) | qp.qp_num] = q;
  return &qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  int rc = modify(to_qp(qp), *attr, static_cast<unsigned>(mask));
  if (rc == 0) e.wake();
  return rc;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* a, int, ibv_qp_init_attr* init) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  Qp* q = to_qp(qp);
  *a = ibv_qp_attr{};
  a->qp_state = a->cur_qp_state = qp->state;
  a->path_mtu = q->mtu;
  a->path_mig_state = IBV_MIG_MIGRATED;
  a->rq_psn = q->expected_psn ? q->expected_psn : q->rq_psn;
  a->sq_psn = q->next_psn ? q->next_psn : q->sq_psn;
  a->dest_qp_num = q->dest_qpn;
  a->qp_access_flags = q->access;
  a->cap = q->cap;
  a->ah_attr = q->av;
  a->pkey_index = q->pkey_index;
  a->max_rd_atomic = q->max_rd_atomic;
  a->max_dest_rd_atomic = q->max_dest_rd_atomic;
  a->min_rnr_timer = q->min_rnr_timer;
  a->port_num = static_cast<uint8_t>(q->port);
  a->timeout = q->timeout;
  a->retry_cnt = q->retry_cnt;
  a->rnr_retry = q->rnr_retry;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->cap = q->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = q->sig_all;
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  Engine& e = eng();
  std::unique_lock lock(e.mu);
  Qp* q = to_qp(qp);
  // rdma-core blocks until every async event reported on the QP has been acknowledged.
  e.acked.wait(lock, [&] { return qp->events_completed >= q->events_reported; });
  char name[16];
  std::snprintf(name, sizeof name, "%06x", qp->qp_num);
  const HostSpec& me = e.fabric.hosts[e.host];
  unlink((e.dir + "/qp/" + me.name + "/" + me.devices[q->ctx->dev->index].name + "/" + name).c_str());
  e.qps.erase((uint64_t(q->ctx->dev->index) << 32) | qp->qp_num);
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

int softhca_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  Qp* q = to_qp(qp);
  int rc = 0;
  if (e.fatal[q->ctx->dev->index]) rc = EIO;
  else if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD && qp->state != IBV_QPS_ERR) rc = EINVAL;
  for (; wr && rc == 0; wr = wr->next) rc = queue_send(q, wr);
  if (rc && bad) *bad = wr;
  if (qp->state == IBV_QPS_ERR) e.qp_to_error(q);  // work posted in ERR completes as flushed
  e.wake();
  return rc;
}

int softhca_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  Qp* q = to_qp(qp);
  int rc = qp->state == IBV_QPS_RESET ? EINVAL : 0;
  if (e.fatal[q->ctx->dev->index]) rc = EIO;
  for (; wr && rc == 0; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_recv_sge) rc = EINVAL;
    else if (q->rq.size() >= q->cap.max_recv_wr) rc = ENOMEM;
    else q->rq.push_back(RecvWr{wr->wr_id, {wr->sg_list, wr->sg_list + wr->num_sge}});
    if (rc) break;
  }
  if (rc && bad) *bad = wr;
  if (qp->state == IBV_QPS_ERR) e.qp_to_error(q);
  return rc;
}

// Busy-polling callers (ibv_rc_pingpong, NCCL's progress thread) would otherwise keep the engine
// thread, which is the "hardware" here, from the lock and the CPU: an empty poll takes no lock
// and yields.
int softhca_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  auto* c = reinterpret_cast<Cq*>(cq);
  if (c->ready.load(std::memory_order_acquire) == 0) {
    sched_yield();
    return 0;
  }
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  int got = 0;
  while (got < n && !c->wcs.empty()) {
    wc[got++] = c->wcs.front();
    c->wcs.pop_front();
  }
  c->ready.store(c->wcs.size(), std::memory_order_release);
  return got;
}

int softhca_req_notify_cq(ibv_cq* cq, int) {
  Engine& e = eng();
  std::lock_guard lock(e.mu);
  reinterpret_cast<Cq*>(cq)->armed = true;
  return 0;
}

}  // extern "C"
