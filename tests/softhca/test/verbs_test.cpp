// softhca through the real <infiniband/verbs.h> API: the QP state machine as the kernel checks
// it, data movement (SEND/RECV, WRITE, WRITE_WITH_IMM, READ), and key/bounds/access errors.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "softhca_support.hpp"

using namespace softhca_test;

namespace {
[[maybe_unused]] Env& g_env = env();

void fill(Rc& r, size_t off, size_t len, uint8_t seed) {
  for (size_t i = 0; i < len; ++i) r.buf[off + i] = static_cast<uint8_t>(seed + i * 7);
}
bool same(const Rc& a, size_t aoff, const Rc& b, size_t boff, size_t len) {
  return std::memcmp(a.buf.data() + aoff, b.buf.data() + boff, len) == 0;
}
}  // namespace

TEST_CASE("devices come from the fabric file's host with its ports and GIDs") {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(list);
  REQUIRE(n == 2);  // alpha has mlx5_0 (IB) and mlx5_1 (RoCE); beta's mlx5_2 is not ours
  CHECK(std::string(ibv_get_device_name(list[0])) == "mlx5_0");
  ibv_free_device_list(list);
  ibv_context* ctx = open_device("mlx5_1");
  REQUIRE(ctx);
  ibv_port_attr pa{};
  REQUIRE(ibv_query_port(ctx, 1, &pa) == 0);
  CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(pa.state == IBV_PORT_ACTIVE);
  CHECK(pa.gid_tbl_len == 2);
  ibv_gid_entry e{};
  REQUIRE(ibv_query_gid_ex(ctx, 1, 1, &e, 0) == 0);
  CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V2);
  char text[64];
  inet_ntop(AF_INET6, e.gid.raw, text, sizeof text);
  CHECK(std::string(text) == "::ffff:10.1.0.1");
  CHECK(ibv_query_gid_ex(ctx, 1, 5, &e, 0) == ENODATA);
  CHECK(ibv_query_port(ctx, 2, &pa) == EINVAL);
  ibv_close_device(ctx);
}

TEST_CASE("the QP state machine rejects what the kernel rejects") {
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc r = make_rc(pd, 4096);
  REQUIRE(r.qp);
  CHECK(r.qp->state == IBV_QPS_RESET);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(r.qp, &a, IBV_QP_STATE) == EINVAL);  // RESET -> RTR is not a transition
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  CHECK(ibv_modify_qp(r.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == EINVAL);  // no access flags
  CHECK(ibv_modify_qp(r.qp, &a, kInitMask | IBV_QP_TIMEOUT) == EINVAL);  // timeout is not allowed there
  a.port_num = 2;
  CHECK(ibv_modify_qp(r.qp, &a, kInitMask) == EINVAL);  // the device has one port
  CHECK(post(r.qp, IBV_WR_SEND, r, 0, 8) == EINVAL);      // nothing is sent from RESET
  REQUIRE(to_init(r.qp) == 0);
  CHECK(r.qp->state == IBV_QPS_INIT);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = r.qp->qp_num;
  a.ah_attr.dlid = 1;
  a.ah_attr.port_num = 1;
  CHECK(ibv_modify_qp(r.qp, &a, kRtrMask & ~IBV_QP_MIN_RNR_TIMER) == EINVAL);
  a.ah_attr.dlid = 0;
  CHECK(ibv_modify_qp(r.qp, &a, kRtrMask) == EINVAL);  // an IB path needs a DLID
  Path p;
  p.dlid = 1;
  REQUIRE(to_rtr(r.qp, r.qp->qp_num, p) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  CHECK(ibv_modify_qp(r.qp, &a, kRtsMask & ~IBV_QP_RETRY_CNT) == EINVAL);
  a.retry_cnt = 8;
  CHECK(ibv_modify_qp(r.qp, &a, kRtsMask) == EINVAL);  // retry_cnt is 3 bits
  CHECK(post(r.qp, IBV_WR_SEND, r, 0, 8) == EINVAL);    // RTR receives only
  REQUIRE(to_rts(r.qp) == 0);
  ibv_qp_attr got{};
  ibv_qp_init_attr init{};
  REQUIRE(ibv_query_qp(r.qp, &got, IBV_QP_STATE | IBV_QP_CAP, &init) == 0);
  CHECK(got.qp_state == IBV_QPS_RTS);
  CHECK(got.cap.max_inline_data >= 64);
  a = {};
  a.qp_state = IBV_QPS_SQD;
  CHECK(ibv_modify_qp(r.qp, &a, IBV_QP_STATE) == 0);
  a.qp_state = IBV_QPS_RTS;
  CHECK(ibv_modify_qp(r.qp, &a, IBV_QP_STATE) == 0);
  a.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(r.qp, &a, IBV_QP_STATE) == 0);
  CHECK(r.qp->state == IBV_QPS_RESET);
  destroy(r);
  CHECK(ibv_dealloc_pd(pd) == 0);
  ibv_close_device(ctx);
}

TEST_CASE("RoCE paths need a GRH and a valid GID index and a reachable GID") {
  ibv_context* ctx = open_device("mlx5_1");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc r = make_rc(pd, 4096);
  REQUIRE(to_init(r.qp) == 0);
  Path p;
  CHECK(to_rtr(r.qp, 0x100, p) == EINVAL);  // no GRH on an Ethernet port
  p.sgid_index = 2;
  REQUIRE(inet_pton(AF_INET6, "::ffff:10.1.0.2", p.dgid.raw) == 1);
  CHECK(to_rtr(r.qp, 0x100, p) == EINVAL);  // the table has two entries
  p.sgid_index = 1;
  REQUIRE(inet_pton(AF_INET6, "::ffff:10.2.0.2", p.dgid.raw) == 1);
  CHECK(to_rtr(r.qp, 0x100, p) == ETIMEDOUT);  // rail 2 is not reachable from rail 1
  REQUIRE(inet_pton(AF_INET6, "::ffff:10.1.0.2", p.dgid.raw) == 1);
  CHECK(to_rtr(r.qp, 0x100, p) == 0);
  destroy(r);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("SEND/RECV and RDMA WRITE and WRITE_WITH_IMM and RDMA READ move the bytes in order") {
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  constexpr size_t kBig = 300 * 1024;  // several 64 KiB segments
  Rc a = make_rc(pd, 2 * kBig), b = make_rc(pd, 2 * kBig);
  REQUIRE(connect_pair(a, b));

  fill(a, 0, kBig, 3);
  REQUIRE(post_recv(b, 0, kBig, 77) == 0);
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, kBig, 0, 0, 1) == 0);
  auto recv = wait_wcs(b.cq, 1);
  REQUIRE(recv.size() == 1);
  CHECK(recv[0].status == IBV_WC_SUCCESS);
  CHECK(recv[0].opcode == IBV_WC_RECV);
  CHECK(recv[0].wr_id == 77);
  CHECK(recv[0].byte_len == kBig);
  CHECK(recv[0].src_qp == a.qp->qp_num);
  CHECK(same(a, 0, b, 0, kBig));
  auto sent = wait_wcs(a.cq, 1);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].opcode == IBV_WC_SEND);

  // WRITE then WRITE_WITH_IMM: the immediate arrives with a RECV completion after both writes.
  fill(a, kBig, kBig, 9);
  REQUIRE(post_recv(b, 0, 0, 78) == 0);
  REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, kBig, 1000, b.addr(kBig), b.mr->rkey, 2) == 0);
  REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, a, kBig + 1000, kBig - 1000, b.addr(kBig + 1000), b.mr->rkey, 3,
               htonl(0xC0FFEE)) == 0);
  recv = wait_wcs(b.cq, 1);
  REQUIRE(recv.size() == 1);
  CHECK(recv[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK((recv[0].wc_flags & IBV_WC_WITH_IMM) != 0);
  CHECK(ntohl(recv[0].imm_data) == 0xC0FFEE);
  CHECK(recv[0].wr_id == 78);
  CHECK(same(a, kBig, b, kBig, kBig));
  sent = wait_wcs(a.cq, 2);
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].wr_id == 2);  // completions in posting order
  CHECK(sent[1].wr_id == 3);
  CHECK(sent[1].opcode == IBV_WC_RDMA_WRITE);

  // READ pulls b's bytes into a.
  fill(b, 0, kBig, 42);
  std::memset(a.buf.data(), 0, kBig);
  REQUIRE(post(a.qp, IBV_WR_RDMA_READ, a, 0, kBig, b.addr(0), b.mr->rkey, 4) == 0);
  sent = wait_wcs(a.cq, 1);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == IBV_WC_SUCCESS);
  CHECK(sent[0].opcode == IBV_WC_RDMA_READ);
  CHECK(sent[0].byte_len == kBig);
  CHECK(same(a, 0, b, 0, kBig));

  // Inline and unsignaled: only the signaled one completes.
  REQUIRE(post_recv(b, 0, 64, 79) == 0);
  REQUIRE(post_recv(b, 64, 64, 80) == 0);
  const char msg[] = "inline bytes";
  ibv_sge sge{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 5;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  REQUIRE(ibv_post_send(a.qp, &wr, &bad) == 0);
  wr.wr_id = 6;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  REQUIRE(ibv_post_send(a.qp, &wr, &bad) == 0);
  recv = wait_wcs(b.cq, 2);
  REQUIRE(recv.size() == 2);
  CHECK(std::string(reinterpret_cast<char*>(b.buf.data())) == msg);
  sent = wait_wcs(a.cq, 1);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].wr_id == 6);
  destroy(a);
  destroy(b);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("a bad rkey or an out-of-bounds write or a missing permission is a remote access error") {
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc a = make_rc(pd, 8192);
  Rc b = make_rc(pd, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);  // no remote read

  SECTION("an rkey the responder never registered") {
    REQUIRE(connect_pair(a, b));
    REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, 0, 64, b.addr(0), b.mr->rkey + 1, 1) == 0);
  }
  SECTION("a write past the end of the MR") {
    REQUIRE(connect_pair(a, b));
    REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, 0, 64, b.addr(8192 - 32), b.mr->rkey, 1) == 0);
  }
  SECTION("a read of an MR without remote read") {
    REQUIRE(connect_pair(a, b));
    REQUIRE(post(a.qp, IBV_WR_RDMA_READ, a, 0, 64, b.addr(0), b.mr->rkey, 1) == 0);
  }
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 8, 0, 0, 2) == 0);  // behind the failing one: flushed
  auto wcs = wait_wcs(a.cq, 2);
  REQUIRE(wcs.size() == 2);
  CHECK(wcs[0].wr_id == 1);
  CHECK(wcs[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(wcs[1].wr_id == 2);
  CHECK(wcs[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(a.qp->state == IBV_QPS_ERR);
  ibv_async_event ev{};
  REQUIRE(wait_async(ctx, ev));  // the responder's QP reports the violation
  CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR);
  CHECK(ev.element.qp == b.qp);
  ibv_ack_async_event(&ev);
  destroy(a);
  destroy(b);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// A memfd stands in for a GPU buffer's DMA-BUF: the importer (softhca, like a NIC) reaches the
// pages through the fd, and the exporter sees the bytes through its own mapping.
TEST_CASE("DMA-BUF: EOPNOTSUPP without it, EBADF for fd -1 with it, and writes land in the exporter's pages") {
  ibv_context* plain = open_device("mlx5_1");  // no "dmabuf" in the fabric file
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE((plain && ctx));
  ibv_pd* plain_pd = ibv_alloc_pd(plain);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  REQUIRE((plain_pd && pd));
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(plain_pd, 0, 4096, 0, -1, kAllAccess) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, kAllAccess) == nullptr);
  CHECK(errno == EBADF);  // NCCL's probe: "supported, but not this fd"

  constexpr size_t kPages = 3 * 4096, kOffset = 4096 + 100, kLen = 6000;
  constexpr uint64_t kIova = 0x7f00'0000'0000;
  int fd = memfd_create("softhca-dmabuf", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, kPages) == 0);
  auto* exporter = static_cast<uint8_t*>(mmap(nullptr, kPages, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(exporter != MAP_FAILED);
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, kOffset, kLen, kIova, fd, kAllAccess);
  REQUIRE(mr);
  close(fd);  // NCCL closes it right after the call; the registration keeps the pages
  CHECK(mr->length == kLen);
  Rc a = make_rc(pd, 8192), b = make_rc(pd, 64);
  REQUIRE(connect_pair(a, b));
  fill(a, 0, 2000, 11);
  REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, 0, 2000, kIova + 16, mr->rkey, 1) == 0);
  auto wcs = wait_wcs(a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(exporter + kOffset + 16, a.buf.data(), 2000) == 0);
  // READ back what the exporter wrote, and a write past the registered length is refused.
  std::memset(exporter + kOffset + kLen - 64, 0x5a, 64);
  REQUIRE(post(a.qp, IBV_WR_RDMA_READ, a, 4096, 64, kIova + kLen - 64, mr->rkey, 2) == 0);
  wcs = wait_wcs(a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(a.buf[4096] == 0x5a);
  CHECK(a.buf[4096 + 63] == 0x5a);
  REQUIRE(post(a.qp, IBV_WR_RDMA_WRITE, a, 0, 64, kIova + kLen - 32, mr->rkey, 3) == 0);
  wcs = wait_wcs(a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_REM_ACCESS_ERR);
  ibv_async_event ev{};
  if (wait_async(ctx, ev, 2000)) ibv_ack_async_event(&ev);
  destroy(a);
  destroy(b);
  CHECK(ibv_dereg_mr(mr) == 0);
  munmap(exporter, kPages);
  ibv_dealloc_pd(pd);
  ibv_dealloc_pd(plain_pd);
  ibv_close_device(ctx);
  ibv_close_device(plain);
}

TEST_CASE("a bad lkey is a local protection error and reg_mr checks access flags") {
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<uint8_t> mem(4096);
  errno = 0;
  CHECK(ibv_reg_mr(pd, mem.data(), mem.size(), int{IBV_ACCESS_REMOTE_WRITE}) == nullptr);  // needs local write
  CHECK(errno == EINVAL);
  Rc a = make_rc(pd, 4096), b = make_rc(pd, 4096);
  REQUIRE(connect_pair(a, b));
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 16, 0, 0, 1, 0, 0xdead) == 0);
  auto wcs = wait_wcs(a.cq, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_LOC_PROT_ERR);
  destroy(a);
  destroy(b);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("a SEND longer than the posted receive fails on both sides") {
  ibv_context* ctx = open_device("mlx5_0");
  REQUIRE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Rc a = make_rc(pd, 4096), b = make_rc(pd, 4096);
  REQUIRE(connect_pair(a, b));
  REQUIRE(post_recv(b, 0, 100, 9) == 0);
  REQUIRE(post(a.qp, IBV_WR_SEND, a, 0, 200, 0, 0, 1) == 0);
  auto sent = wait_wcs(a.cq, 1);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == IBV_WC_REM_INV_REQ_ERR);
  auto recv = wait_wcs(b.cq, 1);
  REQUIRE(recv.size() == 1);
  CHECK(recv[0].status == IBV_WC_LOC_LEN_ERR);
  destroy(a);
  destroy(b);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

TEST_CASE("every symbol NCCL resolves by version is there at that version") {
  void* h = dlopen(SOFTHCA_LIB_DIR "/libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  // NCCL's required set (ibvsymbols.cc) at IBVERBS_1.1, and its optional ones at later versions.
  const char* required[] = {"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name",
                            "ibv_open_device",     "ibv_close_device",     "ibv_query_device",
                            "ibv_query_port",      "ibv_query_gid",        "ibv_alloc_pd",
                            "ibv_dealloc_pd",      "ibv_reg_mr",           "ibv_dereg_mr",
                            "ibv_create_cq",       "ibv_destroy_cq",       "ibv_create_qp",
                            "ibv_modify_qp",       "ibv_query_qp",         "ibv_destroy_qp",
                            "ibv_get_async_event", "ibv_ack_async_event",  "ibv_event_type_str",
                            "ibv_wc_status_str",   "ibv_fork_init"};
  for (const char* name : required) {
    INFO(name);
    CHECK(dlvsym(h, name, "IBVERBS_1.1") != nullptr);
  }
  CHECK(dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8") != nullptr);
  CHECK(dlvsym(h, "ibv_query_ece", "IBVERBS_1.10") != nullptr);
  CHECK(dlvsym(h, "ibv_set_ece", "IBVERBS_1.10") != nullptr);
  CHECK(dlvsym(h, "_ibv_query_gid_ex", "IBVERBS_1.11") != nullptr);
  CHECK(dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12") != nullptr);
  CHECK(dlvsym(h, "ibv_query_port_speed", "IBVERBS_1.16") == nullptr);  // absent from rdma-core 44 too
  dlclose(h);
}

TEST_CASE("the library exports verbs names only") {
  FILE* nm = popen("nm -D --defined-only " SOFTHCA_LIB_DIR "/libibverbs.so.1", "r");
  REQUIRE(nm);
  char line[512];
  int exported = 0;
  while (std::fgets(line, sizeof line, nm)) {
    std::string l(line);
    if (l.find(" A ") != std::string::npos) continue;  // the version nodes themselves
    std::string name = l.substr(l.rfind(' ') + 1);
    INFO(name);
    bool ours = name.rfind("ibv_", 0) == 0 || name.rfind("_ibv_", 0) == 0 || name.rfind("mult_to_", 0) == 0 ||
                name.rfind("mbps_to_", 0) == 0 || name.rfind("softhca_control", 0) == 0;
    CHECK(ours);
    ++exported;
  }
  pclose(nm);
  CHECK(exported > 60);
}
