// Candidates inside a node: GPUs (Xid catalog, fallen off the bus, PCIe AER, ECC errors seen by
// CUDA, stragglers), processes (desync, never-issued collectives, crashes) and hosts (reboots,
// machine checks, BMC events).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis.hpp"
#include "candidates_net.hpp"
#include "names.hpp"
#include "text.hpp"

namespace astral::monitor {

void add_evidence(Candidate& c, const Bundle& b, size_t event, std::string why) {
  for (auto& [i, w] : c.evidence)
    if (i == event) return;
  c.evidence.push_back({event, std::move(why)});
  const Event& e = b.events[event];
  if (e.has_time()) {
    if (c.first_us == kUnknownTime || e.time_us < c.first_us) c.first_us = e.time_us;
    c.last_us = std::max(c.last_us, e.time_us);
  }
}

namespace {

// How strongly an Xid points at the GPU itself (catalog, log-formats.md §4.1).
double xid_weight(const Event& e) {
  if (!e.attr("caused_by_xid").empty()) return 0.05;  // sympathetic: "caused by previous Xid"
  std::string_view text = e.attr("text");
  switch (e.keys.xid) {
    case 79: return 1.0;
    case 48: case 95: return 0.95;
    case 64: case 140: return 0.9;
    case 62: return 0.85;
    case 74: return text.find("fatal") != std::string_view::npos ? 0.85 : 0.6;
    case 119: case 120: case 143: return 0.8;
    case 94: case 46: return 0.75;
    case 136: return 0.7;
    case 109: case 8: return 0.5;
    case 32: return 0.4;
    case 63: return 0.3;
    case 69: case 92: return 0.25;
    case 13: case 31: case 43: return 0.15;
    case 45: return 0.05;
    case 154: return 0.1;
    default:
      if (e.keys.xid >= 144 && e.keys.xid <= 150) return e.severity == Severity::critical ? 0.85 : 0.4;
      return 0.4;
  }
}

std::string xid_fault(int xid) {
  switch (xid) {
    case 79: return "gpu_fell_off_bus";
    case 48: case 63: case 64: case 92: case 94: case 95: case 140: return "gpu_ecc";
    case 74: return "gpu_nvlink";
    case 119: case 120: return "gpu_gsp";
    default: return xid >= 144 && xid <= 150 ? "gpu_nvlink" : "gpu_xid";
  }
}

bool mentions_ecc(std::string_view s) {
  return text::icontains(s, "ecc") || text::icontains(s, "uncorrectable");
}

// Links a candidate to the incident: the component of a rank the job singled out explains it
// best; one on a host of the job explains it plausibly; one elsewhere hardly.
double link_factor(const Symptoms& s, const JobModel& job, const std::string& host, int rank) {
  if (rank >= 0 && (s.culprits.count(rank) || s.missing_ranks.count(rank))) return 1.0;
  if (rank >= 0 && s.ranks.count(rank) && s.ranks.at(rank).errored) return 0.95;
  if (job.is_job_host(host)) return rank >= 0 ? 0.85 : 0.8;
  if (!job.has_job_logs) return 0.8;
  return 0.25;
}

}  // namespace

std::vector<Candidate> gpu_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::map<std::string, Candidate> by_gpu;
  std::map<std::string, NoisyOr> strength;
  auto gpu = [&](const std::string& host, const std::string& pci) -> Candidate& {
    std::string key = host + "|" + pci;
    Candidate& c = by_gpu[key];
    if (c.group.empty()) {
      c.component = {ComponentKind::gpu, host, pci, "", "", -1};
      c.group = "gpu:" + key;
      auto r = job.rank_of_gpu.find(key);
      if (r != job.rank_of_gpu.end()) {
        c.component.rank = r->second;
        c.ranks.insert(r->second);
      }
    }
    return c;
  };
  // AER reports of a root port name the GPU behind it on nearby lines; remember per host.
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    double rel = time_relevance(e.time_us, e.time_confidence_s, s);
    if (rel < 0.25) continue;
    if (e.kind == "xid" && !e.component.device.empty()) {
      Candidate& c = gpu(e.host, e.component.device);
      double w = xid_weight(e);
      strength[c.group].add(w * rel, xid_fault(e.keys.xid));
      if (w >= 0.1) add_evidence(c, b, i, "Xid " + std::to_string(e.keys.xid) + " on this GPU");
    } else if (e.kind == "gpu_fallen_off_bus" && !e.component.device.empty()) {
      Candidate& c = gpu(e.host, e.component.device);
      strength[c.group].add(1.0 * rel, "gpu_fell_off_bus");
      add_evidence(c, b, i, "GPU fell off the PCIe bus");
    } else if (e.kind == "gpu_lost" || e.kind == "gpu_gsp_timeout" || e.kind == "gpu_rpc_failure") {
      // The driver lost the GPU or its firmware stopped answering (the address may be unknown).
      Candidate& c = gpu(e.host, e.component.device);
      const bool lost = e.kind == "gpu_lost";
      strength[c.group].add((lost ? 0.95 : e.kind == "gpu_gsp_timeout" ? 0.8 : 0.4) * rel,
                            lost ? "gpu_fell_off_bus" : "gpu_gsp");
      add_evidence(c, b, i, lost ? "the driver lost the GPU (NV_ERR_GPU_IS_LOST)" : "the GPU's firmware (GSP) stopped answering");
    } else if ((e.kind == "pcie_aer" || e.kind == "pcie_aer_unrecovered") && e.component.kind == ComponentKind::gpu) {
      double w = e.severity == Severity::critical ? 0.85 : e.severity == Severity::error ? 0.7 : 0.05;
      if (e.kind == "pcie_aer_unrecovered" && e.severity == Severity::warning) w = 0.2;
      Candidate& c = gpu(e.host, e.component.device);
      strength[c.group].add(w * rel, "gpu_pcie_error");
      if (w >= 0.2) add_evidence(c, b, i, "PCIe AER on the GPU's link");
    } else if (e.kind == "cuda_error" && mentions_ecc(e.message)) {
      int rank = job.rank_of(e);
      auto it = job.ranks.find(rank);
      if (it == job.ranks.end() || it->second.gpu.empty()) continue;
      Candidate& c = gpu(it->second.host, it->second.gpu);
      strength[c.group].add(0.8 * rel, "gpu_ecc");
      add_evidence(c, b, i, "CUDA reported an uncorrectable ECC error on rank " + std::to_string(rank));
    } else if (e.kind == "watchdog_stuck") {
      int rank = job.rank_of(e);
      auto it = job.ranks.find(rank);
      if (it == job.ranks.end() || it->second.gpu.empty()) continue;
      Candidate& c = gpu(it->second.host, it->second.gpu);
      strength[c.group].add(0.25 * rel, "gpu_hang");
      add_evidence(c, b, i, "the rank's watchdog hung inside a CUDA/NCCL call");
    }
  }
  // Root-port AER reports: the GPU named as the error source, or else the GPU named on the lines
  // around them (same host, within seconds), which is how the kernel prints one incident.
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (e.kind != "pcie_aer" || e.component.kind != ComponentKind::host || e.severity < Severity::error) continue;
    std::string source(e.attr("source"));
    if (!source.empty() && source != e.attr("reporter") &&
        (job.rank_of_gpu.count(e.host + "|" + source) || by_gpu.count(e.host + "|" + source))) {
      Candidate& c = gpu(e.host, source);
      strength[c.group].add((e.severity == Severity::critical ? 0.85 : 0.7) *
                                time_relevance(e.time_us, e.time_confidence_s, s),
                            "gpu_pcie_error");
      add_evidence(c, b, i, "PCIe AER: the GPU is the error source");
      continue;
    }
    for (auto& [key, c] : by_gpu) {
      if (c.component.host != e.host || c.first_us == kUnknownTime || !e.has_time()) continue;
      if (std::llabs(c.first_us - e.time_us) > 10'000'000) continue;
      double w = e.severity == Severity::critical ? 0.85 : 0.65;
      strength[c.group].add(w * time_relevance(e.time_us, e.time_confidence_s, s), "gpu_pcie_error");
      add_evidence(c, b, i, "PCIe AER on the port above this GPU");
    }
  }
  // dcgm-exporter counters that changed around onset (XID, ECC, throttle reasons, PCIe replays):
  // evidence for a GPU the logs already accuse, never an accusation of their own.
  std::map<std::string, double> metric_support;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    if (e.kind != kMetricChangeKind || e.component.kind != ComponentKind::gpu) continue;
    auto it = by_gpu.find(e.host + "|" + e.component.device);
    if (it == by_gpu.end()) continue;
    add_evidence(it->second, b, i, "hardware counter changed: " + std::string(e.attr("metric")) + " " +
                                       std::string(e.attr("before")) + " -> " + std::string(e.attr("after")) +
                                       std::string(e.attr("unit")));
    double& support = metric_support[it->first];
    support = std::max(support, 0.3 * time_relevance(e.time_us, e.time_confidence_s, s));
  }
  std::vector<Candidate> out;
  for (auto& [key, c] : by_gpu) {
    const NoisyOr& n = strength[c.group];
    if (n.value() < 0.1 || c.evidence.empty()) continue;
    c.fault = n.fault;
    double link = link_factor(s, job, c.component.host, c.component.rank);
    c.job_related = s.any && link > 0.3;
    c.score = n.value() * (s.any ? link : 1.0);
    c.score += (1.0 - c.score) * metric_support[key];
    c.summary = "GPU " + c.component.device + " on " + c.component.host +
                (c.component.rank >= 0 ? " (rank " + std::to_string(c.component.rank) + ")" : "");
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> process_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::vector<Candidate> out;
  auto process = [&](int rank, const std::string& host) {
    Candidate c;
    c.component = {ComponentKind::process, host, "", "", "", rank};
    c.group = "process:" + std::to_string(rank) + "@" + host;
    if (rank >= 0) c.ranks.insert(rank);
    return c;
  };
  for (auto& [rank, reasons] : s.culprits) {
    auto it = job.ranks.find(rank);
    std::string host = it != job.ranks.end() ? it->second.host : "";
    if (host.empty())
      for (auto& [i, why] : reasons) host = b.events[i].host;
    Candidate c = process(rank, host);
    auto reason_it = s.culprit_reason.find(rank);
    const std::string reason = reason_it == s.culprit_reason.end() ? std::string() : reason_it->second;
    bool mismatch = reason.rfind("issued ", 0) == 0;
    bool never = reason.rfind("never issued", 0) == 0;
    bool report = reason.rfind("named by the desync", 0) == 0;
    c.fault = mismatch || never || report ? "app_desync" : "rank_lagging";
    c.score = mismatch ? 0.9 : never ? 0.85 : report ? 0.8 : 0.6;
    for (auto& [i, why] : reasons) add_evidence(c, b, i, why);
    c.summary = "process of rank " + std::to_string(rank) + " on " + host + ": " + reason;
    out.push_back(std::move(c));
  }
  // Crashes and CUDA errors of job processes.
  std::map<std::string, Candidate> crashed;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    bool crash = (e.kind == "process_crash" || e.kind == "process_oom") && job.is_job_host(e.host);
    bool cuda = e.kind == "cuda_error" && !mentions_ecc(e.message);
    // A verbs call the HCA refused (bad QP attributes, no resources): the process's setup, not the
    // NIC's health, unless the NIC itself reports a fault (network candidates).
    // (ibv_get_async_event failing is the dead HCA's echo, not the process's doing.)
    bool verbs = e.kind == "ib_verbs_error" && e.attr("verb") != "ibv_get_async_event";
    if (!crash && !cuda && !verbs) continue;
    int rank = job.rank_of(e);
    if (crash && rank < 0 && !e.attr("pid").empty()) {
      auto it = job.rank_of_pid.find(e.host + ":" + std::string(e.attr("pid")));
      if (it != job.rank_of_pid.end()) rank = it->second;
    }
    std::string key = std::to_string(rank) + "@" + e.host;
    auto [it, fresh] = crashed.emplace(key, process(rank, e.host));
    Candidate& c = it->second;
    if (fresh) {
      c.fault = e.kind == "process_oom" ? "process_oom" : crash ? "process_crash" : verbs ? "ib_verbs_error" : "cuda_error";
      c.score = (crash ? 0.7 : verbs ? 0.45 : 0.55) * time_relevance(e.time_us, e.time_confidence_s, s);
      c.summary = std::string(crash   ? "job process crashed"
                              : verbs ? "a verbs call failed in the job process"
                                      : "CUDA error in the job process") +
                  " on " + e.host + (rank >= 0 ? " (rank " + std::to_string(rank) + ")" : "");
    }
    add_evidence(c, b, i, crash   ? "the kernel killed or saw the process crash"
                          : verbs ? "NCCL: " + std::string(e.attr("verb")) + " failed"
                                  : "CUDA error raised in the process");
  }
  for (auto& [k, c] : crashed) out.push_back(std::move(c));
  // Ranks that went silent while the others timed out (dead or hung without a trace), per host.
  std::vector<size_t> waited;
  for (size_t i : s.events)
    if (b.events[i].kind == "watchdog_timeout" && waited.size() < 3) waited.push_back(i);
  std::map<std::string, std::set<int>> silent_by_host;
  for (int rank : s.missing_ranks)
    if (auto it = job.ranks.find(rank); it != job.ranks.end()) silent_by_host[it->second.host].insert(rank);
  for (auto& [host, ranks] : silent_by_host) {
    Candidate c = process(ranks.size() == 1 ? *ranks.begin() : -1, host);
    c.ranks = ranks;
    c.fault = "rank_silent";
    c.score = 0.4;
    c.summary = "rank " + compress_ranks(std::vector<int>(ranks.begin(), ranks.end())) + " on " + host +
                " went silent: no timeout or status while the group timed out";
    for (size_t i : waited) add_evidence(c, b, i, "the group timed out waiting");
    out.push_back(std::move(c));
  }
  // Straggler: its GPU when known.
  if (s.straggler_rank >= 0) {
    auto it = job.ranks.find(s.straggler_rank);
    Candidate c;
    if (it != job.ranks.end() && !it->second.gpu.empty()) {
      c.component = {ComponentKind::gpu, it->second.host, it->second.gpu, "", "", s.straggler_rank};
      c.group = "gpu:" + it->second.host + "|" + it->second.gpu;
    } else {
      c = process(s.straggler_rank, it != job.ranks.end() ? it->second.host : "");
    }
    c.ranks.insert(s.straggler_rank);
    c.fault = "gpu_straggler";
    c.score = 0.45 + 0.5 * s.straggler_score;
    c.summary = s.straggler_note;
    c.files = s.straggler_files;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> host_candidates(const Bundle& b, const JobModel& job, const Symptoms& s) {
  std::map<std::string, Candidate> by_host;
  std::map<std::string, NoisyOr> strength;
  for (size_t i = 0; i < b.events.size(); ++i) {
    const Event& e = b.events[i];
    double w = 0;
    std::string fault, why;
    if (e.kind == "host_reboot" || (e.kind == "host_boot" && s.onset_us != kUnknownTime && e.has_time() &&
                                    e.time_us > s.onset_us - 600'000'000)) {
      w = 0.75, fault = "host_reboot", why = "the host rebooted";
    } else if (e.kind == "host_memory_ue" || e.kind == "host_lockup") {
      w = 0.6, fault = "host_hardware", why = "host hardware error";
    } else if (e.kind == "host_mce") {
      w = 0.4, fault = "host_hardware", why = "machine check logged";
    } else if (e.kind == "sel_event" && e.severity >= Severity::error) {
      w = e.severity == Severity::critical ? 0.55 : 0.3, fault = "host_hardware", why = "BMC event log";
    } else if (e.kind == "pcie_aer" && e.component.kind == ComponentKind::host && e.severity >= Severity::error) {
      w = 0.35, fault = "host_pcie", why = "PCIe AER on a host port";
    } else {
      continue;
    }
    Candidate& c = by_host[e.host];
    if (c.group.empty()) {
      c.component = {ComponentKind::host, e.host, "", "", "", -1};
      c.group = "host:" + e.host;
      for (int r : job.ranks_on(e.host)) c.ranks.insert(r);
    }
    strength[e.host].add(w * time_relevance(e.time_us, e.time_confidence_s, s), fault);
    add_evidence(c, b, i, why);
  }
  std::vector<Candidate> out;
  for (auto& [host, c] : by_host) {
    const NoisyOr& n = strength[host];
    if (n.value() < 0.15) continue;
    c.fault = n.fault;
    double link = job.is_job_host(host) ? 0.8 : (job.has_job_logs ? 0.25 : 0.8);
    for (int r : c.ranks)
      if (s.missing_ranks.count(r) || s.culprits.count(r)) link = 1.0;
    c.job_related = s.any && link > 0.3;
    c.score = n.value() * (s.any ? link : 1.0) * 0.85;  // a host is the coarsest answer
    c.summary = "host " + host + ": " + c.fault;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace astral::monitor
