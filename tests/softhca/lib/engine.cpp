// The engine: environment and fabric loading, the rendezvous directory, the listening and control
// sockets, and the one thread that does every socket read and write (design: internal.hpp).
// The rendezvous directory is created 0700, so only the same user can reach the sockets in it:
// that is the authentication of peers (filesystem permissions on the Unix socket path).
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "internal.hpp"

namespace softhca {
namespace {

constexpr size_t kInBuffer = 4 * (sizeof(PktHdr) + kSegmentBytes);

bool read_text(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0700);
}

bool fill_sockaddr(const std::string& path, sockaddr_un& a) {
  a = sockaddr_un{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return true;
}

int bind_socket(const std::string& path, int type, std::string& error) {
  sockaddr_un a;
  if (!fill_sockaddr(path, a)) {
    error = "SOFTHCA_DIR is too long for a Unix socket path (" + path + ")";
    return -1;
  }
  int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  unlink(path.c_str());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      (type == SOCK_STREAM && listen(fd, 128) != 0)) {
    error = "cannot listen on " + path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

Engine& Engine::get() {
  static Engine* engine = new Engine;  // never destroyed: the thread may outlive static teardown
  return *engine;
}

bool Engine::load() {
  std::lock_guard lock(mu);
  static int state = 0;  // 0 not tried, 1 loaded, else the errno to report
  if (state == 1) return true;
  if (state != 0) {
    errno = state;
    return false;
  }
  state = ENOSYS;
  const char* path = std::getenv("SOFTHCA_FABRIC");
  if (!path || !*path) {
    errno = ENOSYS;  // what rdma-core reports on a kernel without RDMA
    return false;
  }
  std::string text, error;
  if (!read_text(path, text)) {
    std::fprintf(stderr, "softhca: SOFTHCA_FABRIC=%s: cannot read the file\n", path);
    errno = state = ENOENT;
    return false;
  }
  auto parsed = parse_fabric(text, error);
  if (!parsed) {
    std::fprintf(stderr, "softhca: SOFTHCA_FABRIC=%s: %s\n", path, error.c_str());
    errno = state = EINVAL;
    return false;
  }
  fabric = std::move(*parsed);
  const char* h = std::getenv("SOFTHCA_HOST");
  std::string want = h && *h ? h : (fabric.hosts.empty() ? "" : fabric.hosts[0].name);
  for (size_t i = 0; i < fabric.hosts.size(); ++i)
    if (fabric.hosts[i].name == want) host = static_cast<int>(i);
  if (host < 0) {
    std::fprintf(stderr, "softhca: SOFTHCA_HOST=%s is not a host of the fabric file: no devices\n", want.c_str());
    fabric.hosts.push_back(HostSpec{want, {}});  // keeps every index valid; lists no device
    host = static_cast<int>(fabric.hosts.size()) - 1;
  }
  if (const char* s = std::getenv("SOFTHCA_TIME_SCALE"); s && *s) {
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (*end || !(v > 0) || v > 1e6) {
      std::fprintf(stderr, "softhca: SOFTHCA_TIME_SCALE=%s: expected a positive number\n", s);
      errno = state = EINVAL;
      return false;
    }
    time_scale = v;
  }
  if (const char* s = std::getenv("SOFTHCA_HIGH_WATER"); s && *s) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (*end || v < 1 || v > (1ull << 30)) {
      std::fprintf(stderr, "softhca: SOFTHCA_HIGH_WATER=%s: expected bytes in [1, 2^30]\n", s);
      errno = state = EINVAL;
      return false;
    }
    high_water = static_cast<size_t>(v);
  }
  const char* d = std::getenv("SOFTHCA_DIR");
  dir = d && *d ? d : "/tmp/softhca-" + std::to_string(getuid());
  if (const char* p = std::getenv("SOFTHCA_PATH_LOG")) path_log = p;
  if (const char* f = std::getenv("SOFTHCA_FAULTS"); f && *f) {
    std::string rules = f;
    if (rules[0] == '@' && !read_text(rules.substr(1), rules)) {
      std::fprintf(stderr, "softhca: SOFTHCA_FAULTS=%s: cannot read the file\n", f);
      errno = state = ENOENT;
      return false;
    }
    auto cmds = parse_commands(rules, error);
    if (!cmds) {
      std::fprintf(stderr, "softhca: SOFTHCA_FAULTS: %s\n", error.c_str());
      errno = state = EINVAL;
      return false;
    }
    rules_ = std::move(*cmds);
  }
  const HostSpec& hs = fabric.hosts[host];
  for (size_t i = 0; i < hs.devices.size(); ++i) {
    auto dev = std::make_unique<Device>();
    dev->host = host;
    dev->index = static_cast<int>(i);
    dev->ibdev.node_type = IBV_NODE_CA;
    dev->ibdev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(dev->ibdev.name, sizeof dev->ibdev.name, "%s", hs.devices[i].name.c_str());
    std::snprintf(dev->ibdev.dev_name, sizeof dev->ibdev.dev_name, "uverbs%zu", i);
    std::snprintf(dev->ibdev.dev_path, sizeof dev->ibdev.dev_path, "/sys/class/infiniband_verbs/uverbs%zu", i);
    std::snprintf(dev->ibdev.ibdev_path, sizeof dev->ibdev.ibdev_path, "%s", hs.devices[i].ibdev_path.c_str());
    devices.push_back(std::move(dev));
    std::vector<PortRuntime> pr;
    for (const PortSpec& p : hs.devices[i].ports) pr.push_back(PortRuntime{p.active, false});
    ports.push_back(std::move(pr));
    fatal.push_back(false);
  }
  state = 1;
  return true;
}

bool Engine::start_listening(std::string& error) {
  const std::string& me = fabric.hosts[host].name;
  make_dirs(dir + "/sock");
  for (const DeviceSpec& d : fabric.hosts[host].devices) make_dirs(dir + "/qp/" + me + "/" + d.name);
  std::string base = dir + "/sock/" + me + "." + std::to_string(getpid());
  listen_path_ = base + ".sock";
  ctl_path_ = base + ".ctl";
  listen_fd_ = bind_socket(listen_path_, SOCK_STREAM, error);
  if (listen_fd_ < 0) return false;
  ctl_fd_ = bind_socket(ctl_path_, SOCK_DGRAM, error);
  if (ctl_fd_ < 0) {
    close(listen_fd_);
    unlink(listen_path_.c_str());
    return false;
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return true;
}

bool Engine::open_context(Context* c, std::string& error) {
  std::unique_lock lock(mu);
  if (!running_) {
    if (!start_listening(error)) return false;
    running_ = true;
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
  }
  fcntl(c->async_wfd, F_SETFL, O_NONBLOCK);
  contexts.push_back(c);
  // Rules without a trigger apply once the first context exists, so their events are seen.
  for (auto it = rules_.begin(); it != rules_.end();) {
    if (it->after_msgs == 0) {
      std::string err;
      if (apply(*it, err) != 0) std::fprintf(stderr, "softhca: SOFTHCA_FAULTS: %s\n", err.c_str());
      it = rules_.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

void Engine::close_context(Context* c) {
  std::unique_lock lock(mu);
  std::erase(contexts, c);
  // Objects the caller did not destroy die with the context (as the kernel cleans up a closed
  // uverbs file): the engine must never reach them again.
  ibv_context* ctx = &c->vctx.context;
  std::erase_if(qps, [&](const auto& kv) { return kv.second->qp.context == ctx; });
  std::erase_if(mrs, [&](const auto& kv) { return kv.second->mr.context == ctx; });
  if (!contexts.empty() || !running_) return;
  stopping_ = true;
  wake();
  lock.unlock();
  thread_.join();  // a later dlclose must find no thread of ours running
  lock.lock();
  running_ = false;
  for (auto& [id, conn] : conns_) close(conn.fd);
  conns_.clear();
  conn_by_path_.clear();
  for (auto& [key, q] : qps) q->req_conn = 0;
  // Once every context is closed, a device that went fatal comes back for the next open, as a
  // reset mlx5 device does for processes that reopen it.
  std::fill(fatal.begin(), fatal.end(), false);
  close(listen_fd_);
  close(ctl_fd_);
  close(wake_fd_);
  listen_fd_ = ctl_fd_ = wake_fd_ = -1;
  unlink(listen_path_.c_str());
  unlink(ctl_path_.c_str());
}

void Engine::wake() {
  uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
}

// QPNs are unique per (host, device) across processes: a counter file under an exclusive lock.
uint32_t Engine::alloc_qpn(int dev, std::string& file) {
  std::string base = dir + "/qp/" + fabric.hosts[host].name + "/" + fabric.hosts[host].devices[dev].name;
  make_dirs(base);
  int fd = open((base + "/next").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  flock(fd, LOCK_EX);
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  uint32_t qpn = n > 0 ? static_cast<uint32_t>(std::strtoul(buf, nullptr, 16)) : 0x000100;
  if (qpn < 0x100 || qpn > 0xfffff0) qpn = 0x100;
  int len = std::snprintf(buf, sizeof buf, "%06x\n", qpn + 1);
  [[maybe_unused]] auto w = pwrite(fd, buf, static_cast<size_t>(len), 0);
  flock(fd, LOCK_UN);
  close(fd);
  char name[16];
  std::snprintf(name, sizeof name, "%06x", qpn);
  file = base + "/" + name;
  std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << listen_path_ << "\n";
  }
  if (rename(tmp.c_str(), file.c_str()) != 0) return 0;
  return qpn;
}

// Whether the requester or READ responder of `q` has packets to queue on a stream with room.
// A stream that a pump left at the high-water mark may drain completely in the same round,
// leaving no POLLOUT to wait for: this keeps the next poll from sleeping on work left undone.
bool Engine::can_send_now(const Qp* q) {
  auto has_room = [&](uint64_t conn) {
    auto it = conns_.find(conn);
    return it == conns_.end() || it->second.out_bytes < high_water;
  };
  if (!q->reads.empty() && has_room(q->reads.front().conn)) return true;
  if (q->qp.state != IBV_QPS_RTS || q->rnr_resume || q->next_send >= q->sq.size()) return false;
  if (q->sq[q->next_send].local_error) return false;  // waits for the acks of what went before
  return q->req_conn == 0 || has_room(q->req_conn);
}

int Engine::poll_timeout_ms() {
  std::optional<Clock::time_point> next;
  for (auto& [key, q] : qps) {
    if (can_send_now(q)) return 0;
    if (q->qp.state != IBV_QPS_RTS) continue;
    for (const auto& t : {q->ack_deadline, q->rnr_resume})
      if (t && (!next || *t < *next)) next = t;
  }
  if (!next) return -1;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(*next - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>((left + 999) / 1000, 60000));
}

void Engine::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  std::unique_lock lock(mu);
  while (!stopping_) {
    fds.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}, {ctl_fd_, POLLIN, 0}});
    ids.clear();
    for (auto& [id, c] : conns_) {
      fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out_bytes ? POLLOUT : 0)), 0});
      ids.push_back(id);
    }
    int timeout = poll_timeout_ms();
    lock.unlock();
    poll(fds.data(), fds.size(), timeout);
    lock.lock();
    if (stopping_) break;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = read(wake_fd_, &v, sizeof v);
    }
    if (fds[1].revents & POLLIN) accept_conns();
    if (fds[2].revents & POLLIN) read_control();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = conns_.find(ids[i]);
      if (it == conns_.end()) continue;
      bool ok = true;
      if (fds[3 + i].revents & (POLLIN | POLLHUP | POLLERR)) ok = read_conn(ids[i], it->second);
      if (ok && (fds[3 + i].revents & POLLOUT)) ok = write_conn(it->second);
      if (!ok) close_conn(ids[i]);
    }
    run_timers();
    pump();
    std::vector<uint64_t> broken;
    for (auto& [id, c] : conns_)
      if (c.out_bytes && !write_conn(c)) broken.push_back(id);
    for (uint64_t id : broken) close_conn(id);
  }
}

void Engine::accept_conns() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Conn& c = conns_[next_conn_++];
    c.fd = fd;
    c.in.resize(kInBuffer);
  }
}

void Engine::read_control() {
  std::vector<char> buf(65536);
  for (;;) {
    ssize_t n = recv(ctl_fd_, buf.data(), buf.size(), 0);
    if (n < 0) return;
    std::string error;
    auto cmds = parse_commands(std::string_view(buf.data(), static_cast<size_t>(n)), error);
    if (!cmds) {
      std::fprintf(stderr, "softhca: control socket: %s\n", error.c_str());
      continue;
    }
    for (const Command& c : *cmds)
      if (apply(c, error) != 0) std::fprintf(stderr, "softhca: control socket: %s\n", error.c_str());
  }
}

// Reads what is there and handles every complete packet; false when the stream is over or bad.
bool Engine::read_conn(uint64_t id, Conn& c) {
  for (int round = 0; round < 8; ++round) {
    ssize_t n = recv(c.fd, c.in.data() + c.in_len, c.in.size() - c.in_len, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    c.in_len += static_cast<size_t>(n);
    size_t pos = 0;
    while (c.in_len - pos >= sizeof(PktHdr)) {
      PktHdr h;
      std::memcpy(&h, c.in.data() + pos, sizeof h);
      if (h.magic != kMagic || h.payload > kSegmentBytes) return false;  // not a softhca peer
      if (c.in_len - pos < sizeof h + h.payload) break;
      handle(id, h, c.in.data() + pos + sizeof h);
      pos += sizeof h + h.payload;
      if (conns_.find(id) == conns_.end()) return false;
    }
    std::memmove(c.in.data(), c.in.data() + pos, c.in_len - pos);
    c.in_len -= pos;
  }
  return true;
}

bool Engine::write_conn(Conn& c) {
  while (!c.out.empty()) {
    iovec iov[16];
    size_t n = 0;
    for (auto it = c.out.begin(); it != c.out.end() && n < 16; ++it, ++n) {
      size_t off = n == 0 ? c.out_off : 0;
      iov[n] = {it->data() + off, it->size() - off};
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = n;
    ssize_t w = sendmsg(c.fd, &m, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EINTR;
    size_t left = static_cast<size_t>(w);
    c.out_bytes -= left;
    while (left > 0) {
      size_t avail = c.out.front().size() - c.out_off;
      if (left < avail) {
        c.out_off += left;
        break;
      }
      left -= avail;
      c.out.pop_front();
      c.out_off = 0;
    }
  }
  return true;
}

// Best effort, bounded (a second at most per stream): a dying process must not hang on a peer.
void Engine::flush_all() {
  for (auto& [id, c] : conns_) {
    for (int tries = 0; tries < 10 && c.out_bytes && write_conn(c); ++tries) {
      pollfd p{c.fd, POLLOUT, 0};
      poll(&p, 1, 100);
    }
  }
}

void Engine::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  close(it->second.fd);
  conns_.erase(it);
  std::erase_if(conn_by_path_, [&](const auto& kv) { return kv.second == id; });
}

// The stream to the destination QP's process; null when the peer cannot be reached (its packets
// are then lost, as on a fabric: the requester finds out by its ack timeout).
Conn* Engine::conn_for(Qp* q) {
  if (auto it = conns_.find(q->req_conn); q->req_conn && it != conns_.end()) return &it->second;
  q->req_conn = 0;
  if (q->peer_file.empty()) return nullptr;
  std::string path;
  if (!read_text(q->peer_file, path)) return nullptr;
  while (!path.empty() && path.back() == '\n') path.pop_back();
  if (auto it = conn_by_path_.find(path); it != conn_by_path_.end()) {
    q->req_conn = it->second;
    return &conns_.at(it->second);
  }
  sockaddr_un a;
  if (!fill_sockaddr(path, a)) return nullptr;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS && errno != EAGAIN) {
    close(fd);
    return nullptr;
  }
  uint64_t id = next_conn_++;
  Conn& c = conns_[id];
  c.fd = fd;
  c.in.resize(kInBuffer);
  conn_by_path_[path] = id;
  q->req_conn = id;
  return &c;
}

void Engine::send_packet(Conn& c, const PktHdr& h, const uint8_t* payload) {
  std::vector<uint8_t> buf;  // filled by copies only: a sized vector would zero 64 KiB first
  buf.reserve(sizeof h + h.payload);
  const auto* head = reinterpret_cast<const uint8_t*>(&h);
  buf.insert(buf.end(), head, head + sizeof h);
  if (h.payload) buf.insert(buf.end(), payload, payload + h.payload);
  c.out_bytes += buf.size();
  c.out.push_back(std::move(buf));
}

}  // namespace softhca
