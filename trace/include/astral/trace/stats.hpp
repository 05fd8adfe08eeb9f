#pragma once
// Bytes, bandwidth and latency per rank, per link (rank pair and NIC) and per NIC, from matched
// transfers; links sorted slowest first.
//
// Uses the net transport's transfers when the files have them, else the profiler's proxy steps.
// Bandwidth = bytes / busy time, where busy time is the union of the sender's post -> done
// intervals (idle gaps do not dilute it). Send and receive latencies use one host's clock each and
// are exact; end-to-end latency (send posted -> receive done) crosses hosts and carries the clock
// alignment's uncertainty.
#include <cstdint>
#include <string>
#include <vector>

#include "astral/trace/cluster.hpp"

namespace astral::trace {

struct LatencySummary {
  size_t count = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

struct LinkStats {
  std::string src_host, src_rank, src_nic;
  std::string dst_host, dst_rank, dst_nic;  // dst_rank "?" when the receiver is not traced
  size_t transfers = 0;
  size_t unmatched = 0;  // sends whose receive was not found
  uint64_t bytes = 0;
  double busy_s = 0;
  double gbytes_per_s = 0;
  LatencySummary send, recv, end_to_end;
  bool slow = false;  // below half the median link bandwidth
};

struct RankStats {
  std::string host, rank;
  size_t sends = 0, recvs = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  double send_gbytes_per_s = 0, recv_gbytes_per_s = 0;
  LatencySummary send_latency;
};

struct NicStats {
  std::string host, nic;
  size_t transfers = 0;  // sends and receives through it
  uint64_t bytes = 0;
  double gbytes_per_s = 0;
  LatencySummary latency;
};

struct TraceStats {
  TransferLevel level = TransferLevel::Message;
  size_t transfers = 0;
  size_t matched = 0;
  double median_link_gbytes_per_s = 0;
  std::vector<RankStats> ranks;
  std::vector<LinkStats> links;  // slowest first
  std::vector<NicStats> nics;
};

TraceStats compute_stats(const std::vector<TraceFile>& files, const Matching& matching, const Alignment& alignment);

}  // namespace astral::trace
