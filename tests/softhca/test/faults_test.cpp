// softhca's error paths: RNR, retry-exceeded (link drop, killed peer), flush, CQ overflow,
// completion channels, async events for port down/up, QP error and device fatal.
// Time bounds below only catch hangs; the lower bounds check the modelled ack timeout, which load
// can only make later.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "softhca_support.hpp"

using namespace softhca_test;

namespace {
[[maybe_unused]] Env& g_env = env();

struct Loop {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  Rc a, b;
  explicit Loop(const char* dev = "mlx5_0") {
    ctx = open_device(dev);
    REQUIRE(ctx);
    pd = ibv_alloc_pd(ctx);
    a = make_rc(pd, 8192);
    b = make_rc(pd, 8192);
  }
  ~Loop() {
    destroy(a);
    destroy(b);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
  }
};

// The modelled ack timeout of one try: 4.096 us * 2^timeout.
double ack_seconds(int timeout) { return 4.096e-6 * double(1 << timeout); }

// A child process on another host, driven through pipes (softhca_peer).
struct Peer {
  pid_t pid = -1;
  FILE* in = nullptr;   // its stdin
  FILE* out = nullptr;  // its stdout
  explicit Peer(const std::vector<std::string>& extra_env = {}) {
    int to[2], from[2];
    REQUIRE(pipe(to) == 0);
    REQUIRE(pipe(from) == 0);
    // Everything the child needs is built before fork: only dup2 and execve run in it.
    std::vector<std::string> vars;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "SOFTHCA_HOST=", 13) != 0) vars.emplace_back(*e);
    vars.emplace_back("SOFTHCA_HOST=beta");
    vars.insert(vars.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(SOFTHCA_PEER), const_cast<char*>("mlx5_0"), nullptr};
    pid = fork();
    if (pid == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      execve(SOFTHCA_PEER, argv, envp.data());
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    in = fdopen(to[1], "w");
    out = fdopen(from[0], "r");
  }
  std::string line() {
    char buf[256] = {};
    return std::fgets(buf, sizeof buf, out) ? std::string(buf) : std::string();
  }
  // What the peer said of its end: its QP, its port's LID and its remotely writable buffer.
  struct End {
    unsigned qpn = 0, lid = 0, rkey = 0;
    unsigned long long addr = 0;
  };
  // Reads the peer's hello, tells it `qp`'s number and brings `qp` to RTS towards it.
  End connect(ibv_qp* qp, uint8_t timeout, uint8_t retry) {
    End end;
    std::string hello = line();
    REQUIRE(std::sscanf(hello.c_str(), "qpn %u lid %u addr %llu rkey %u", &end.qpn, &end.lid, &end.addr,
                        &end.rkey) == 4);
    std::fprintf(in, "%u 1\n", qp->qp_num);
    std::fflush(in);
    REQUIRE(line() == "ready\n");
    Path p;
    p.dlid = static_cast<uint16_t>(end.lid);
    REQUIRE(to_init(qp) == 0);
    REQUIRE(to_rtr(qp, end.qpn, p) == 0);
    REQUIRE(to_rts(qp, timeout, retry, 7) == 0);
    return end;
  }
  // The peer's end: its exit signal (0 when it exited normally).
  int wait_signal() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  void kill9() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~Peer() {
    kill9();
    if (in) std::fclose(in);
    if (out) std::fclose(out);
  }
};

}  // namespace

TEST_CASE("RNR: limited retries end in RNR_RETRY_EXC_ERR while rnr_retry 7 waits for the RECV") {
  Loop l;
  SECTION("a limited rnr_retry is exceeded") {
    REQUIRE(connect_pair(l.a, l.b, 18, 7, 2, 1));
    REQUIRE(post(l.a.qp, IBV_WR_SEND, l.a, 0, 32, 0, 0, 1) == 0);
    auto wcs = wait_wcs(l.a.cq, 1);
    REQUIRE(wcs.size() == 1);
    CHECK(wcs[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(l.a.qp->state == IBV_QPS_ERR);
  }
  SECTION("rnr_retry 7 waits for the receiver") {
    REQUIRE(connect_pair(l.a, l.b, 18, 7, 7, 1));
    REQUIRE(post(l.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, l.a, 0, 32, l.b.addr(0), l.b.mr->rkey, 1, 5) == 0);
    CHECK(wait_wcs(l.a.cq, 1, 0.2).empty());  // not before a RECV exists
    REQUIRE(post_recv(l.b, 0, 0, 9) == 0);
    auto wcs = wait_wcs(l.a.cq, 1);
    REQUIRE(wcs.size() == 1);
    CHECK(wcs[0].status == IBV_WC_SUCCESS);
    auto recv = wait_wcs(l.b.cq, 1);
    REQUIRE(recv.size() == 1);
    CHECK(recv[0].imm_data == 5);
  }
}

TEST_CASE("a link drop: retry-exceeded after (retry_cnt + 1) ack timeouts and then flush") {
  Loop l;
  REQUIRE(connect_pair(l.a, l.b, 12, 3, 7));
  REQUIRE(post_recv(l.b, 0, 64, 50) == 0);
  REQUIRE(softhca_control(R"({"fault":"link_drop","device":"mlx5_0","port":1})") == 0);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = 1; id <= 3; ++id) REQUIRE(post(l.a.qp, IBV_WR_SEND, l.a, 0, 64, 0, 0, id) == 0);
  auto wcs = wait_wcs(l.a.cq, 3);
  double took = seconds_since(t0);
  REQUIRE(wcs.size() == 3);
  CHECK(wcs[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(wcs[0].vendor_err == 0x81);
  CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(wcs[2].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(took >= 4 * ack_seconds(12) * 0.9);
  CHECK(took < 20);
  CHECK(softhca_control(R"({"fault":"link_restore","device":"mlx5_0","port":1})") == 0);
  // The receiver's QP is still fine; posting to the failed QP flushes at once.
  REQUIRE(post(l.a.qp, IBV_WR_SEND, l.a, 0, 8, 0, 0, 4) == 0);
  wcs = wait_wcs(l.a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_WR_FLUSH_ERR);
}

TEST_CASE("a killed peer process: the sender gets retry-exceeded within the modelled timeout") {
  Peer peer;
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc a = make_rc(pd, 8192);
  CHECK(peer.connect(a.qp, 14, 3).lid == 5);  // beta's LID from the fabric file
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 1000, 0, 0, 1) == 0);
  auto wcs = wait_wcs(a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(peer.line() == "recv 1000 status 0\n");

  peer.kill9();
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 1000, 0, 0, 2) == 0);
  REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, 0, 100, 0, 0, 3) == 0);
  wcs = wait_wcs(a.cq, 2);
  double took = seconds_since(t0);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(took >= 4 * ack_seconds(14) * 0.9);
  CHECK(took < 30);
  destroy(a);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("a peer with a SOFTHCA_FAULTS kill rule dies after its second message, acked") {
  Peer peer({R"(SOFTHCA_FAULTS=[{"fault":"kill","after_msgs":2}])"});
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc a = make_rc(pd, 8192);
  peer.connect(a.qp, 12, 3);
  for (uint64_t id = 1; id <= 3; ++id) REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 100, 0, 0, id) == 0);
  auto wcs = wait_wcs(a.cq, 3);
  REQUIRE(wcs.size() == 3);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(wcs[1].status == IBV_WC_SUCCESS);  // its ACK left before the process died
  CHECK(wcs[2].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(peer.wait_signal() == SIGKILL);
  destroy(a);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// Mid-message, a requester stops at the stream's high-water mark; the stream may then drain in
// the same round, and nothing comes back from the peer before the message's last segment. The
// engine must go on by itself (it used to sleep in poll for good: no POLLOUT, no ack timer).
TEST_CASE("a multi-segment write to a peer process goes on after its stream drains") {
  Peer peer;
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc a = make_rc(pd, 256 * 1024);
  Peer::End end = peer.connect(a.qp, 31, 7);  // an ack timeout of hours: only the data path can end it
  for (uint64_t id = 1; id <= 3; ++id) {
    REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, a, 0, 256 * 1024, end.addr, end.rkey, id, 7) == 0);
    auto wcs = wait_wcs(a.cq, 1, 10);
    INFO("write " << id);
    REQUIRE(wcs.size() == 1);
    CHECK(wcs[0].status == IBV_WC_SUCCESS);
    CHECK(peer.line() == "recv 262144 status 0\n");
  }
  destroy(a);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("a short link flap is survived: go-back-N retransmission delivers every byte once") {
  Loop l;
  constexpr size_t kLen = 2000;  // four of them fit the 8 KiB buffers
  for (size_t i = 0; i < l.a.buf.size(); ++i) l.a.buf[i] = static_cast<uint8_t>(i * 13 + 1);
  REQUIRE(connect_pair(l.a, l.b, 14, 7, 7));
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(post_recv(l.b, 0, 0, 200 + i) == 0);
  REQUIRE(softhca_control(R"({"fault":"link_drop","device":"mlx5_0","port":1})") == 0);
  for (uint64_t i = 0; i < 4; ++i)
    REQUIRE(post(l.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, l.a, i * kLen, kLen, l.b.addr(i * kLen), l.b.mr->rkey, i,
                 static_cast<uint32_t>(i)) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(softhca_control(R"({"fault":"link_restore","device":"mlx5_0","port":1})") == 0);
  auto sent = wait_wcs(l.a.cq, 4);
  REQUIRE(sent.size() == 4);
  for (const auto& wc : sent) CHECK(wc.status == IBV_WC_SUCCESS);
  auto recv = wait_wcs(l.b.cq, 4);
  REQUIRE(recv.size() == 4);
  for (uint32_t i = 0; i < 4; ++i) CHECK(recv[i].imm_data == i);  // once each, in order
  CHECK(wait_wcs(l.b.cq, 1, 0.1).empty());
  CHECK(std::memcmp(l.a.buf.data(), l.b.buf.data(), 4 * kLen) == 0);
}

TEST_CASE("qp_error: QP_FATAL and posted receives flush") {
  Loop l;
  REQUIRE(connect_pair(l.a, l.b));
  REQUIRE(post_recv(l.b, 0, 64, 61) == 0);
  REQUIRE(post_recv(l.b, 64, 64, 62) == 0);
  char cmd[96];
  std::snprintf(cmd, sizeof cmd, R"({"fault":"qp_error","qpn":%u})", l.b.qp->qp_num);
  REQUIRE(softhca_control(cmd) == 0);
  ibv_async_event ev{};
  REQUIRE(wait_async(l.ctx, ev));
  CHECK(ev.event_type == IBV_EVENT_QP_FATAL);
  CHECK(ev.element.qp == l.b.qp);
  ibv_ack_async_event(&ev);
  auto wcs = wait_wcs(l.b.cq, 2);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].wr_id == 61);
  CHECK(wcs[0].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(wcs[1].wr_id == 62);
  CHECK(softhca_control(R"({"fault":"qp_error","qpn":1})") == -1);  // no such QP: refused, said
  CHECK(softhca_control(R"({"fault":"melt"})") == -1);
}

TEST_CASE("CQ overflow raises CQ_ERR") {
  Loop l;
  ibv_cq* small = ibv_create_cq(l.ctx, 2, nullptr, nullptr, 0);
  REQUIRE(small);
  ibv_qp_init_attr init{};
  init.send_cq = small;
  init.recv_cq = l.a.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 16, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(l.pd, &init);
  REQUIRE(qp);
  REQUIRE(to_init(qp) == 0);
  Path p;
  p.dlid = 1;
  REQUIRE(to_init(l.b.qp) == 0);
  REQUIRE(to_rtr(qp, l.b.qp->qp_num, p) == 0);
  REQUIRE(to_rtr(l.b.qp, qp->qp_num, p) == 0);
  REQUIRE(to_rts(qp) == 0);
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(post(qp, IBV_WR_RDMA_WRITE, l.a, 0, 8, l.b.addr(0), l.b.mr->rkey, i) == 0);
  ibv_async_event ev{};
  REQUIRE(wait_async(l.ctx, ev));
  CHECK(ev.event_type == IBV_EVENT_CQ_ERR);
  CHECK(ev.element.cq == small);
  ibv_ack_async_event(&ev);
  CHECK(wait_wcs(small, 4, 0.2).size() == 2);  // what fitted
  ibv_destroy_qp(qp);
  ibv_destroy_cq(small);
}

TEST_CASE("a completion channel delivers the CQ event through its fd") {
  Loop l;
  ibv_comp_channel* ch = ibv_create_comp_channel(l.ctx);
  REQUIRE(ch);
  ibv_cq* cq = ibv_create_cq(l.ctx, 16, &l, ch, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 16, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(l.pd, &init);
  REQUIRE(qp);
  Path p;
  p.dlid = 1;
  REQUIRE(to_init(qp) == 0);
  REQUIRE(to_init(l.b.qp) == 0);
  REQUIRE(to_rtr(qp, l.b.qp->qp_num, p) == 0);
  REQUIRE(to_rtr(l.b.qp, qp->qp_num, p) == 0);
  REQUIRE(to_rts(qp) == 0);
  REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
  REQUIRE(post(qp, IBV_WR_RDMA_WRITE, l.a, 0, 8, l.b.addr(0), l.b.mr->rkey, 7) == 0);
  pollfd pf{ch->fd, POLLIN, 0};
  REQUIRE(poll(&pf, 1, 10000) == 1);
  ibv_cq* got = nullptr;
  void* cq_ctx = nullptr;
  REQUIRE(ibv_get_cq_event(ch, &got, &cq_ctx) == 0);
  CHECK(got == cq);
  CHECK(cq_ctx == &l);
  ibv_ack_cq_events(got, 1);
  CHECK(cq->comp_events_completed == 1);
  auto wcs = wait_wcs(cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].wr_id == 7);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
}

TEST_CASE("port down and up are async events (also through the control socket)") {
  ibv_context* ctx = open_device("mlx5_1");
  REQUIRE(ctx);
  REQUIRE(softhca_control(R"({"fault":"port_down","device":"mlx5_1","port":1})") == 0);
  ibv_async_event ev{};
  REQUIRE(wait_async(ctx, ev));
  CHECK(ev.event_type == IBV_EVENT_PORT_ERR);
  CHECK(ev.element.port_num == 1);
  ibv_ack_async_event(&ev);
  ibv_port_attr pa{};
  REQUIRE(ibv_query_port(ctx, 1, &pa) == 0);
  CHECK(pa.state == IBV_PORT_DOWN);

  // The same command as a datagram to the process's control socket, as another tool would send it.
  std::string path = env().dir + "/sock/alpha." + std::to_string(getpid()) + ".ctl";
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const char up[] = R"({"fault":"port_up","device":"mlx5_1","port":1})";
  REQUIRE(sendto(fd, up, sizeof up - 1, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr) ==
          static_cast<ssize_t>(sizeof up - 1));
  close(fd);
  REQUIRE(wait_async(ctx, ev));
  CHECK(ev.event_type == IBV_EVENT_PORT_ACTIVE);
  ibv_ack_async_event(&ev);
  REQUIRE(ibv_query_port(ctx, 1, &pa) == 0);
  CHECK(pa.state == IBV_PORT_ACTIVE);
  ibv_close_device(ctx);
}

// Last in the file: the device stays dead for the rest of this process.
TEST_CASE("device fatal: DEVICE_FATAL and flushed QPs and EIO from later verbs") {
  Loop l("mlx5_1");
  ibv_gid dgid{};
  REQUIRE(ibv_query_gid(l.ctx, 1, 1, &dgid) == 0);
  Path p;
  p.sgid_index = 1;
  p.dgid = dgid;  // loopback on the RoCE port
  REQUIRE(to_init(l.a.qp) == 0);
  REQUIRE(to_init(l.b.qp) == 0);
  REQUIRE(to_rtr(l.a.qp, l.b.qp->qp_num, p) == 0);
  REQUIRE(to_rtr(l.b.qp, l.a.qp->qp_num, p) == 0);
  REQUIRE(to_rts(l.a.qp) == 0);
  REQUIRE(to_rts(l.b.qp) == 0);
  REQUIRE(post_recv(l.b, 0, 64, 71) == 0);
  REQUIRE(softhca_control(R"({"fault":"device_fatal","device":"mlx5_1"})") == 0);
  ibv_async_event ev{};
  REQUIRE(wait_async(l.ctx, ev));
  CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL);
  ibv_ack_async_event(&ev);
  auto wcs = wait_wcs(l.b.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_WR_FLUSH_ERR);
  errno = 0;
  CHECK(ibv_alloc_pd(l.ctx) == nullptr);
  CHECK(errno == EIO);
  CHECK(post(l.a.qp, IBV_WR_SEND, l.a, 0, 8) == EIO);
}
