// softhca: a software HCA with the ABI of rdma-core's libibverbs.so.1, for tests.
//
// Why this shape:
// - ibv_post_send/post_recv/poll_cq/req_notify_cq are inline in <infiniband/verbs.h> and jump
//   through context->ops, and the extended entry points (query_port, query_device_ex) through the
//   verbs_context that must sit right before each ibv_context. So every object we hand out embeds
//   the real rdma-core struct as its first member and its ops point into this library; nothing is
//   intercepted by symbol.
// - Each process is one "host" of the fabric file (SOFTHCA_HOST). Hosts talk through a daemonless
//   rendezvous directory (SOFTHCA_DIR): each process listens on one Unix stream socket; each QP
//   publishes <dir>/qp/<host>/<device>/<qpn> naming its owner's socket. A requester resolves the
//   destination at RTR from the fabric (DLID or DGID -> host/device/port) and connects lazily.
//   One stream per process pair keeps per-QP order for free (RC ordering), and the responder
//   copies each payload into its *own* memory, so neither process_vm_writev (ptrace/Yama rules)
//   nor shared mappings of user buffers are needed; a killed peer simply stops answering, which
//   is what RC shows on a real fabric (retry-exceeded after the ack timeout).
// - One engine thread per process does all socket I/O, non-blocking, and owns the protocol state
//   under one mutex; application threads only queue work and wake it. Messages travel as
//   segments of at most kSegmentBytes with go-back-N retransmission from the oldest unacked
//   message after an ack timeout or an RNR NAK, as an RC requester does.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace softhca {

using Clock = std::chrono::steady_clock;

// ---- fabric file -------------------------------------------------------------------------------
enum class GidType { ib, roce_v1, roce_v2 };
struct GidSpec {
  ibv_gid gid{};
  GidType type = GidType::ib;
};
struct PortSpec {
  int num = 1;
  bool ethernet = false;
  bool active = true;
  uint16_t lid = 0, sm_lid = 0;
  uint8_t lmc = 0;
  ibv_mtu mtu = IBV_MTU_4096;
  uint8_t width = 2, speed = 64;  // 4X HDR: 200 Gb/s
  int rail = 0, plane = 0;
  std::vector<GidSpec> gids;
};
struct DeviceSpec {
  std::string name, pci, board_id, ibdev_path;
  bool dmabuf = false;  // ibv_reg_dmabuf_mr works (any fd mmap can map: a memfd stands in)
  uint64_t guid = 0;
  uint32_t vendor_id = 0, vendor_part_id = 0;
  std::vector<PortSpec> ports;
};
struct HostSpec {
  std::string name;
  std::vector<DeviceSpec> devices;
};
enum class Reach { any, rail, plane };
struct Fabric {
  std::vector<HostSpec> hosts;
  Reach reach = Reach::any;
};
struct PortAddr {
  int host = -1, dev = -1, port = -1;  // indices into Fabric (port: index in ports)
  bool valid() const { return host >= 0; }
};
// Parses the fabric JSON; on failure returns nullopt and one line naming the field in `error`.
std::optional<Fabric> parse_fabric(std::string_view text, std::string& error);
bool parse_gid(std::string_view text, ibv_gid& out);
std::string gid_to_string(const ibv_gid& gid);
const PortSpec& port_of(const Fabric& f, const PortAddr& a);
// The port that owns `dlid` (within its LMC range) or `dgid`; invalid when none.
PortAddr find_by_lid(const Fabric& f, uint16_t dlid);
PortAddr find_by_gid(const Fabric& f, const ibv_gid& dgid);
bool reachable(const Fabric& f, const PortAddr& a, const PortAddr& b);

// ---- fault-injection commands ------------------------------------------------------------------
enum class FaultKind {
  qp_error, link_drop, link_restore, port_down, port_up, device_fatal, kill,
  last_first, in_order  // the placement order of RDMA WRITE payloads (Engine::place)
};
struct Command {
  FaultKind kind = FaultKind::qp_error;
  std::string device;
  int port = 1;
  uint32_t qpn = 0;
  uint64_t after_msgs = 0;  // 0: now; else once this process has completed that many more messages
};
// One JSON object or an array of them; nullopt plus one line in `error` when malformed.
std::optional<std::vector<Command>> parse_commands(std::string_view text, std::string& error);

// ---- verbs objects (each embeds the rdma-core struct first) ------------------------------------
struct Context;
struct Device {
  ibv_device ibdev{};
  int host = 0, index = 0;  // fabric indices
};
struct PortRuntime {
  bool active = true;
  bool dropping = false;  // link_drop: packets vanish, the port still looks ACTIVE
};
struct Context {
  verbs_context vctx{};  // vctx.context is the ibv_context handed out
  Device* dev = nullptr;
  int async_wfd = -1;
  std::deque<ibv_async_event> events;
};
struct Pd {
  ibv_pd pd{};
};
struct Mr {
  ibv_mr mr{};
  uint64_t iova = 0;
  unsigned access = 0;
  void* mapping = nullptr;  // a DMA-BUF registration's own mapping of the fd, unmapped at dereg
  size_t mapping_len = 0;
};
struct Channel {
  ibv_comp_channel ch{};
  int wfd = -1;
};
struct Cq {
  ibv_cq cq{};
  std::deque<ibv_wc> wcs;
  std::atomic<size_t> ready{0};  // wcs.size(), readable without the lock by a spinning poller
  size_t capacity = 0;
  bool armed = false, overrun = false;
  uint32_t events_reported = 0;
};
struct SendWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode op = IBV_WR_SEND;
  unsigned flags = 0;
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_data;
  bool is_inline = false;
  uint64_t raddr = 0, len = 0, read_done = 0;
  uint32_t rkey = 0, imm = 0, psn = 0;
  bool local_error = false;
};
struct RecvWr {
  uint64_t wr_id = 0;
  std::vector<ibv_sge> sges;
};
struct InMsg {  // the responder's message in progress
  bool active = false;
  uint32_t psn = 0;
  uint64_t offset = 0, len = 0, raddr = 0;
  uint32_t rkey = 0;
  int opcode = 0;
};
struct ReadResp {
  uint32_t psn = 0, rkey = 0;
  uint64_t raddr = 0, len = 0, offset = 0;
  uint64_t conn = 0;
  uint16_t dev = 0;  // the requester's device index on its host
};
struct Qp {
  ibv_qp qp{};
  Context* ctx = nullptr;
  ibv_qp_cap cap{};
  bool sig_all = false;
  // attributes set by modify_qp
  int port = 1;
  unsigned access = 0;
  uint16_t pkey_index = 0;
  ibv_ah_attr av{};
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t dest_qpn = 0, rq_psn = 0, sq_psn = 0;
  uint8_t min_rnr_timer = 0, timeout = 0, retry_cnt = 0, rnr_retry = 0;
  uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
  // requester
  PortAddr peer;
  std::string peer_file;  // rendezvous file of the destination QP
  uint64_t req_conn = 0;  // the stream to the destination process, once connected
  std::deque<SendWr> sq;  // posted and not yet completed; [0, next_send) were transmitted
  size_t next_send = 0;
  uint64_t next_offset = 0;
  uint32_t next_psn = 0;
  std::optional<Clock::time_point> ack_deadline, rnr_resume;
  int retries_left = 0, rnr_left = 0;
  // responder
  std::deque<RecvWr> rq;
  uint32_t expected_psn = 0;
  InMsg in;
  std::deque<ReadResp> reads;
  uint32_t events_reported = 0;
};

// ---- wire format between processes -------------------------------------------------------------
enum class PktType : uint8_t { request = 1, ack, nak, read_resp };
enum class Nak : uint8_t { none = 0, rnr, remote_access, invalid_request };
enum : uint8_t { kFirst = 1, kLast = 2 };
struct PktHdr {
  uint32_t magic;
  PktType type;
  uint8_t opcode;  // ibv_wr_opcode of the request
  uint8_t flags;
  Nak nak;
  uint16_t dst_dev, src_dev;  // device indices within the destination/source host
  uint32_t dst_qpn, src_qpn;
  uint32_t psn, imm;
  uint32_t rkey, payload;
  uint32_t rnr_timer, reserved;
  uint64_t raddr, msg_len, offset;
};
constexpr uint32_t kMagic = 0x53484341;  // "SHCA"
constexpr uint32_t kSegmentBytes = 64 * 1024;

struct Conn {
  int fd = -1;
  std::vector<uint8_t> in;
  size_t in_len = 0;
  std::deque<std::vector<uint8_t>> out;
  size_t out_off = 0, out_bytes = 0;
};

// ---- the process-wide HCA state ----------------------------------------------------------------
class Engine {
 public:
  static Engine& get();
  // Loads env + fabric once; false (errno set) when there is no usable fabric.
  bool load();

  std::mutex mu;
  Fabric fabric;
  int host = -1;  // this process's host in the fabric
  std::vector<std::unique_ptr<Device>> devices;
  std::string dir, path_log;
  double time_scale = 1.0;
  // A requester stops segmenting while its stream holds this much unsent, and goes on below it
  // (SOFTHCA_HIGH_WATER; small values make that path certain in tests).
  size_t high_water = 4u << 20;
  // `last_first` fault: each RDMA WRITE segment lands its last 64 bytes first, the rest later.
  bool last_first = false;

  // objects
  std::vector<Context*> contexts;
  std::map<uint32_t, Mr*> mrs;  // by key (lkey == rkey)
  uint32_t next_key = 0x1000;
  std::map<uint64_t, Qp*> qps;  // by (device index << 32 | qpn)
  std::condition_variable acked;  // async events acknowledged (destroy_qp waits, as rdma-core does)
  std::vector<std::vector<PortRuntime>> ports;  // per device of this host
  std::vector<bool> fatal;                      // per device of this host

  // lifecycle: the engine thread runs while at least one context is open
  bool open_context(Context* c, std::string& error);
  void close_context(Context* c);
  void wake();

  // called with mu held
  uint32_t alloc_qpn(int dev, std::string& file);
  void post_event(Context* c, ibv_async_event ev);
  void push_wc(Cq* cq, const ibv_wc& wc);
  void qp_to_error(Qp* q);
  void complete_send(Qp* q, SendWr& wr, ibv_wc_status st, uint32_t vendor_err = 0);
  int apply(const Command& cmd, std::string& error);
  void note_message_completed();  // a send acknowledged or a message received: fault rules may fire
  void flush_all();
  // Places an RDMA WRITE payload into this process's memory, in the order the fault rules say.
  void place(uint8_t* dst, const uint8_t* src, size_t n);
  Qp* find_qp(int dev, uint32_t qpn);
  Clock::duration ack_timeout(const Qp* q) const;
  Clock::duration rnr_delay(uint8_t timer) const;
  bool port_passes(int dev, int port) const;

 private:
  void run();
  void start_locked();
  void stop();
  int poll_timeout_ms();
  bool can_send_now(const Qp* q);
  void accept_conns();
  void read_control();
  bool read_conn(uint64_t id, Conn& c);
  bool write_conn(Conn& c);
  void pump();
  void pump_requester(Qp* q);
  void pump_reads(Qp* q);
  void run_timers();
  void handle(uint64_t conn, const PktHdr& h, const uint8_t* payload);
  void on_request(uint64_t conn, Qp* q, const PktHdr& h, const uint8_t* payload);
  bool start_message(uint64_t conn, Qp* q, const PktHdr& h);
  void finish_message(uint64_t conn, Qp* q, const PktHdr& h);
  void on_ack(Qp* q, uint32_t psn);
  void on_nak(Qp* q, const PktHdr& h);
  void on_read_resp(Qp* q, const PktHdr& h, const uint8_t* payload);
  void reply(uint64_t conn, const PktHdr& req, PktType type, Nak nak, const Qp* q);
  Conn* conn_for(Qp* q);
  void close_conn(uint64_t id);
  bool start_listening(std::string& error);
  void send_packet(Conn& c, const PktHdr& h, const uint8_t* payload);

  bool running_ = false, stopping_ = false;
  std::thread thread_;
  int wake_fd_ = -1, listen_fd_ = -1, ctl_fd_ = -1;
  std::string listen_path_, ctl_path_;
  std::map<uint64_t, Conn> conns_;
  std::map<std::string, uint64_t> conn_by_path_;
  uint64_t next_conn_ = 1;
  std::vector<Command> rules_;
  uint64_t messages_completed_ = 0;
};

// Memory helpers shared by the verbs entry points and the engine (mu held).
Mr* lookup_mr(Engine& e, uint32_t key, const ibv_pd* pd);
bool mr_covers(const Mr* m, uint64_t addr, uint64_t len);
uint8_t* mr_ptr(const Mr* m, uint64_t addr);
Qp* to_qp(ibv_qp* qp);
Context* to_ctx(ibv_context* c);
void log_rtr(Engine& e, const Qp* q);

}  // namespace softhca
