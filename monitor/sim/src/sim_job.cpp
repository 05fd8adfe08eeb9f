// The job's own output in the simulated bundle: NCCL init, channel and error lines of the chosen
// NCCL release, PyTorch watchdog / status / dump-signal lines of the chosen PyTorch release,
// Flight Recorder and NCCL Inspector dumps.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "sim_job.hpp"

namespace astral::monitor::sim {

namespace {

std::string nccl_version(NcclEra e) {
  switch (e) {
    case NcclEra::v2_18: return "2.18.5+cuda12.2";
    case NcclEra::v2_21: return "2.21.5+cuda12.4";
    case NcclEra::v2_26: return "2.26.2+cuda12.8";
    case NcclEra::v2_28: return "2.28.9+cuda13.0";
    default: return "2.29.1+cuda13.0";
  }
}

std::string bus_id(const std::string& bdf) {  // "0000:9a:00.0" -> "9a000"
  unsigned bus = 0;
  std::sscanf(bdf.c_str() + 5, "%x", &bus);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x000", bus);
  return buf;
}

}  // namespace

std::vector<int> network_peers(const World& w, const Rank& r) {
  // Rail-aligned rings: a rank talks over the network to the same local rank on the neighbour hosts.
  std::vector<int> out;
  int job_hosts = 0;
  for (const Host& h : w.hosts) job_hosts += h.job;
  if (job_hosts < 2) return out;
  for (int d : {-1, 1}) {
    int other = (r.host + d + job_hosts) % job_hosts;
    for (int k : w.hosts[size_t(other)].ranks)
      if (w.ranks[size_t(k)].local == r.local && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

void job_start(World& w, int64_t t0) {
  const std::string version = nccl_version(w.nccl);
  char hash[24];
  std::snprintf(hash, sizeof hash, "0x%llx", static_cast<unsigned long long>(w.comm_hash));
  const int n = int(w.ranks.size());
  for (const Rank& r : w.ranks) {
    const Host& h = w.hosts[size_t(r.host)];
    int64_t t = t0 + w.pick(12'000'000, 15'000'000);
    if (r.local == 0) w.nccl_line(r, t, "INFO", "NCCL version " + version);
    w.nccl_line(r, t + 1000, "INFO", "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.");
    std::string devices;
    for (size_t i = 0; i < h.nics.size(); ++i)
      devices += " [" + std::to_string(i) + "]" + h.nics[i].name + ":1/" + (w.roce ? "RoCE" : "IB");
    w.nccl_line(r, t + 2000, "INFO", "NET/IB : Using" + devices + " ; OOB eth0:" + h.oob_ip + "<0>");
    if (w.options.noise && w.chance(0.05))
      w.nccl_line(r, t + 2500, "WARN", "Could not find real path of /sys/class/net/eth0/device", "misc/utils.cc:117");
    const std::string gpu = bus_id(h.gpu_bdf[size_t(r.local)]);
    std::string head = "comm " + r.comm_ptr + " rank " + std::to_string(r.rank) + " nranks " + std::to_string(n) +
                       " cudaDev " + std::to_string(r.local) + " nvmlDev " + std::to_string(r.local) + " busId " +
                       gpu + " commId " + hash;
    w.nccl_line(r, t + 3000, "INFO", (w.nccl >= NcclEra::v2_26 ? "[Rank " + std::to_string(r.rank) + "] " : "") +
                                          "ncclCommInitRank " + head + " - Init START");
    int64_t t_done = t0 + 16'500'000 + w.pick(0, 400000);
    // What NCCL_DEBUG=INFO prints between START and COMPLETE: affinity, rings, trees, the
    // intra-node P2P and inter-node NET connections of every channel, tuning.
    const int gpus = int(h.ranks.size());
    const int channels = 8;
    const int local_first = h.ranks.empty() ? 0 : h.ranks.front();
    w.nccl_line(r, t + 3100, "INFO", "Setting affinity for GPU " + std::to_string(r.local) + " to ffffffff,00000000,ffffffff");
    w.nccl_line(r, t + 3200, "INFO", "comm " + r.comm_ptr + " rank " + std::to_string(r.rank) + " nRanks " +
                                         std::to_string(n) + " nNodes " + std::to_string(std::max(1, n / std::max(1, gpus))) +
                                         " localRanks " + std::to_string(gpus) + " localRank " + std::to_string(r.local) +
                                         " MNNVL 0");
    if (r.rank == 0) {
      std::string ring;
      for (int k = 0; k < std::min(n, 64); ++k) ring += " " + std::to_string(k);
      for (int ch = 0; ch < channels; ++ch)
        w.nccl_line(r, t + 3300, "INFO", "Channel " + two(ch) + "/" + two(channels) + " :" + ring);
    }
    w.nccl_line(r, t + 3400, "INFO", "Trees [0] " + std::to_string((r.rank + 1) % n) + "/-1/-1->" + std::to_string(r.rank) +
                                         "->" + std::to_string((r.rank + n - 1) % n) + " [1] -1/-1/-1->" +
                                         std::to_string(r.rank) + "->" + std::to_string((r.rank + 1) % n));
    w.nccl_line(r, t + 3500, "INFO", "P2P Chunksize set to 131072");
    for (int ch = 0; ch < channels && gpus > 1; ++ch) {
      int next = local_first + (r.local + 1) % gpus;
      w.nccl_line(r, t_done - 400000, "INFO", "Channel " + two(ch) + "/0 : " + std::to_string(r.rank) + "[" +
                                                  std::to_string(r.local) + "] -> " + std::to_string(next) + "[" +
                                                  std::to_string((r.local + 1) % gpus) + "] via P2P/IPC/read");
    }
    auto peers = network_peers(w, r);
    for (int ch = 0; ch < channels / 2; ++ch)
      for (int p : peers) {
        const Rank& q = w.ranks[size_t(p)];
        const std::string qgpu = bus_id(w.hosts[size_t(q.host)].gpu_bdf[size_t(q.local)]);
        std::string via = " via NET/IB/" + std::to_string(r.nic) + (w.roce ? "/GDRDMA" : "");
        w.nccl_line(r, t_done - 300000, "INFO",
                    "Channel " + two(ch) + "/0 : " + std::to_string(r.rank) + "[" + gpu + "] -> " +
                        std::to_string(q.rank) + "[" + qgpu + "] [send]" + via);
        w.nccl_line(r, t_done - 290000, "INFO",
                    "Channel " + two(ch) + "/0 : " + std::to_string(q.rank) + "[" + qgpu + "] -> " +
                        std::to_string(r.rank) + "[" + gpu + "] [receive]" + via);
      }
    w.nccl_line(r, t_done - 200000, "INFO", "Connected all rings");
    w.nccl_line(r, t_done - 190000, "INFO", "Connected all trees");
    w.nccl_line(r, t_done - 180000, "INFO", "threadThresholds 8/8/64 | 128/8/64 | 512 | 512");
    w.nccl_line(r, t_done - 170000, "INFO", std::to_string(channels) + " coll channels, " + std::to_string(channels) +
                                               " collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer");
    w.nccl_line(r, t_done - 160000, "INFO", "TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.");
    w.nccl_line(r, t_done, "INFO", head + " - Init COMPLETE");
    w.nccl_line(r, t_done + 1000, "INFO", "Init timings - ncclCommInitRank: rank " + std::to_string(r.rank) + " nranks " +
                                              std::to_string(n) + " total 1.08 (kernels 0.51, alloc 0.08, bootstrap 0.22, "
                                              "allgathers 0.01, topo 0.28, graphs 0.04, connections 0.02, rest 0.01)");
    if (w.era != Era::v1 && w.chance(0.5)) {
      // TORCH_CPP_LOG_LEVEL=INFO: native glog form.
      Civil c = to_civil(t_done + 2000 + h.skew_us + w.tz_s * 1000000);
      char buf[64];
      std::snprintf(buf, sizeof buf, "I%02d%02d %02d:%02d:%02d.%06lld %lld ProcessGroupNCCL.cpp:2183] ", c.month, c.day,
                    c.hour, c.minute, c.second, static_cast<long long>(c.micros), static_cast<long long>(r.pid));
      std::string line = std::string(buf) + "[PG 0 (default_pg) Rank " + std::to_string(r.rank) +
                         "] ProcessGroupNCCL created ncclComm_ " + r.comm_ptr + " on CUDA device: ";
      w.python_line(r, t_done + 2000, line);
    }
  }
}

void training_output(World& w, int64_t from, int64_t to, double iter_s) {
  for (const Rank& r : w.ranks) {
    if (r.local != 0) continue;
    int step = int(w.pick(100, 2000));
    for (int64_t t = from; t < to; t += 120'000'000, step += int(120 / iter_s)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "[step %d] loss=%.4f lr=3.0e-04 grad_norm=%.3f time/iter=%.2fs", step,
                    2.0 + w.uniform(0, 0.8), w.uniform(0.5, 1.5), iter_s * w.uniform(0.97, 1.03));
      w.python_line(r, t + w.pick(0, 5'000'000), buf);
    }
  }
}

void job_end(World& w, int64_t t_end) {
  const int n = int(w.ranks.size());
  for (const Rank& r : w.ranks) {
    const Host& h = w.hosts[size_t(r.host)];
    w.nccl_line(r, t_end + w.pick(0, 3'000'000), "INFO",
                "comm " + r.comm_ptr + " rank " + std::to_string(r.rank) + " nranks " + std::to_string(n) + " cudaDev " +
                    std::to_string(r.local) + " busId " + bus_id(h.gpu_bdf[size_t(r.local)]) + " - Destroy COMPLETE");
    if (r.local == 0) w.python_line(r, t_end + 4'000'000, "Training finished: saving final checkpoint done; exiting");
  }
}

void checkpoint_iteration(World& w, int64_t t, double iter_s) {
  for (const Rank& r : w.ranks) {
    if (r.local != 0) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "Saving checkpoint to /checkpoints/step_%lld ... done in %.1fs",
                  static_cast<long long>(w.pick(1000, 9000)), iter_s * w.uniform(20, 60));
    w.python_line(r, t, buf);
  }
  // Everybody waits for rank 0 in the collective after the checkpoint: one slow record.
  inspector(w, t, 1, w.uniform(8, 40), 0, w.uniform(20, 60));
}

void completion_error(World& w, const Rank& r, int64_t t, const std::string& peer_ip, int status) {
  const Host& h = w.hosts[size_t(r.host)];
  const Nic& nic = w.nic_of(r);
  std::string port = std::to_string(w.pick(30000, 60000));
  std::string peer = peer_ip + "<" + port + ">";
  std::string remote_ip = peer_ip;
  std::string msg, src;
  switch (w.nccl) {
    case NcclEra::v2_18:
      msg = "NET/IB : Got completion from peer " + peer + " with error " + std::to_string(status) + ", opcode " +
            std::to_string(w.pick(0, 1)) + ", len 0, vendor err " + (status == 12 ? "129" : "249");
      src = "transport/net_ib.cc:1295";
      break;
    case NcclEra::v2_21:
    case NcclEra::v2_26:
      msg = "NET/IB : Got completion from peer " + peer + " with status=" + std::to_string(status) + " opcode=" +
            std::to_string(w.pick(0, 1)) + " len=0 vendor err " + (status == 12 ? "129" : "249") +
            (w.chance(0.5) ? " (Recv)" : " (Send)") +
            (w.roce ? " localGid ::ffff:" + nic.ip + " remoteGids::ffff:" + remote_ip : "");
      src = "transport/net_ib.cc:1696";
      break;
    case NcclEra::v2_28:
      msg = "NET/IB: Got completion from peer " + peer + " with status=" +
            (status == 12 ? "IBV_WC_RETRY_EXC_ERR(12)" : "IBV_WC_WR_FLUSH_ERR(5)") +
            " opcode=IBV_WC_SEND(0) reqSize=0 vendor_err=" + (status == 12 ? "129" : "249") +
            " req_type=Recv localGid ::ffff:" + nic.ip + " remoteGids::ffff:" + remote_ip + " hca " + nic.name;
      src = "transport/net_ib/p2p.cc:1121";
      break;
    default:
      msg = "NET/IB: Got completion from peer " + peer + " with status=" +
            (status == 12 ? "IBV_WC_RETRY_EXC_ERR(12)" : "IBV_WC_WR_FLUSH_ERR(5)") +
            " opcode=IBV_WC_RECV(128) vendor_err=" + (status == 12 ? "129" : "249") + " localGid ::ffff:" + nic.ip +
            " remoteGids::ffff:" + remote_ip + " hca " + nic.name;
      src = "transport/net_ib/p2p.cc:1208";
  }
  w.nccl_line(r, t, "WARN", msg, src);
  w.nccl_line(r, t + 20, "INFO", "transport/net.cc:1302 -> 6");
  w.nccl_line(r, t + 30, "INFO", "proxy.cc:698 -> 6");
  w.nccl_line(r, t + 40, "INFO", "proxy.cc:878 -> 6 [Progress Thread]");
  if (status == 12 && w.chance(0.5))
    w.nccl_line(r, t + 50, "INFO", "NET/IB : HINT: In many cases this error occurs when the NCCL_IB_TIMEOUT is set too short.");
  (void)h;
}

void port_event(World& w, const Rank& r, int64_t t, bool up) {
  const Nic& nic = w.nic_of(r);
  if (w.nccl == NcclEra::v2_18) {
    if (!up) w.nccl_line(r, t, "WARN", "NET/IB : Got async event : port error", "transport/net_ib.cc:142");
    return;
  }
  w.nccl_line(r, t, "WARN",
              "NET/IB : " + nic.name + ":1 Got non-fatal async event: " + (up ? "port active(9)" : "port error(10)"),
              "transport/net_ib/common.cc:155");
}

void watchdog(World& w, const Rank& r, int64_t t_enq, int64_t seq, const std::string& op, int64_t last_enqueued,
              int64_t last_completed, int signal_from) {
  const int64_t ran = w.timeout_ms + w.pick(10, 90);
  const int64_t t = t_enq + ran * 1000;
  const std::string rk = "[Rank " + std::to_string(r.rank) + "] ";
  const std::string pg = w.pg_prefix(r) + " ";
  int64_t numel = 1 << w.pick(10, 24);
  std::string work = "WorkNCCL(SeqNum=" + std::to_string(seq) + ", OpType=" + op +
                     (w.era == Era::v1 ? "" : ", NumelIn=" + std::to_string(numel) + ", NumelOut=" + std::to_string(numel)) +
                     ", Timeout(ms)=" + std::to_string(w.timeout_ms) + ")";
  w.torch_line(r, t, 'E', w.era == Era::v2_6 ? 632 : 607,
               rk + "Watchdog caught collective operation timeout: " + work + " ran for " + std::to_string(ran) +
                   " milliseconds before timing out.");
  std::string e = std::to_string(last_enqueued), c = std::to_string(last_completed), s = std::to_string(seq);
  switch (w.era) {
    case Era::v1: break;
    case Era::v2_4:
    case Era::v2_5:
      w.torch_line(r, t + 300, 'E', 1664, pg + "Exception (either an error or timeout) detected by watchdog at work: " + s +
                                             ", last enqueued NCCL work: " + e + ", last completed NCCL work: " + c + ".");
      w.torch_line(r, t + 4'000'000, 'E', 1709,
                   pg + "Timeout at NCCL work: " + s + ", last enqueued NCCL work: " + e + ", last completed NCCL work: " + c + ".");
      break;
    default:
      w.torch_line(r, t + 300, 'E', 2268, pg + " failure detected by watchdog at work sequence id: " + s +
                                              " PG status: last enqueued work: " + e + ", last completed work: " + c);
      if (signal_from == r.rank) {
        w.torch_line(r, t + 600, 'E', 2106, pg + "First PG on this rank to signal dumping.");
        w.torch_line(r, t + 800, 'E', 1746,
                     pg + "Received a dump signal due to a collective timeout from this local rank and we will try our "
                          "best to dump the debug info. Last enqueued NCCL work: " + e + ", last completed NCCL work: " + c +
                          ".This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
                          "across ranks, the order of collectives is not same for all ranks or the scheduled "
                          "collective, for some reason, didn't run. ");
      }
  }
  w.torch_line(r, t + 4'100'000, 'E', 621,
               rk + "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
                    "subsequent GPU operations might run on corrupted/incomplete data.");
  w.torch_line(r, t + 4'100'100, 'E', 627, rk + "To avoid data inconsistency, we are taking the entire process down.");
}

void dump_signal(World& w, const Rank& r, int64_t t, int from, int64_t last_enqueued, int64_t last_completed) {
  if (w.era != Era::v2_6) return;
  w.torch_line(r, t, 'E', 1987,
               w.pg_prefix(r) + " Received a dump signal due to a collective timeout from  rank " + std::to_string(from) +
                   " and we will try our best to dump the debug info. Last enqueued NCCL work: " +
                   std::to_string(last_enqueued) + ", last completed NCCL work: " + std::to_string(last_completed) +
                   ".This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across "
                   "ranks, the order of collectives is not same for all ranks or the scheduled collective, for some "
                   "reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as "
                   "network errors or bugs in the communications library (e.g. NCCL), etc. ");
}

void flight_recorder(World& w, const Rank& r, int64_t t_dump, int64_t t_enq, int64_t last_enqueued,
                     int64_t last_completed, const std::string& op) {
  const Host& h = w.hosts[size_t(r.host)];
  nlohmann::json entries = nlohmann::json::array();
  std::string name = op == "BROADCAST" ? "nccl:broadcast" : op == "ALLREDUCE" ? "nccl:all_reduce" : "nccl:" + op;
  for (int64_t seq = std::max<int64_t>(1, last_enqueued - 12); seq <= last_enqueued; ++seq) {
    int64_t created = (t_enq - (last_completed + 1 - seq) * 400'000 + h.skew_us) * 1000;
    bool done = seq <= last_completed;
    entries.push_back({{"record_id", seq + 100}, {"pg_id", 0}, {"process_group", {"0", "default_pg"}},
                       {"collective_seq_id", seq}, {"p2p_seq_id", 0}, {"op_id", seq}, {"profiling_name", name},
                       {"time_created_ns", created}, {"input_sizes", {{1024, 1024}}}, {"input_dtypes", {"Float"}},
                       {"output_sizes", {{1024, 1024}}}, {"output_dtypes", {"Float"}},
                       {"state", done ? "completed" : "scheduled"}, {"time_discovered_started_ns", 0},
                       {"time_discovered_completed_ns", done ? created + 300'000'000 : 0}, {"retired", done},
                       {"timeout_ms", w.timeout_ms}, {"is_p2p", false}});
  }
  nlohmann::json dump = {{"version", "2.7"},
                         {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", "[0, 1]"}}}}},
                         {"pg_status", {{"0", {{"last_enqueued_collective", last_enqueued},
                                                {"last_started_collective", -1},
                                                {"last_completed_collective", last_completed}}}}},
                         {"entries", entries}};
  w.raw_line(h.name + "/fr/nccl_trace_rank_" + std::to_string(r.rank) + ".json", t_dump, dump.dump(), h.skew_us);
}

void inspector(World& w, int64_t from, int count, double base_ms, int straggler, double delay_factor) {
  char hash[24];
  std::snprintf(hash, sizeof hash, "0x%llx", static_cast<unsigned long long>(w.comm_hash));
  for (const Rank& r : w.ranks) {
    const Host& h = w.hosts[size_t(r.host)];
    int64_t t = from;
    for (int k = 0; k < count; ++k) {
      double base = base_ms * w.uniform(0.95, 1.05);
      double own = r.rank == straggler ? base : base * (1.0 + delay_factor) * w.uniform(0.95, 1.05);
      if (straggler < 0) own = base * w.uniform(0.9, 1.1);
      int64_t exec_us = int64_t(own * 1000);
      int64_t end = t + int64_t(base * (1.0 + (straggler >= 0 ? delay_factor : 0)) * 1000);
      int64_t start = end - exec_us + h.skew_us;
      nlohmann::json j = {
          {"header", {{"id", hash}, {"rank", r.rank}, {"n_ranks", int(w.ranks.size())}, {"nnodes", 0}}},
          {"metadata", {{"inspector_output_format_version", "v4.0"}, {"git_rev", "9019a1912"},
                        {"rec_mechanism", "nccl_profiler_interface"}, {"dump_timestamp_us", end + h.skew_us},
                        {"hostname", h.name}, {"pid", r.pid}}},
          {"coll_perf", {{"coll", "AllReduce"}, {"coll_sn", 5000 + k}, {"coll_msg_size_bytes", 268435456},
                         {"coll_exec_time_us", exec_us}, {"coll_timing_source", "kernel_gpu"},
                         {"coll_algobw_gbs", 268435.456 / double(exec_us)},
                         {"coll_busbw_gbs", 268435.456 / double(exec_us) * 1.75},
                         {"event_trace_ts", {{"coll_start_ts", start - 50}, {"coll_stop_ts", start - 40},
                                             {"kernel_events", {{{"channel_id", 0}, {"kernel_start_ts", start},
                                                                 {"kernel_stop_ts", start + exec_us},
                                                                 {"kernel_record_ts", start + exec_us}}}}}}}}};
      w.raw_line(h.name + "/inspector/rank" + std::to_string(r.rank) + ".jsonl", end, j.dump(), h.skew_us);
      t += int64_t(base_ms * (2.5 + delay_factor) * 1000) + w.pick(0, 2000);
    }
  }
}

}  // namespace astral::monitor::sim
