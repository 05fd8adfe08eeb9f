// A second softhca "host" for the multi-process tests: an RC responder on an IB port.
//   softhca_peer <device>            (SOFTHCA_* from the environment)
// Prints "qpn <n> lid <l> addr <a> rkey <k>" (its 256 KiB buffer, remotely writable), reads "<remote qpn> <remote lid>" from stdin, goes to RTS with 64
// 4 KiB receives posted, prints "ready", then prints "recv <bytes>" per completion until stdin
// closes. The test kills it with SIGKILL to model a peer that dies.
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "softhca_peer: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: softhca_peer <device>");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; list && i < n; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) dev = list[i];
  if (!dev) return fail("no such device");
  ibv_context* ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!ctx) return fail("open_device");
  ibv_port_attr port{};
  ibv_query_port(ctx, 1, &port);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<char> buf(64 * 4096);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {64, 64, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (!pd || !mr || !cq || !qp) return fail("resources");
  std::printf("qpn %u lid %u addr %llu rkey %u\n", qp->qp_num, port.lid,
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(buf.data())), mr->rkey);
  std::fflush(stdout);
  unsigned rqpn = 0, rlid = 0;
  if (std::scanf("%u %u", &rqpn, &rlid) != 2) return fail("expected '<qpn> <lid>' on stdin");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return fail("INIT");
  for (int i = 0; i < 64; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()) + i * 4096u, 4096, mr->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(qp, &wr, &bad)) return fail("post_recv");
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = rqpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = static_cast<uint16_t>(rlid);
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return fail("RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    return fail("RTS");
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    ibv_wc wc[8];
    int got = ibv_poll_cq(cq, 8, wc);
    for (int i = 0; i < got; ++i) std::printf("recv %u status %d\n", wc[i].byte_len, wc[i].status);
    if (got) std::fflush(stdout);
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, 1) > 0) {
      char c;
      if (read(0, &c, 1) <= 0) break;
    }
  }
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}
