// Completions, the error state and flushing, async events, fault injection, and the RTR path log
// (all with Engine::mu held).
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "internal.hpp"

namespace softhca {
namespace {

ibv_wc_opcode wc_opcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    default: return IBV_WC_SEND;
  }
}

// The RNR NAK timer encodings of the IB specification (table 45), in microseconds.
constexpr uint32_t kRnrMicros[32] = {655360, 10,    20,    30,    40,    60,     80,     120,
                                     160,    240,   320,   480,   640,   960,    1280,   1920,
                                     2560,   3840,  5120,  7680,  10240, 15360,  20480,  30720,
                                     40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

// mlx5 (kernel >= 5.7) turns the flow label into the RoCEv2 UDP source port; a zero label is
// first replaced by a hash of both QP numbers (rdma_calc_flow_label).
uint32_t effective_flow_label(uint32_t label, uint32_t lqpn, uint32_t rqpn) {
  if (label) return label & 0xfffff;
  uint64_t v = uint64_t(lqpn) * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<uint32_t>(v & 0xfffff);
}

uint16_t udp_sport(uint32_t fl) { return static_cast<uint16_t>(0xC000 | ((fl & 0x3fff) ^ ((fl >> 14) & 0x3f))); }

int device_index(const Engine& e, const std::string& name) {
  const auto& devs = e.fabric.hosts[e.host].devices;
  for (size_t i = 0; i < devs.size(); ++i)
    if (devs[i].name == name) return static_cast<int>(i);
  return -1;
}

const char* gid_type_name(GidType t) {
  return t == GidType::ib ? "IB" : t == GidType::roce_v1 ? "RoCEv1" : "RoCEv2";
}

}  // namespace

Mr* lookup_mr(Engine& e, uint32_t key, const ibv_pd* pd) {
  auto it = e.mrs.find(key);
  return it == e.mrs.end() || it->second->mr.pd != pd ? nullptr : it->second;
}

bool mr_covers(const Mr* m, uint64_t addr, uint64_t len) {
  return addr >= m->iova && len <= m->mr.length && addr - m->iova <= m->mr.length - len;
}

uint8_t* mr_ptr(const Mr* m, uint64_t addr) { return static_cast<uint8_t*>(m->mr.addr) + (addr - m->iova); }

Clock::duration Engine::ack_timeout(const Qp* q) const {
  double us = 4.096 * double(1ull << q->timeout) * time_scale;
  return std::chrono::microseconds(std::max<int64_t>(1000, static_cast<int64_t>(us)));
}

Clock::duration Engine::rnr_delay(uint8_t timer) const {
  double us = kRnrMicros[timer & 31] * time_scale;
  return std::chrono::microseconds(std::max<int64_t>(10, static_cast<int64_t>(us)));
}

bool Engine::port_passes(int dev, int port) const {
  const PortRuntime& p = ports[dev][port - 1];
  return p.active && !p.dropping && !fatal[dev];
}

void Engine::post_event(Context* c, ibv_async_event ev) {
  if (ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_ACCESS_ERR ||
      ev.event_type == IBV_EVENT_QP_REQ_ERR)
    ++to_qp(ev.element.qp)->events_reported;
  c->events.push_back(ev);
  char byte = 1;
  [[maybe_unused]] auto n = write(c->async_wfd, &byte, 1);
}

void Engine::push_wc(Cq* cq, const ibv_wc& wc) {
  // Overrun: the CQ is in error for good, as on an HCA; a completion arriving after the consumer
  // drained it is dropped too (the test that CQ_ERR keeps what fitted raced on this).
  if (cq->overrun || cq->wcs.size() >= cq->capacity) {
    if (!cq->overrun) {
      cq->overrun = true;
      ibv_async_event ev{};
      ev.element.cq = &cq->cq;
      ev.event_type = IBV_EVENT_CQ_ERR;
      post_event(to_ctx(cq->cq.context), ev);
    }
    return;
  }
  cq->wcs.push_back(wc);
  cq->ready.store(cq->wcs.size(), std::memory_order_release);
  if (cq->armed && cq->cq.channel) {
    cq->armed = false;
    ++cq->events_reported;
    ibv_cq* p = &cq->cq;
    [[maybe_unused]] auto n = write(reinterpret_cast<Channel*>(cq->cq.channel)->wfd, &p, sizeof p);
  }
}

void Engine::complete_send(Qp* q, SendWr& w, ibv_wc_status st, uint32_t vendor_err) {
  bool signaled = q->sig_all || (w.flags & IBV_SEND_SIGNALED);
  if (st != IBV_WC_SUCCESS || signaled) {
    ibv_wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = wc_opcode(w.op);
    wc.vendor_err = vendor_err;
    wc.byte_len = w.op == IBV_WR_RDMA_READ ? static_cast<uint32_t>(w.len) : 0;
    wc.qp_num = q->qp.qp_num;
    push_wc(reinterpret_cast<Cq*>(q->qp.send_cq), wc);
  }
  if (st == IBV_WC_SUCCESS) note_message_completed();
}

// ERR: every outstanding work request completes with WR_FLUSH_ERR, signaled or not.
void Engine::qp_to_error(Qp* q) {
  q->qp.state = IBV_QPS_ERR;
  q->in.active = false;
  q->ack_deadline.reset();
  q->rnr_resume.reset();
  q->reads.clear();
  for (SendWr& w : q->sq) {
    ibv_wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = wc_opcode(w.op);
    wc.qp_num = q->qp.qp_num;
    push_wc(reinterpret_cast<Cq*>(q->qp.send_cq), wc);
  }
  q->sq.clear();
  q->next_send = 0;
  q->next_offset = 0;
  for (RecvWr& r : q->rq) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q->qp.qp_num;
    push_wc(reinterpret_cast<Cq*>(q->qp.recv_cq), wc);
  }
  q->rq.clear();
}

void Engine::note_message_completed() {
  ++messages_completed_;
  for (size_t i = 0; i < rules_.size();) {
    if (rules_[i].after_msgs > messages_completed_) {
      ++i;
      continue;
    }
    Command c = rules_[i];
    rules_.erase(rules_.begin() + static_cast<std::ptrdiff_t>(i));
    c.after_msgs = 0;
    std::string error;
    if (apply(c, error) != 0) std::fprintf(stderr, "softhca: fault rule: %s\n", error.c_str());
  }
}

int Engine::apply(const Command& cmd, std::string& error) {
  if (cmd.after_msgs) {
    Command later = cmd;
    later.after_msgs += messages_completed_;
    rules_.push_back(later);
    return 0;
  }
  if (cmd.kind == FaultKind::kill) {
    flush_all();  // what the "NIC" already had on the wire (e.g. the last ACK) still arrives
    std::fflush(nullptr);
    raise(SIGKILL);  // a peer that dies without a word, as kill -9 does
  }
  if (cmd.kind == FaultKind::last_first || cmd.kind == FaultKind::in_order) {
    last_first = cmd.kind == FaultKind::last_first;
    return 0;
  }
  if (cmd.kind == FaultKind::qp_error) {
    int want = cmd.device.empty() ? -1 : device_index(*this, cmd.device);
    for (auto& [key, q] : qps) {
      if (q->qp.qp_num != cmd.qpn || (want >= 0 && q->ctx->dev->index != want)) continue;
      ibv_async_event ev{};
      ev.element.qp = &q->qp;
      ev.event_type = IBV_EVENT_QP_FATAL;
      post_event(q->ctx, ev);
      qp_to_error(q);
      return 0;
    }
    error = "qp_error: no QP " + std::to_string(cmd.qpn) + " in this process";
    return -1;
  }
  int d = device_index(*this, cmd.device);
  if (d < 0) {
    error = "device " + cmd.device + " is not on host " + fabric.hosts[host].name;
    return -1;
  }
  if (cmd.port > static_cast<int>(ports[d].size())) {
    error = "device " + cmd.device + " has no port " + std::to_string(cmd.port);
    return -1;
  }
  PortRuntime& p = ports[d][cmd.port - 1];
  ibv_async_event ev{};
  switch (cmd.kind) {
    case FaultKind::link_drop: p.dropping = true; return 0;
    case FaultKind::link_restore: p.dropping = false; return 0;
    case FaultKind::port_down:
    case FaultKind::port_up:
      p.active = cmd.kind == FaultKind::port_up;
      ev.element.port_num = cmd.port;
      ev.event_type = p.active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
      break;
    case FaultKind::device_fatal:
      fatal[d] = true;
      ev.event_type = IBV_EVENT_DEVICE_FATAL;
      for (auto& [key, q] : qps)
        if (q->ctx->dev->index == d) qp_to_error(q);
      break;
    default: return 0;
  }
  for (Context* c : contexts)
    if (c->dev->index == d) post_event(c, ev);
  return 0;
}

void log_rtr(Engine& e, const Qp* q) {
  if (e.path_log.empty()) return;
  const DeviceSpec& dev = e.fabric.hosts[e.host].devices[q->ctx->dev->index];
  const PortSpec& port = dev.ports[q->port - 1];
  const ibv_ah_attr& av = q->av;
  nlohmann::json j = {{"event", "rtr"},
                      {"host", e.fabric.hosts[e.host].name},
                      {"device", dev.name},
                      {"port", q->port},
                      {"rail", port.rail},
                      {"plane", port.plane},
                      {"link_layer", port.ethernet ? "Ethernet" : "IB"},
                      {"qpn", q->qp.qp_num},
                      {"dest_qpn", q->dest_qpn},
                      {"dlid", av.dlid},
                      {"src_path_bits", av.src_path_bits},
                      {"sl", av.sl},
                      {"path_mtu", 128 << q->mtu},
                      {"rq_psn", q->rq_psn},
                      {"min_rnr_timer", q->min_rnr_timer},
                      {"is_global", av.is_global != 0}};
  if (q->peer.valid()) {
    const HostSpec& ph = e.fabric.hosts[q->peer.host];
    j["peer"] = {{"host", ph.name}, {"device", ph.devices[q->peer.dev].name}, {"port", q->peer.port + 1}};
  } else {
    j["peer"] = nullptr;
  }
  if (av.is_global) {
    const GidSpec& sg = port.gids[av.grh.sgid_index];
    j["sgid_index"] = av.grh.sgid_index;
    j["gid_type"] = gid_type_name(sg.type);
    j["sgid"] = gid_to_string(sg.gid);
    j["dgid"] = gid_to_string(av.grh.dgid);
    j["traffic_class"] = av.grh.traffic_class;
    j["flow_label"] = av.grh.flow_label;
    j["hop_limit"] = av.grh.hop_limit;
    if (sg.type == GidType::roce_v2) {
      j["udp_sport"] = udp_sport(effective_flow_label(av.grh.flow_label, q->qp.qp_num, q->dest_qpn));
      j["udp_sport_from"] = av.grh.flow_label ? "flow_label" : "qpn_hash";
    }
  }
  std::string line = j.dump() + "\n";
  int fd = open(e.path_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] auto n = write(fd, line.data(), line.size());  // one write: lines never interleave
  close(fd);
}

}  // namespace softhca

// In-process fault injection (the same commands as the control socket): 0, or -1 with one line on
// stderr naming what was wrong.
extern "C" int softhca_control(const char* text) {
  softhca::Engine& e = softhca::Engine::get();
  if (!e.load()) {
    std::fprintf(stderr, "softhca: control: no fabric loaded\n");
    return -1;
  }
  std::string error;
  auto cmds = softhca::parse_commands(text ? text : "", error);
  std::lock_guard lock(e.mu);
  if (!cmds) {
    std::fprintf(stderr, "softhca: control: %s\n", error.c_str());
    return -1;
  }
  for (const auto& c : *cmds)
    if (e.apply(c, error) != 0) {
      std::fprintf(stderr, "softhca: control: %s\n", error.c_str());
      return -1;
    }
  e.wake();
  return 0;
}
