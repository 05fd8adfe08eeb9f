// The raw-verbs baseline of the IB transport's performance targets (README "Path pinning" and the
// IB transport's section): the same two patterns `astral netbench` runs, as a plain RC verbs loop
// between two processes that softhca treats as two hosts (SOFTHCA_HOST), on one machine:
//   pingpong 8 B   WRITE_WITH_IMM of 8 bytes each way, round trip p50 / p99
//   stream 4 MiB   WRITE_WITH_IMM of 4 MiB messages, a window in flight, GB/s
// The plugin's targets are ratios against these figures measured in the same invocation (8 B
// pingpong <= 1.3x, 4 MiB stream >= 0.9x); softhca's absolute speed is only context.
//
// Usage: bench_ib_verbs [--device mlx5_1] [--hosts alpha,beta] [--fabric F] [--repeat 5]
//                       [--iters 2000] [--messages 32] [--window 4]
// The library is softhca (linked from the test build); LD_LIBRARY_PATH to rdma-core's directory
// runs the same loop on real NICs of one host.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr size_t kStreamBytes = size_t(4) << 20;
constexpr size_t kPingBytes = 8;
constexpr size_t kPingOffset = kStreamBytes;  // pingpong slot after the stream region
constexpr int kRecvDepth = 128;
constexpr uint32_t kAckOk = 0xAC0C, kAckBad = 0xBAD0;
constexpr double kWaitSeconds = 60;  // a bound against hangs, not a speed check

struct Options {
  std::string device = "mlx5_1";
  std::string host_a = "alpha", host_b = "beta";
  std::string fabric;
  int repeat = 5, iters = 2000, messages = 32, window = 4;
};

// What one side of the comparison measured (medians over the repeats).
struct Figures {
  double ping_p50_us = 0, ping_p99_us = 0, stream_gb_per_s = 0;
  int verified = 0;  // 1 when every check of the data passed
};

// What the other process needs to reach this one's QP and buffer.
struct QpInfo {
  uint32_t qpn = 0, psn = 0, rkey = 0;
  uint16_t lid = 0;
  int16_t gid_index = -1;  // >= 0: RoCE, reach `gid` through a GRH
  uint8_t gid[16] = {};
  uint64_t addr = 0;
};

bool write_all(int fd, const void* data, size_t n) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w, n -= size_t(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n, int timeout_ms = int(kWaitSeconds * 1000)) {
  auto p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) != 1) return false;
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r, n -= size_t(r);
  }
  return true;
}

// The first IPv4-mapped GID (NCCL's default address family), else index 0.
int pick_gid(ibv_context* ctx, int gids) {
  for (int i = 0; i < gids; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, 1, i, &g) != 0) continue;
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g.raw, kMapped, sizeof kMapped) == 0) return i;
  }
  return 0;
}

// One host's end: device, PD, CQ, one RC QP and a buffer of stream + pingpong slots.
class RcEnd {
 public:
  ~RcEnd() {
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    if (mr_) ibv_dereg_mr(mr_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  std::string open(const std::string& device, int window) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) return std::string("no RDMA devices: ") + std::strerror(errno);
    for (int i = 0; i < n && !ctx_; ++i)
      if (device == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!ctx_) return "no device " + device + " among the " + std::to_string(n) + " listed";
    ibv_port_attr port{};
    if (ibv_query_port(ctx_, 1, &port) != 0 || port.state != IBV_PORT_ACTIVE) return device + " port 1 is not ACTIVE";
    info_.lid = port.lid;
    if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
      info_.gid_index = int16_t(pick_gid(ctx_, port.gid_tbl_len));
      ibv_gid g{};
      ibv_query_gid(ctx_, 1, info_.gid_index, &g);
      std::memcpy(info_.gid, g.raw, sizeof g.raw);
    }
    buf_.assign(kStreamBytes + 64, 0);
    pd_ = ibv_alloc_pd(ctx_);
    mr_ = pd_ ? ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : nullptr;
    cq_ = ibv_create_cq(ctx_, 2 * kRecvDepth + 2 * window + 8, nullptr, nullptr, 0);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap = {uint32_t(window + 4), kRecvDepth, 1, 1, 0};
    qp_ = pd_ && cq_ ? ibv_create_qp(pd_, &init) : nullptr;
    if (!mr_ || !qp_) return "cannot create PD/MR/CQ/QP on " + device;
    info_.qpn = qp_->qp_num;
    info_.psn = uint32_t(getpid()) & 0xFFFFFF;
    info_.rkey = mr_->rkey;
    info_.addr = reinterpret_cast<uintptr_t>(buf_.data());
    return {};
  }

  const QpInfo& info() const { return info_; }
  uint8_t* data() { return buf_.data(); }

  std::string connect(const QpInfo& peer) {
    peer_ = peer;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return "modify_qp INIT failed";
    for (int i = 0; i < kRecvDepth; ++i)
      if (!post_recv()) return "post_recv failed";
    ibv_qp_attr rtr = rtr_attr(peer);
    if (ibv_modify_qp(qp_, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return std::string("modify_qp RTR failed: ") + std::strerror(errno);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = info_.psn;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
      return "modify_qp RTS failed";
    return {};
  }

  bool post_recv() {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 0;
    wr.num_sge = 0;  // WRITE_WITH_IMM consumes a receive but places no data through it
    return ibv_post_recv(qp_, &wr, &bad) == 0;
  }

  bool write_imm(size_t offset, size_t bytes, uint32_t imm) {
    ibv_sge sge{info_.addr + offset, uint32_t(bytes), mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = peer_.addr + offset;
    wr.wr.rdma.rkey = peer_.rkey;
    if (ibv_post_send(qp_, &wr, &bad) != 0) return false;
    ++sends_in_flight_;
    return true;
  }

  // Busy-polls until a receive completes (reposting its receive); send completions seen on the
  // way are counted off. nullopt on an error completion or after kWaitSeconds.
  std::optional<uint32_t> wait_recv() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
    for (;;) {
      ibv_wc wc[8];
      int n = ibv_poll_cq(cq_, 8, wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(wc[i]);
        if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
          --sends_in_flight_;
          continue;
        }
        pending_imm_.push_back(wc[i].imm_data);
      }
      if (!pending_imm_.empty()) {
        uint32_t imm = pending_imm_.front();
        pending_imm_.erase(pending_imm_.begin());
        if (!post_recv()) return std::nullopt;
        return imm;
      }
      if (n == 0 && std::chrono::steady_clock::now() > deadline) return std::nullopt;
    }
  }

  // Waits until at most `limit` sends are unacknowledged.
  bool drain_sends(int limit) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
    while (sends_in_flight_ > limit) {
      ibv_wc wc[8];
      int n = ibv_poll_cq(cq_, 8, wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) return fail_wc(wc[i]).has_value();
        if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) pending_imm_.push_back(wc[i].imm_data);
        else --sends_in_flight_;
      }
      if (n == 0 && std::chrono::steady_clock::now() > deadline) return false;
    }
    return true;
  }

 private:
  ibv_qp_attr rtr_attr(const QpInfo& peer) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = 1;
    if (peer.gid_index >= 0) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, sizeof peer.gid);
      a.ah_attr.grh.sgid_index = uint8_t(info_.gid_index);
      a.ah_attr.grh.hop_limit = 255;
    }
    return a;
  }

  std::optional<uint32_t> fail_wc(const ibv_wc& wc) {
    std::fprintf(stderr, "bench_ib_verbs: completion error %s (vendor_err %#x) on QP %u\n",
                 ibv_wc_status_str(wc.status), wc.vendor_err, info_.qpn);
    return std::nullopt;
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<uint8_t> buf_;
  QpInfo info_, peer_;
  int sends_in_flight_ = 0;
  std::vector<uint32_t> pending_imm_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

void fill_pattern(uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(i * 131 + (i >> 12));
}

bool check_pattern(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != uint8_t(i * 131 + (i >> 12))) return false;
  return true;
}

// --- The two roles. The initiator ("alpha") measures; the responder ("beta") echoes and acks.

// Round trips of 8 B; returns the samples in microseconds, empty on failure.
std::vector<double> initiator_pingpong(RcEnd& end, int iters) {
  std::vector<double> rtt;
  const int warmup = std::max(10, iters / 10);
  for (int i = 0; i < warmup + iters; ++i) {
    std::memcpy(end.data() + kPingOffset, &i, sizeof i);
    auto t0 = std::chrono::steady_clock::now();
    if (!end.write_imm(kPingOffset, kPingBytes, uint32_t(i))) return {};
    auto imm = end.wait_recv();
    auto t1 = std::chrono::steady_clock::now();
    int echoed = -1;
    std::memcpy(&echoed, end.data() + kPingOffset, sizeof echoed);
    if (!imm || *imm != uint32_t(i) || echoed != i || !end.drain_sends(2)) return {};
    if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return rtt;
}

bool responder_pingpong(RcEnd& end, int iters) {
  const int warmup = std::max(10, iters / 10);
  for (int i = 0; i < warmup + iters; ++i) {
    auto imm = end.wait_recv();
    if (!imm || !end.write_imm(kPingOffset, kPingBytes, *imm) || !end.drain_sends(2)) return false;
  }
  return true;
}

// GB/s of `messages` 4 MiB writes with `window` in flight, timed to the responder's ack; 0 on failure.
double initiator_stream(RcEnd& end, const Options& o, bool* verified) {
  fill_pattern(end.data(), kStreamBytes);
  auto t0 = std::chrono::steady_clock::now();
  for (int m = 0; m < o.messages; ++m)
    if (!end.drain_sends(o.window - 1) || !end.write_imm(0, kStreamBytes, uint32_t(m))) return 0;
  auto ack = end.wait_recv();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ack || !end.drain_sends(0)) return 0;
  *verified = *verified && *ack == kAckOk;
  return double(o.messages) * double(kStreamBytes) / seconds / 1e9;
}

bool responder_stream(RcEnd& end, const Options& o) {
  bool in_order = true;
  for (int m = 0; m < o.messages; ++m) {
    auto imm = end.wait_recv();
    if (!imm) return false;
    in_order = in_order && *imm == uint32_t(m);
  }
  bool intact = check_pattern(end.data(), kStreamBytes);
  std::memset(end.data(), 0, kStreamBytes);  // the next repeat must write it again
  return end.write_imm(kPingOffset, kPingBytes, in_order && intact ? kAckOk : kAckBad) && end.drain_sends(0);
}

// One host process: open, exchange QP info over `oob`, connect, run every repeat. The initiator
// writes its Figures to `result_fd`.
int run_host(bool initiator, const Options& o, int oob, int result_fd) {
  RcEnd end;
  std::string error = end.open(o.device, o.window);
  QpInfo peer;
  if (error.empty() && (!write_all(oob, &end.info(), sizeof(QpInfo)) || !read_all(oob, &peer, sizeof peer)))
    error = "the other process did not answer";
  if (error.empty()) error = end.connect(peer);
  char ready = 1;
  if (error.empty() && (!write_all(oob, &ready, 1) || !read_all(oob, &ready, 1))) error = "no ready from the peer";
  if (!error.empty()) {
    std::fprintf(stderr, "bench_ib_verbs (%s): %s\n", initiator ? o.host_a.c_str() : o.host_b.c_str(), error.c_str());
    return 1;
  }
  std::vector<double> p50, p99, gbps;
  bool verified = true;
  for (int r = 0; r < o.repeat; ++r) {
    if (!initiator) {
      if (!responder_pingpong(end, o.iters) || !responder_stream(end, o)) return 1;
      continue;
    }
    std::vector<double> rtt = initiator_pingpong(end, o.iters);
    double rate = rtt.empty() ? 0 : initiator_stream(end, o, &verified);
    if (rate <= 0) return 1;
    p50.push_back(percentile(rtt, 0.5));
    p99.push_back(percentile(rtt, 0.99));
    gbps.push_back(rate);
  }
  if (!initiator) return 0;
  Figures f{median(p50), median(p99), median(gbps), verified ? 1 : 0};
  return write_all(result_fd, &f, sizeof f) ? 0 : 1;
}

constexpr const char* kUsage =
    "usage: bench_ib_verbs [--device D] [--hosts A,B] [--fabric F] [--repeat N] [--iters N] "
    "[--messages N] [--window N]\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_ib_verbs: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

int positive(const char* flag, const char* value) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || v < 1 || v > 1000000)
    usage_error(std::string(flag) + " '" + value + "': expected an integer in [1, 1000000]");
  return int(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(flag + ": missing value or unknown option");
    const char* v = argv[++i];
    if (flag == "--device") o.device = v;
    else if (flag == "--fabric") o.fabric = v;
    else if (flag == "--repeat") o.repeat = positive(argv[i - 1], v);
    else if (flag == "--iters") o.iters = positive(argv[i - 1], v);
    else if (flag == "--messages") o.messages = positive(argv[i - 1], v);
    else if (flag == "--window") o.window = std::min(64, positive(argv[i - 1], v));
    else if (flag == "--hosts") {
      std::string h = v;
      auto comma = h.find(',');
      if (comma == std::string::npos || comma == 0 || comma + 1 == h.size()) usage_error("--hosts: expected A,B");
      o.host_a = h.substr(0, comma), o.host_b = h.substr(comma + 1);
    } else usage_error("unknown option " + flag);
  }
  return o;
}

pid_t spawn_host(bool initiator, const Options& o, int oob, int result_fd, int close_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  close(close_fd);
  setenv("SOFTHCA_HOST", (initiator ? o.host_a : o.host_b).c_str(), 1);
  _exit(run_host(initiator, o, oob, result_fd));
}

// The raw side: two host processes over softhca; nullopt when either failed (its stderr says why).
std::optional<Figures> measure_raw_verbs(const Options& o) {
  int oob[2], result[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, oob) != 0 || pipe(result) != 0) return std::nullopt;
  pid_t responder = spawn_host(false, o, oob[1], -1, oob[0]);
  pid_t initiator = spawn_host(true, o, oob[0], result[1], oob[1]);
  close(oob[0]), close(oob[1]), close(result[1]);
  Figures f;
  const int budget_ms = int(kWaitSeconds * 1000) * (o.repeat + 2);
  bool got = read_all(result[0], &f, sizeof f, budget_ms);
  close(result[0]);
  for (pid_t pid : {initiator, responder}) {
    if (!got) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    got = got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!got) return std::nullopt;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::string fabric = !o.fabric.empty() ? o.fabric : std::getenv("SOFTHCA_FABRIC") ? std::getenv("SOFTHCA_FABRIC") : "";
#ifdef ASTRAL_SOFTHCA_FABRIC
  if (fabric.empty()) fabric = ASTRAL_SOFTHCA_FABRIC;
#endif
  if (!fabric.empty()) setenv("SOFTHCA_FABRIC", fabric.c_str(), 1);
  char dir[] = "/tmp/abv-XXXXXX";  // short: softhca's Unix socket paths live under it
  if (!mkdtemp(dir)) usage_error(std::string("cannot create a rendezvous directory: ") + std::strerror(errno));
  setenv("SOFTHCA_DIR", dir, 1);
  std::optional<Figures> raw = measure_raw_verbs(o);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!raw) {
    std::fprintf(stderr, "bench_ib_verbs: the raw verbs run failed (see above)\n");
    return 1;
  }
  std::printf("raw verbs on %s (%s -> %s, %s), median of %d:\n", o.device.c_str(), o.host_a.c_str(),
              o.host_b.c_str(), fabric.empty() ? "real libibverbs" : fabric.c_str(), o.repeat);
  std::printf("  pingpong 8 B:  p50 %.2f us round trip (p99 %.2f), %d iterations\n", raw->ping_p50_us,
              raw->ping_p99_us, o.iters);
  std::printf("  stream 4 MiB:  %.3f GB/s, %d messages, %d in flight\n", raw->stream_gb_per_s, o.messages,
              o.window);
  std::printf("  data checks:   %s\n", raw->verified ? "ok" : "FAILED");
  return raw->verified ? 0 : 1;
}
