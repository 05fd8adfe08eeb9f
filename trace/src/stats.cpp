// Per-rank, per-link and per-NIC transfer statistics.
#include "astral/trace/stats.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace astral::trace {
namespace {

struct Interval {
  int64_t begin, end;
};

double union_seconds(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  int64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const auto& i : v) {
    if (!open || i.begin > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = i.begin;
      cur_e = i.end;
      open = true;
    } else {
      cur_e = std::max(cur_e, i.end);
    }
  }
  if (open) total += cur_e - cur_b;
  return double(total) / 1e9;
}

LatencySummary summarize(std::vector<double> ns) {
  LatencySummary s;
  s.count = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) { return ns[std::min(ns.size() - 1, size_t(p * double(ns.size() - 1) + 0.5))] / 1000; };
  s.p50_us = pct(0.50);
  s.p90_us = pct(0.90);
  s.p99_us = pct(0.99);
  s.max_us = ns.back() / 1000;
  return s;
}

struct Accumulator {
  size_t transfers = 0, unmatched = 0;
  uint64_t bytes = 0;
  std::vector<Interval> busy;
  std::vector<double> send_ns, recv_ns, e2e_ns;
};

std::string nic_of(const TraceFile& f, uint64_t conn_id) {
  if (const Connection* c = f.connection(conn_id)) return std::string(f.str(c->nic));
  return "";
}
std::string remote_host_of(const TraceFile& f, uint64_t conn_id) {
  if (const Connection* c = f.connection(conn_id)) return std::string(f.str(c->remote_host));
  return "?";
}

double rate(uint64_t bytes, double seconds) { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0; }

}  // namespace

TraceStats compute_stats(const std::vector<TraceFile>& files, const Matching& matching, const Alignment& alignment) {
  TraceStats out;
  const bool have_messages = std::any_of(matching.transfers.begin(), matching.transfers.end(),
                                         [](auto& t) { return t.level == TransferLevel::Message; });
  out.level = have_messages ? TransferLevel::Message : TransferLevel::Step;

  using LinkKey = std::tuple<size_t, std::string, std::string, std::string>;  // src file, dst, src nic, dst nic
  std::map<LinkKey, std::pair<size_t, Accumulator>> links;                   // dst file, data
  struct RankAcc {
    Accumulator send, recv;
  };
  std::map<size_t, RankAcc> ranks;
  std::map<std::pair<std::string, std::string>, Accumulator> nics;

  for (const MatchedTransfer& t : matching.transfers) {
    if (t.level != out.level) continue;
    const TransferSide& s = t.send;
    const TransferSide& r = t.recv;
    ++out.transfers;
    if (s.present() && r.present()) ++out.matched;
    if (s.present()) {
      const TraceFile& sf = files[s.file];
      const std::string src_nic = nic_of(sf, s.conn_id);
      const std::string dst = r.present() ? files[r.file].info.host + "/" + rank_label(files[r.file])
                                          : remote_host_of(sf, s.conn_id);
      const std::string dst_nic = r.present() ? nic_of(files[r.file], r.conn_id) : "";
      auto& [dst_file, link] = links[{s.file, dst, src_nic, dst_nic}];
      dst_file = r.present() ? r.file : kNoFile;
      ++link.transfers;
      link.bytes += s.bytes;
      if (!r.present()) ++link.unmatched;
      auto& rank = ranks[s.file].send;
      ++rank.transfers;
      rank.bytes += s.bytes;
      auto& nic = nics[{sf.info.host, src_nic}];
      ++nic.transfers;
      nic.bytes += s.bytes;
      if (s.posted && s.done) {
        const Interval i{alignment.to_global(s.file, s.posted_ns), alignment.to_global(s.file, s.done_ns)};
        link.busy.push_back(i);
        rank.busy.push_back(i);
        nic.busy.push_back(i);
        link.send_ns.push_back(double(s.done_ns - s.posted_ns));
        rank.send_ns.push_back(double(s.done_ns - s.posted_ns));
        nic.send_ns.push_back(double(s.done_ns - s.posted_ns));
      }
      if (r.present() && r.posted && r.done) link.recv_ns.push_back(double(r.done_ns - r.posted_ns));
      if (r.present() && s.posted && r.done) {
        const int64_t e2e = alignment.to_global(r.file, r.done_ns) - alignment.to_global(s.file, s.posted_ns);
        link.e2e_ns.push_back(double(std::max<int64_t>(e2e, 0)));
      }
    }
    if (r.present()) {
      auto& rank = ranks[r.file].recv;
      ++rank.transfers;
      rank.bytes += r.bytes;
      auto& nic = nics[{files[r.file].info.host, nic_of(files[r.file], r.conn_id)}];
      ++nic.transfers;
      nic.bytes += r.bytes;
      if (r.posted && r.done) {
        const Interval i{alignment.to_global(r.file, r.posted_ns), alignment.to_global(r.file, r.done_ns)};
        rank.busy.push_back(i);
        nic.busy.push_back(i);
        nic.send_ns.push_back(double(r.done_ns - r.posted_ns));
      }
    }
  }

  for (auto& [key, value] : links) {
    auto& [dst_file, acc] = value;
    const TraceFile& sf = files[std::get<0>(key)];
    LinkStats l;
    l.src_host = sf.info.host;
    l.src_rank = rank_label(sf);
    l.src_nic = std::get<2>(key);
    if (dst_file != kNoFile) {
      l.dst_host = files[dst_file].info.host;
      l.dst_rank = rank_label(files[dst_file]);
    } else {
      l.dst_host = std::get<1>(key);
      l.dst_rank = "?";
    }
    l.dst_nic = std::get<3>(key);
    l.transfers = acc.transfers;
    l.unmatched = acc.unmatched;
    l.bytes = acc.bytes;
    l.busy_s = union_seconds(acc.busy);
    l.gbytes_per_s = rate(l.bytes, l.busy_s);
    l.send = summarize(acc.send_ns);
    l.recv = summarize(acc.recv_ns);
    l.end_to_end = summarize(acc.e2e_ns);
    out.links.push_back(std::move(l));
  }
  std::vector<double> rates;
  for (const auto& l : out.links)
    if (l.busy_s > 0) rates.push_back(l.gbytes_per_s);
  if (!rates.empty()) {
    std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
    out.median_link_gbytes_per_s = rates[rates.size() / 2];
  }
  for (auto& l : out.links) l.slow = l.busy_s > 0 && l.gbytes_per_s < 0.5 * out.median_link_gbytes_per_s;
  std::stable_sort(out.links.begin(), out.links.end(), [](const LinkStats& a, const LinkStats& b) {
    const bool a_known = a.busy_s > 0, b_known = b.busy_s > 0;
    if (a_known != b_known) return a_known;  // links without timing last
    return a.gbytes_per_s < b.gbytes_per_s;
  });

  for (auto& [file, acc] : ranks) {
    RankStats r;
    r.host = files[file].info.host;
    r.rank = rank_label(files[file]);
    r.sends = acc.send.transfers;
    r.recvs = acc.recv.transfers;
    r.bytes_sent = acc.send.bytes;
    r.bytes_received = acc.recv.bytes;
    r.send_gbytes_per_s = rate(r.bytes_sent, union_seconds(acc.send.busy));
    r.recv_gbytes_per_s = rate(r.bytes_received, union_seconds(acc.recv.busy));
    r.send_latency = summarize(acc.send.send_ns);
    out.ranks.push_back(std::move(r));
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](auto& a, auto& b) { return std::tie(a.host, a.rank) < std::tie(b.host, b.rank); });
  for (auto& [key, acc] : nics) {
    NicStats n;
    n.host = key.first;
    n.nic = key.second.empty() ? "?" : key.second;
    n.transfers = acc.transfers;
    n.bytes = acc.bytes;
    n.gbytes_per_s = rate(n.bytes, union_seconds(acc.busy));
    n.latency = summarize(acc.send_ns);
    out.nics.push_back(std::move(n));
  }
  return out;
}

}  // namespace astral::trace
