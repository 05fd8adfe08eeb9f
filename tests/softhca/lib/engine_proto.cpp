// The RC protocol on the engine thread (mu held): the requester's segmenting, ack timer and
// go-back-N retransmission, RNR back-off; the responder's PSN check, R_Key and bounds checks,
// RECV consumption, RDMA READ responses.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.hpp"

namespace softhca {
namespace {

constexpr uint32_t kPsnMask = 0xffffff;

bool psn_before(uint32_t a, uint32_t b) {
  uint32_t d = (b - a) & kPsnMask;
  return d != 0 && d < 0x800000;
}

bool needs_recv(int op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

bool has_imm(int op) { return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM; }

// Copies between a scatter/gather list and a flat buffer, starting `offset` bytes into the list.
// False when an lkey no longer names a usable MR.
bool copy_sges(Engine& e, const std::vector<ibv_sge>& sges, const ibv_pd* pd, uint64_t offset, uint8_t* buf,
               size_t len, bool into_sges) {
  for (const ibv_sge& s : sges) {
    if (len == 0) break;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    size_t n = std::min<uint64_t>(s.length - offset, len);
    Mr* m = lookup_mr(e, s.lkey, pd);
    if (!m || !mr_covers(m, s.addr + offset, n)) return false;
    uint8_t* p = mr_ptr(m, s.addr + offset);
    if (into_sges) std::memcpy(p, buf, n);
    else std::memcpy(buf, p, n);
    buf += n;
    len -= n;
    offset = 0;
  }
  return len == 0;
}

uint64_t sge_bytes(const std::vector<ibv_sge>& sges) {
  uint64_t n = 0;
  for (const ibv_sge& s : sges) n += s.length;
  return n;
}

}  // namespace

Qp* Engine::find_qp(int dev, uint32_t qpn) {
  auto it = qps.find((uint64_t(dev) << 32) | qpn);
  return it == qps.end() ? nullptr : it->second;
}

void Engine::pump() {
  for (auto& [key, q] : qps) {
    pump_requester(q);
    pump_reads(q);
  }
}

void Engine::pump_requester(Qp* q) {
  if (q->qp.state != IBV_QPS_RTS) return;
  auto now = Clock::now();
  if (q->rnr_resume) {
    if (now < *q->rnr_resume) return;
    q->rnr_resume.reset();
    if (q->timeout) q->ack_deadline = now + ack_timeout(q);
  }
  int dev = q->ctx->dev->index;
  std::vector<uint8_t> seg;
  while (q->next_send < q->sq.size()) {
    SendWr& w = q->sq[q->next_send];
    if (w.local_error) {  // reported in order, once everything before it has completed
      if (q->next_send == 0) {
        SendWr bad = std::move(w);
        q->sq.pop_front();
        complete_send(q, bad, IBV_WC_LOC_PROT_ERR);
        qp_to_error(q);
      }
      return;
    }
    Conn* c = conn_for(q);
    if (c && c->out_bytes >= high_water) return;  // resumed on POLLOUT, or at once (can_send_now)
    PktHdr h{};
    h.magic = kMagic;
    h.type = PktType::request;
    h.opcode = static_cast<uint8_t>(w.op);
    h.dst_dev = static_cast<uint16_t>(q->peer.dev);
    h.src_dev = static_cast<uint16_t>(dev);
    h.dst_qpn = q->dest_qpn;
    h.src_qpn = q->qp.qp_num;
    h.psn = w.psn;
    h.imm = w.imm;
    h.rkey = w.rkey;
    h.raddr = w.raddr;
    h.msg_len = w.len;
    h.offset = q->next_offset;
    uint64_t chunk = w.op == IBV_WR_RDMA_READ ? 0 : std::min<uint64_t>(kSegmentBytes, w.len - q->next_offset);
    h.payload = static_cast<uint32_t>(chunk);
    h.flags = static_cast<uint8_t>((q->next_offset == 0 ? kFirst : 0) |
                                   (q->next_offset + chunk >= w.len || w.op == IBV_WR_RDMA_READ ? kLast : 0));
    seg.resize(chunk);
    if (w.is_inline) std::memcpy(seg.data(), w.inline_data.data() + q->next_offset, chunk);
    else if (chunk && !copy_sges(*this, w.sges, q->qp.pd, q->next_offset, seg.data(), chunk, false)) {
      w.local_error = true;  // the MR went away under a posted WR
      continue;
    }
    if (w.op == IBV_WR_RDMA_READ) w.read_done = 0;
    if (c && port_passes(dev, q->port)) send_packet(*c, h, seg.data());
    q->next_offset += chunk;
    if (h.flags & kLast) {
      ++q->next_send;
      q->next_offset = 0;
      if (!q->ack_deadline && q->timeout) q->ack_deadline = now + ack_timeout(q);
    }
  }
}

void Engine::pump_reads(Qp* q) {
  int dev = q->ctx->dev->index;
  while (!q->reads.empty()) {
    ReadResp& r = q->reads.front();
    auto it = conns_.find(r.conn);
    if (it == conns_.end() || q->qp.state == IBV_QPS_ERR) {
      q->reads.pop_front();
      continue;
    }
    Conn& c = it->second;
    if (c.out_bytes >= high_water) return;
    PktHdr h{};
    h.magic = kMagic;
    h.type = PktType::read_resp;
    h.opcode = IBV_WR_RDMA_READ;
    h.dst_dev = r.dev;
    h.src_dev = static_cast<uint16_t>(dev);
    h.dst_qpn = q->dest_qpn;
    h.src_qpn = q->qp.qp_num;
    h.psn = r.psn;
    h.msg_len = r.len;
    h.offset = r.offset;
    uint64_t chunk = std::min<uint64_t>(kSegmentBytes, r.len - r.offset);
    h.payload = static_cast<uint32_t>(chunk);
    h.flags = static_cast<uint8_t>((r.offset == 0 ? kFirst : 0) | (r.offset + chunk >= r.len ? kLast : 0));
    const uint8_t* src = nullptr;
    if (chunk) {
      Mr* m = lookup_mr(*this, r.rkey, q->qp.pd);
      if (!m || !mr_covers(m, r.raddr + r.offset, chunk)) {  // deregistered while the READ was queued
        h.type = PktType::nak;
        h.nak = Nak::remote_access;
        h.payload = 0;
        if (port_passes(dev, q->port)) send_packet(c, h, nullptr);
        q->reads.pop_front();
        continue;
      }
      src = mr_ptr(m, r.raddr + r.offset);
    }
    if (port_passes(dev, q->port)) send_packet(c, h, src);
    r.offset += chunk;
    if (h.flags & kLast) q->reads.pop_front();
  }
}

void Engine::run_timers() {
  auto now = Clock::now();
  for (auto& [key, q] : qps) {
    if (q->qp.state != IBV_QPS_RTS || !q->ack_deadline || now < *q->ack_deadline) continue;
    if (q->next_send == 0) {
      q->ack_deadline.reset();
      continue;
    }
    if (q->retries_left == 0) {
      SendWr w = std::move(q->sq.front());
      q->sq.pop_front();
      --q->next_send;
      complete_send(q, w, IBV_WC_RETRY_EXC_ERR, 0x81);
      qp_to_error(q);
      continue;
    }
    if (std::getenv("SOFTHCA_DEBUG")) std::fprintf(stderr, "softhca: qp %u: ack timeout, retransmitting from psn %u\n", q->qp.qp_num, q->sq.front().psn);
    --q->retries_left;  // go back N: everything unacknowledged goes again
    q->next_send = 0;
    q->next_offset = 0;
    q->ack_deadline = now + ack_timeout(q);
  }
}

void Engine::handle(uint64_t conn, const PktHdr& h, const uint8_t* payload) {
  Qp* q = find_qp(h.dst_dev, h.dst_qpn);
  if (!q || h.src_qpn != q->dest_qpn || !port_passes(q->ctx->dev->index, q->port)) return;  // dropped
  if (h.type == PktType::request) {
    on_request(conn, q, h, payload);
    return;
  }
  if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_SQD) return;
  if (h.type == PktType::ack) on_ack(q, h.psn);
  else if (h.type == PktType::nak) on_nak(q, h);
  else if (h.type == PktType::read_resp) on_read_resp(q, h, payload);
}

void Engine::on_request(uint64_t conn, Qp* q, const PktHdr& h, const uint8_t* payload) {
  ibv_qp_state st = q->qp.state;
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  if (h.psn != q->expected_psn) {
    if (psn_before(h.psn, q->expected_psn) && (h.flags & kLast)) {  // a retransmission we have done
      if (h.opcode == IBV_WR_RDMA_READ) q->reads.push_back({h.psn, h.rkey, h.raddr, h.msg_len, 0, conn, h.src_dev});
      else reply(conn, h, PktType::ack, Nak::none, q);
    }
    return;  // ahead of sequence: something before it was lost; the requester goes back
  }
  if ((h.flags & kFirst) && !start_message(conn, q, h)) return;
  InMsg& m = q->in;
  if (!m.active || m.psn != h.psn || m.offset != h.offset) return;
  if (h.payload) {
    bool ok;
    if (h.opcode == IBV_WR_SEND || h.opcode == IBV_WR_SEND_WITH_IMM) {
      ok = copy_sges(*this, q->rq.front().sges, q->qp.pd, m.offset, const_cast<uint8_t*>(payload), h.payload, true);
    } else {
      Mr* mr = lookup_mr(*this, m.rkey, q->qp.pd);
      ok = mr && mr_covers(mr, m.raddr + m.offset, h.payload);
      if (ok) place(mr_ptr(mr, m.raddr + m.offset), payload, h.payload);
    }
    if (!ok) {  // an MR vanished mid-message
      reply(conn, h, PktType::nak, Nak::remote_access, q);
      qp_to_error(q);
      return;
    }
  }
  m.offset += h.payload;
  if (h.flags & kLast) finish_message(conn, q, h);
}

// The checks a responder makes on the first packet of a message. False when the message is
// answered already (NAK, RNR, or a READ queued for its response).
bool Engine::start_message(uint64_t conn, Qp* q, const PktHdr& h) {
  q->in = InMsg{};
  int op = h.opcode;
  if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ) {
    unsigned need = op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    bool ok = (q->access & need) != 0;
    if (ok && h.msg_len) {  // a zero-length RDMA checks no R_Key
      Mr* m = lookup_mr(*this, h.rkey, q->qp.pd);
      ok = m && (m->access & need) && mr_covers(m, h.raddr, h.msg_len);
    }
    if (!ok) {
      reply(conn, h, PktType::nak, Nak::remote_access, q);
      ibv_async_event ev{};
      ev.element.qp = &q->qp;
      ev.event_type = IBV_EVENT_QP_ACCESS_ERR;
      post_event(q->ctx, ev);
      qp_to_error(q);
      return false;
    }
  }
  if (needs_recv(op)) {
    if (q->rq.empty()) {
      reply(conn, h, PktType::nak, Nak::rnr, q);
      return false;
    }
    if (op != IBV_WR_RDMA_WRITE_WITH_IMM && h.msg_len > sge_bytes(q->rq.front().sges)) {
      RecvWr r = std::move(q->rq.front());
      q->rq.pop_front();
      ibv_wc wc{};
      wc.wr_id = r.wr_id;
      wc.status = IBV_WC_LOC_LEN_ERR;
      wc.qp_num = q->qp.qp_num;
      push_wc(reinterpret_cast<Cq*>(q->qp.recv_cq), wc);
      reply(conn, h, PktType::nak, Nak::invalid_request, q);
      qp_to_error(q);
      return false;
    }
  }
  if (op == IBV_WR_RDMA_READ) {
    q->reads.push_back({h.psn, h.rkey, h.raddr, h.msg_len, 0, conn, h.src_dev});
    q->expected_psn = (q->expected_psn + 1) & kPsnMask;
    return false;
  }
  q->in = InMsg{true, h.psn, 0, h.msg_len, h.raddr, h.rkey, op};
  return true;
}

// An HCA's writes into host memory need not land in address order (PCIe relaxed ordering,
// adaptive routing), and memcpy promises no order either. `last_first` makes the worst case
// certain: the segment's last cache line lands first and the rest a millisecond (scaled) later,
// so a reader that polls a flag in a write's last bytes sees it before the data it guards.
void Engine::place(uint8_t* dst, const uint8_t* src, size_t n) {
  if (!last_first || n == 0) {
    std::memcpy(dst, src, n);
    return;
  }
  size_t tail = std::min<size_t>(64, n);
  std::memcpy(dst + n - tail, src + n - tail, tail);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(1000 * time_scale));
  std::memcpy(dst, src, n - tail);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void Engine::finish_message(uint64_t conn, Qp* q, const PktHdr& h) {
  if (needs_recv(h.opcode)) {
    RecvWr r = std::move(q->rq.front());
    q->rq.pop_front();
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = h.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    wc.byte_len = static_cast<uint32_t>(h.msg_len);
    wc.qp_num = q->qp.qp_num;
    wc.src_qp = h.src_qpn;
    wc.sl = q->av.sl;
    wc.slid = 0;
    if (has_imm(h.opcode)) {
      wc.imm_data = h.imm;
      wc.wc_flags = IBV_WC_WITH_IMM;
    }
    push_wc(reinterpret_cast<Cq*>(q->qp.recv_cq), wc);
  }
  q->in.active = false;
  q->expected_psn = (q->expected_psn + 1) & kPsnMask;
  reply(conn, h, PktType::ack, Nak::none, q);
  note_message_completed();
}

void Engine::reply(uint64_t conn, const PktHdr& req, PktType type, Nak nak, const Qp* q) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || !port_passes(q->ctx->dev->index, q->port)) return;
  PktHdr h{};
  h.magic = kMagic;
  h.type = type;
  h.nak = nak;
  h.opcode = req.opcode;
  h.dst_dev = req.src_dev;
  h.src_dev = req.dst_dev;
  h.dst_qpn = req.src_qpn;
  h.src_qpn = req.dst_qpn;
  h.psn = req.psn;
  h.rnr_timer = q->min_rnr_timer;
  send_packet(it->second, h, nullptr);
}

void Engine::on_ack(Qp* q, uint32_t psn) {
  bool progress = false;
  while (!q->sq.empty() && q->next_send > 0 && !psn_before(psn, q->sq.front().psn)) {
    SendWr& front = q->sq.front();
    if (front.op == IBV_WR_RDMA_READ && front.read_done < front.len) break;  // its data is still due
    SendWr w = std::move(front);
    q->sq.pop_front();
    --q->next_send;
    progress = true;
    complete_send(q, w, IBV_WC_SUCCESS);
    if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_SQD) return;  // a rule fired
  }
  if (!progress) return;
  q->retries_left = q->retry_cnt;
  q->rnr_left = q->rnr_retry;
  if (q->next_send > 0 && q->timeout) q->ack_deadline = Clock::now() + ack_timeout(q);
  else q->ack_deadline.reset();
}

void Engine::on_nak(Qp* q, const PktHdr& h) {
  if (!q->sq.empty() && psn_before(q->sq.front().psn, h.psn)) on_ack(q, (h.psn - 1) & kPsnMask);
  // Stale unless it names the front message and that message has gone out, at least its first
  // segment: a responder NAKs (RNR, access) on the first segment, often while the rest is being
  // segmented, and the requester must go back now, not after an ack timeout.
  bool started = q->next_send > 0 || q->next_offset > 0;
  if (q->sq.empty() || !started || q->sq.front().psn != h.psn) return;
  ibv_wc_status st = IBV_WC_SUCCESS;
  if (h.nak == Nak::rnr) {
    if (q->rnr_retry != 7 && q->rnr_left == 0) st = IBV_WC_RNR_RETRY_EXC_ERR;  // 7 retries forever
    if (st == IBV_WC_SUCCESS) {
      if (q->rnr_retry != 7) --q->rnr_left;
      q->rnr_resume = Clock::now() + rnr_delay(static_cast<uint8_t>(h.rnr_timer));
      q->next_send = 0;
      q->next_offset = 0;
      q->ack_deadline.reset();
      return;
    }
  } else {
    st = h.nak == Nak::remote_access ? IBV_WC_REM_ACCESS_ERR : IBV_WC_REM_INV_REQ_ERR;
  }
  SendWr w = std::move(q->sq.front());
  q->sq.pop_front();
  if (q->next_send > 0) --q->next_send;  // else it was the message being segmented
  complete_send(q, w, st);
  qp_to_error(q);
}

void Engine::on_read_resp(Qp* q, const PktHdr& h, const uint8_t* payload) {
  for (size_t i = 0; i < q->next_send && i < q->sq.size(); ++i) {
    SendWr& w = q->sq[i];
    if (w.psn != h.psn) continue;
    if (w.op != IBV_WR_RDMA_READ || h.offset != w.read_done) return;  // duplicate or out of order
    if (h.payload && !copy_sges(*this, w.sges, q->qp.pd, h.offset, const_cast<uint8_t*>(payload), h.payload, true)) {
      SendWr bad = std::move(w);
      q->sq.erase(q->sq.begin() + static_cast<std::ptrdiff_t>(i));
      --q->next_send;
      complete_send(q, bad, IBV_WC_LOC_PROT_ERR);
      qp_to_error(q);
      return;
    }
    w.read_done += h.payload;
    if ((h.flags & kLast) && w.read_done == w.len) on_ack(q, h.psn);
    return;
  }
}

}  // namespace softhca
