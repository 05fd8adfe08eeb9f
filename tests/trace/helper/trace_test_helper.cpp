// Child processes for the trace suite.
//
//   trace_test_helper writer DIR THREADS COUNTERS_FILE
//     THREADS threads record NetSendPosted events (conn = thread, seq = 0, 1, ...), up to a share
//     of the file each (so it never wraps), then wait to be killed; after
//     each record() returns, the thread publishes seq + 1 in COUNTERS_FILE (one uint64 per thread,
//     shared memory). The parent kills the process with SIGKILL and checks that every event the
//     counters claim is in the trace.
//
//   trace_test_helper ring DIR RANKS MESSAGES BYTES
//     RANKS processes in a ring over socketpairs, each with its own trace file, host name and boot
//     id (so they look like separate hosts): rank r sends MESSAGES messages of BYTES to r+1 and
//     receives as many from r-1, recording NetConnect / Send / Recv events with request ids from
//     MessageKeys, as the plugin's transport does.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "astral/trace/writer.hpp"

using namespace astral::trace;

namespace {

int run_writer(const std::string& dir, int threads, const std::string& counters_path) {
  const int fd = open(counters_path.c_str(), O_RDWR);
  if (fd < 0) return 2;
  auto* counters = static_cast<uint64_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (counters == MAP_FAILED) return 2;
  WriterOptions o;
  o.dir = dir;
  o.max_bytes = 64u << 20;  // no wrap during the test: every event stays
  o.chunk_bytes = 16u << 10;
  o.rank = 0;
  auto w = Writer::open(o);
  if (!w) return 3;
  // Each thread stops at its share of three quarters of the file (64-byte records), so the file
  // never wraps. Without a cap, threads that get more CPU than the slowest one (which the parent
  // waits for) could fill it and wrap it over the slow thread's first events.
  const uint64_t cap = o.max_bytes / 64 * 3 / 4 / uint64_t(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t seq = 0;; ++seq) {
        if (seq == cap) {  // the rest of the file stays unwrapped; wait for the kill
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        Event e;
        e.kind = EventKind::NetSendPosted;
        e.comm_hash = 0x5eed;
        e.payload = Transfer{request_id(MessageKeys{0x5eed, uint64_t(t), seq}), uint64_t(t), seq, 64, 0, 0};
        w->record(e);
        std::atomic_ref<uint64_t>(counters[t]).store(seq + 1, std::memory_order_release);
        if (seq % 64 == 0) std::this_thread::yield();
      }
    });
  for (auto& p : pool) p.join();
  return 0;
}

bool send_all(int fd, const char* p, size_t n) {
  while (n) {
    const ssize_t k = write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}
bool recv_all(int fd, char* p, size_t n) {
  while (n) {
    const ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

int ring_rank(const std::string& dir, int rank, int ranks, int send_fd, int recv_fd, int messages, size_t bytes) {
  const uint64_t comm = 0xa11ce;
  WriterOptions o;
  o.dir = dir;
  o.max_bytes = 8u << 20;
  o.chunk_bytes = 16u << 10;
  o.host = "host" + std::to_string(rank);
  o.boot_id = "boot-" + std::to_string(rank);
  o.rank = rank;
  auto w = Writer::open(o);
  if (!w) return 3;
  w->add_comm(comm, CommInfo{rank, ranks, ranks, w->intern("ring")});
  // Connection ids are chosen by the listener and shared by both ends: here, the receiver's rank.
  const uint64_t send_conn = 1000 + uint64_t((rank + 1) % ranks), recv_conn = 1000 + uint64_t(rank);
  const StringId nic = w->intern("eth" + std::to_string(rank));
  w->add_connection(comm, Connection{send_conn, 0, 40000 + rank, 1, (rank + 1) % ranks,
                                     w->intern("host" + std::to_string((rank + 1) % ranks)), nic, 0, 0, true});
  w->add_connection(comm, Connection{recv_conn, 0, 40000 + rank, 1, (rank + ranks - 1) % ranks,
                                     w->intern("host" + std::to_string((rank + ranks - 1) % ranks)), nic, 0, 0, false});
  std::vector<char> out(bytes, char('a' + rank)), in(bytes);
  auto record = [&](EventKind kind, uint64_t conn, uint64_t seq, Ticks started = 0) {
    Event e;
    e.kind = kind;
    e.comm_hash = comm;
    e.payload = Transfer{request_id(MessageKeys{comm, conn, seq}), conn, seq, bytes, 0, rank};
    w->record(e, started);
  };
  // Even ranks send first, odd ranks receive first: no deadlock on a blocking ring.
  for (int i = 0; i < messages; ++i) {
    for (int phase = 0; phase < 2; ++phase) {
      if ((phase == 0) == (rank % 2 == 0)) {
        const Ticks t = w->now();
        record(EventKind::NetSendPosted, send_conn, uint64_t(i));
        if (!send_all(send_fd, out.data(), out.size())) return 4;
        record(EventKind::NetSendDone, send_conn, uint64_t(i), t);
      } else {
        const Ticks t = w->now();
        record(EventKind::NetRecvPosted, recv_conn, uint64_t(i));
        if (!recv_all(recv_fd, in.data(), in.size())) return 4;
        record(EventKind::NetRecvDone, recv_conn, uint64_t(i), t);
      }
    }
  }
  w->close();
  return 0;
}

int run_ring(const std::string& dir, int ranks, int messages, size_t bytes) {
  std::vector<std::array<int, 2>> links(ranks);  // links[r]: r -> r+1
  for (auto& l : links)
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, l.data()) != 0) return 2;
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(ring_rank(dir, r, ranks, links[r][0], links[(r + ranks - 1) % ranks][1], messages, bytes));
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 5;
  }
  return rc;
}

// Small seed files for the reader's fuzz target: every event kind, a wrapped file, a file cut short.
int write_corpus(const std::string& dir) {
  auto options = [&](const std::string& prefix) {
    WriterOptions o;
    o.dir = dir;
    o.file_prefix = prefix;
    o.max_bytes = 4096 + 4096 + 2 * 4096;
    o.chunk_bytes = 4096;
    o.metadata_bytes = 4096;
    o.host = "fuzzhost";
    o.boot_id = "fuzz-boot";
    o.rank = 1;
    return o;
  };
  {
    auto w = Writer::open(options("kinds"));
    if (!w) return 3;
    const StringId s = w->intern("AllReduce");
    w->add_comm(7, CommInfo{1, 2, 2, s});
    w->add_connection(7, Connection{9, 0, 1234, 2, 0, w->intern("peer"), w->intern("mlx5_0"), 0, 0, true});
    const Payload payloads[] = {Note{s, 0}, Transfer{5, 9, 1, 100, 0, 1}, NetFault{9, 5, 6, s}, Group{1, 0},
                                Collective{2, 3, 4, s, s, s, s, 0, 2, 8}, P2p{3, 1, 2, s, s, 0, 1},
                                ProxyOp{4, 2, 3, 0, 8, 4096, true}, ProxyStep{6, 4, 512, 0, 0, 9, true},
                                NetPluginLink{6, 9, 5}, KernelChannel{2, 99}, SpanEnd{2}};
    const EventKind kinds[] = {EventKind::Note, EventKind::NetSendPosted, EventKind::NetError, EventKind::GroupBegin,
                               EventKind::CollBegin, EventKind::P2pBegin, EventKind::ProxyOpBegin,
                               EventKind::ProxyStepBegin, EventKind::NetPluginBegin, EventKind::KernelChBegin,
                               EventKind::CollEnd};
    for (size_t i = 0; i < std::size(kinds); ++i) {
      Event e;
      e.kind = kinds[i];
      e.comm_hash = 7;
      e.channel = 1;
      e.payload = payloads[i];
      w->record(e);
    }
    w->close();
  }
  {
    auto w = Writer::open(options("wrapped"));
    if (!w) return 3;
    for (uint64_t i = 0; i < 300; ++i) {
      Event e;
      e.kind = i % 2 ? EventKind::NetRecvDone : EventKind::NetSendPosted;
      e.payload = Transfer{request_id(MessageKeys{1, 2, i / 2}), 2, i / 2, 64, 10, 0};
      w->record(e);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "corpus" && argc == 3) return write_corpus(argv[2]);
  if (mode == "writer" && argc == 5) return run_writer(argv[2], std::atoi(argv[3]), argv[4]);
  if (mode == "ring" && argc == 6)
    return run_ring(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), size_t(std::atol(argv[5])));
  std::fprintf(stderr, "usage: trace_test_helper writer DIR THREADS COUNTERS | ring DIR RANKS MESSAGES BYTES\n");
  return 2;
}
