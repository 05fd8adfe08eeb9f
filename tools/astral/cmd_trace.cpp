// astral trace: export, stats and check for the plugin's trace files (library: monitor/trace).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/trace/chrome_export.hpp"
#include "astral/trace/cluster.hpp"
#include "astral/trace/reader.hpp"
#include "astral/trace/stats.hpp"
#include "command.hpp"

namespace {

using namespace astral;
using nlohmann::json;

struct TraceArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "transfers";
  size_t top = 10;
  bool json = false;
};

struct Loaded {
  std::vector<trace::TraceFile> files;
  std::vector<std::string> unreadable;  // "path: why"
};

// Reads every trace file under the inputs; a file that is not a trace is reported, not fatal.
Loaded load(const std::vector<std::string>& inputs) {
  std::vector<std::string> paths;
  try {
    paths = trace::find_trace_files(inputs);
  } catch (const trace::TraceError& e) {
    throw cli::UsageError(e.what());
  }
  if (paths.empty())
    throw cli::UsageError(fmt::format("no trace files (*.atrace) under {}; set ASTRAL_TRACE_DIR in the job to write them",
                                      fmt::join(inputs, " ")));
  Loaded out;
  const bool progress = paths.size() > 8;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (progress) std::fprintf(stderr, "\rastral trace: reading %zu/%zu", i + 1, paths.size());
    try {
      out.files.push_back(trace::read_trace_file(paths[i]));
    } catch (const trace::TraceError& e) {
      out.unreadable.push_back(e.what());
    }
  }
  if (progress) std::fprintf(stderr, "\n");
  return out;
}

void report_unreadable(const Loaded& l) {
  for (const auto& u : l.unreadable) std::fprintf(stderr, "astral: skipped %s\n", u.c_str());
  if (l.files.empty()) throw cli::UsageError("none of the inputs is a readable Astral trace file");
}

std::string offset_text(const trace::ClockDomain& d) {
  if (d.method == "reference") return "reference clock";
  const double off_us = double(d.offset_ns - d.wall_offset_ns) / 1000;
  if (!std::isfinite(d.uncertainty_ns)) return fmt::format("{:+.1f} us vs its wall clock ({})", off_us, d.method);
  return fmt::format("{:+.1f} us vs its wall clock, ±{:.1f} us ({}, {} pairs)", off_us, d.uncertainty_ns / 1000,
                     d.method, d.pairs);
}

json alignment_json(const trace::Alignment& a) {
  json domains = json::array();
  for (const auto& d : a.domains)
    domains.push_back({{"host", d.host},
                       {"boot_id", d.boot_id},
                       {"method", d.method},
                       {"offset_ns", d.offset_ns},
                       {"wall_offset_ns", d.wall_offset_ns},
                       {"correction_ns", d.offset_ns - d.wall_offset_ns},
                       {"uncertainty_ns", std::isfinite(d.uncertainty_ns) ? json(d.uncertainty_ns) : json(nullptr)},
                       {"reference", a.domains[d.reference].host},
                       {"pairs", d.pairs}});
  return {{"domains", domains},
          {"constraints", a.constraints},
          {"inconsistency_ns", a.inconsistency_ns},
          {"causality_violations", a.causality_violations}};
}

size_t damaged_files(const std::vector<trace::TraceFile>& files) {
  return size_t(std::count_if(files.begin(), files.end(), [](auto& f) { return f.damage.corrupt(); }));
}

int run_export(const TraceArgs& a) {
  if (a.align != "transfers" && a.align != "wall")
    throw cli::UsageError(fmt::format("--align {}: use transfers or wall", a.align));
  Loaded l = load(a.inputs);
  report_unreadable(l);
  const auto matching = trace::match_transfers(l.files);
  const auto alignment = trace::align_clocks(
      l.files, matching, a.align == "wall" ? trace::AlignMode::WallClock : trace::AlignMode::Transfers);
  // Write beside the target and rename, so a failure never leaves a half-written file.
  const std::string tmp = a.output == "-" ? "" : a.output + ".partial";
  std::ofstream file;
  if (!tmp.empty()) {
    file.open(tmp, std::ios::binary | std::ios::trunc);
    if (!file) throw cli::UsageError(fmt::format("{}: cannot write the exported trace", a.output));
  }
  std::ostream& out = tmp.empty() ? std::cout : file;
  const auto summary = trace::write_chrome_trace(out, l.files, matching, alignment);
  if (!tmp.empty()) {
    file.close();
    if (!file || std::rename(tmp.c_str(), a.output.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw cli::UsageError(fmt::format("{}: cannot write the exported trace", a.output));
    }
  }
  size_t events = 0;
  std::set<std::string> hosts;
  for (const auto& f : l.files) events += f.events.size(), hosts.insert(f.info.host);
  if (a.json) {
    json j = {{"output", a.output},
              {"files", l.files.size()},
              {"unreadable", l.unreadable},
              {"hosts", hosts.size()},
              {"events", events},
              {"slices", summary.slices},
              {"instants", summary.instants},
              {"flows", summary.flows},
              {"incomplete", summary.incomplete},
              {"matched_transfers", matching.matched},
              {"unmatched_sends", matching.unmatched_sends},
              {"unmatched_receives", matching.unmatched_recvs},
              {"damaged_files", damaged_files(l.files)},
              {"t0_ns", summary.t0_ns},
              {"alignment", alignment_json(alignment)}};
    (a.output == "-" ? std::cerr : std::cout) << j.dump(2) << "\n";
    return cli::kOk;
  }
  std::ostream& info = a.output == "-" ? std::cerr : std::cout;
  info << fmt::format("exported {} files ({} hosts), {} events -> {}\n", l.files.size(), hosts.size(), events, a.output);
  info << fmt::format("  transfers: {} matched, {} sends without a receive, {} receives without a send\n",
                      matching.matched, matching.unmatched_sends, matching.unmatched_recvs);
  info << fmt::format("  timeline: {} slices, {} flow arrows, {} unfinished (marked incomplete)\n", summary.slices,
                      summary.flows, summary.incomplete);
  info << "  clocks:\n";
  for (const auto& d : alignment.domains) info << fmt::format("    {:<24} {}\n", d.host, offset_text(d));
  if (alignment.inconsistency_ns > 0)
    info << fmt::format("  warning: transfer bounds disagree by {:.1f} us (clock drift during the trace?)\n",
                        alignment.inconsistency_ns / 1000);
  if (const size_t n = damaged_files(l.files))
    info << fmt::format("  warning: {} damaged files (run astral trace check)\n", n);
  info << "  open it in https://ui.perfetto.dev or chrome://tracing\n";
  return cli::kOk;
}

json latency_json(const trace::LatencySummary& s) {
  return {{"count", s.count}, {"p50_us", s.p50_us}, {"p90_us", s.p90_us}, {"p99_us", s.p99_us}, {"max_us", s.max_us}};
}

int run_stats(const TraceArgs& a) {
  Loaded l = load(a.inputs);
  report_unreadable(l);
  const auto matching = trace::match_transfers(l.files);
  const auto alignment = trace::align_clocks(l.files, matching);
  const auto st = trace::compute_stats(l.files, matching, alignment);
  const char* level = st.level == trace::TransferLevel::Message ? "net transfers" : "proxy steps";
  if (a.json) {
    json ranks = json::array(), links = json::array(), nics = json::array();
    for (const auto& r : st.ranks)
      ranks.push_back({{"host", r.host}, {"rank", r.rank}, {"sends", r.sends}, {"recvs", r.recvs},
                       {"bytes_sent", r.bytes_sent}, {"bytes_received", r.bytes_received},
                       {"send_gbytes_per_s", r.send_gbytes_per_s}, {"recv_gbytes_per_s", r.recv_gbytes_per_s},
                       {"send_latency", latency_json(r.send_latency)}});
    for (const auto& k : st.links)
      links.push_back({{"src_host", k.src_host}, {"src_rank", k.src_rank}, {"src_nic", k.src_nic},
                       {"dst_host", k.dst_host}, {"dst_rank", k.dst_rank}, {"dst_nic", k.dst_nic},
                       {"transfers", k.transfers}, {"unmatched", k.unmatched}, {"bytes", k.bytes},
                       {"busy_s", k.busy_s}, {"gbytes_per_s", k.gbytes_per_s}, {"slow", k.slow},
                       {"send_latency", latency_json(k.send)}, {"recv_latency", latency_json(k.recv)},
                       {"end_to_end_latency", latency_json(k.end_to_end)}});
    for (const auto& n : st.nics)
      nics.push_back({{"host", n.host}, {"nic", n.nic}, {"transfers", n.transfers}, {"bytes", n.bytes},
                      {"gbytes_per_s", n.gbytes_per_s}, {"latency", latency_json(n.latency)}});
    std::cout << json{{"level", level}, {"transfers", st.transfers}, {"matched", st.matched},
                      {"median_link_gbytes_per_s", st.median_link_gbytes_per_s}, {"ranks", ranks},
                      {"links", links}, {"nics", nics}, {"alignment", alignment_json(alignment)}}
                     .dump(2)
              << "\n";
    return cli::kOk;
  }
  std::cout << fmt::format("{} {} from {} files ({} matched at both ends)\n\n", st.transfers, level, l.files.size(),
                           st.matched);
  std::cout << fmt::format("{:<28} {:>8} {:>8} {:>12} {:>12} {:>10} {:>10} {:>10}\n", "rank", "sends", "recvs",
                           "sent", "received", "send GB/s", "p50 us", "p99 us");
  for (const auto& r : st.ranks)
    std::cout << fmt::format("{:<28} {:>8} {:>8} {:>12} {:>12} {:>10.2f} {:>10.1f} {:>10.1f}\n",
                             r.host + " " + r.rank, r.sends, r.recvs, r.bytes_sent, r.bytes_received,
                             r.send_gbytes_per_s, r.send_latency.p50_us, r.send_latency.p99_us);
  std::cout << fmt::format("\nslowest links (median link {:.2f} GB/s):\n", st.median_link_gbytes_per_s);
  std::cout << fmt::format("{:<44} {:>8} {:>10} {:>10} {:>10} {:>12}\n", "link", "count", "GB/s", "p50 us",
                           "p99 us", "e2e p99 us");
  for (size_t i = 0; i < st.links.size() && i < a.top; ++i) {
    const auto& k = st.links[i];
    const std::string name = fmt::format("{} {}{} -> {} {}{}", k.src_host, k.src_rank,
                                         k.src_nic.empty() ? "" : " " + k.src_nic, k.dst_host, k.dst_rank,
                                         k.dst_nic.empty() ? "" : " " + k.dst_nic);
    std::cout << fmt::format("{:<44} {:>8} {:>10.2f} {:>10.1f} {:>10.1f} {:>12.1f}{}\n", name, k.transfers,
                             k.gbytes_per_s, k.send.p50_us, k.send.p99_us, k.end_to_end.p99_us, k.slow ? "  SLOW" : "");
  }
  std::cout << "\nNICs:\n";
  for (const auto& n : st.nics)
    std::cout << fmt::format("  {:<20} {:<10} {:>8} transfers {:>14} bytes {:>8.2f} GB/s p99 {:.1f} us\n", n.host,
                             n.nic, n.transfers, n.bytes, n.gbytes_per_s, n.latency.p99_us);
  return cli::kOk;
}

int run_check(const TraceArgs& a) {
  std::vector<std::string> paths;
  try {
    paths = trace::find_trace_files(a.inputs);
  } catch (const trace::TraceError& e) {
    throw cli::UsageError(e.what());
  }
  if (paths.empty()) throw cli::UsageError(fmt::format("no trace files (*.atrace) under {}", fmt::join(a.inputs, " ")));
  json results = json::array();
  size_t bad = 0;
  for (const auto& p : paths) {
    json r = {{"path", p}};
    try {
      const auto f = trace::read_trace_file(p);
      const auto& d = f.damage;
      r.update({{"ok", !d.corrupt()}, {"host", f.info.host}, {"rank", f.info.rank}, {"pid", f.info.pid},
                {"events", f.events.size()}, {"threads", f.threads}, {"closed", f.info.closed},
                {"dropped_events", f.dropped_events}, {"rejected_events", f.rejected_events},
                {"recycled_chunks", f.recycled_chunks}, {"corrupt_records", d.corrupt_records},
                {"incomplete_records", d.incomplete_records}, {"unknown_records", d.unknown_records},
                {"corrupt_chunks", d.corrupt_chunks}, {"corrupt_metadata", d.corrupt_metadata},
                {"truncated_bytes", d.truncated_bytes}, {"notes", d.notes}});
      if (d.corrupt()) ++bad;
    } catch (const trace::TraceError& e) {
      r.update({{"ok", false}, {"error", e.what()}});
      ++bad;
    }
    results.push_back(r);
  }
  if (a.json) {
    std::cout << json{{"files", results}, {"damaged", bad}}.dump(2) << "\n";
  } else {
    for (const auto& r : results) {
      if (r.contains("error")) {
        std::cout << fmt::format("UNREADABLE {}\n", r["error"].get<std::string>());
        continue;
      }
      std::cout << fmt::format("{} {}: {} rank {} pid {}, {} events, {} threads, {}\n",
                               r["ok"].get<bool>() ? "OK     " : "DAMAGED", r["path"].get<std::string>(),
                               r["host"].get<std::string>(), r["rank"].get<int>(), r["pid"].get<int>(),
                               r["events"].get<size_t>(), r["threads"].get<uint32_t>(),
                               r["closed"].get<bool>() ? "closed" : "not closed (writer killed or still running)");
      for (const auto& n : r["notes"]) std::cout << "        " << n.get<std::string>() << "\n";
      if (r["dropped_events"].get<uint64_t>())
        std::cout << fmt::format("        {} events dropped by the writer (file full)\n", r["dropped_events"].get<uint64_t>());
      if (r["recycled_chunks"].get<uint64_t>())
        std::cout << fmt::format("        {} chunks of older history overwritten (wrap mode)\n",
                                 r["recycled_chunks"].get<uint64_t>());
    }
    std::cout << fmt::format("{} files, {} damaged\n", results.size(), bad);
  }
  return bad ? cli::kChecksFailed : cli::kOk;
}

void register_trace(CLI::App& root, cli::Outcome& outcome) {
  auto* trace = root.add_subcommand("trace", "Cross-host traces written by the plugin (ASTRAL_TRACE_DIR)");
  trace->require_subcommand(1);
  static TraceArgs args;

  auto* exp = trace->add_subcommand("export", "Merge trace files into Chrome trace JSON for Perfetto / chrome://tracing");
  exp->add_option("inputs", args.inputs, "Trace files or folders (searched for *.atrace)")->required();
  exp->add_option("-o,--output", args.output, "Output JSON file ('-' for stdout)")->required();
  exp->add_option("--align", args.align, "Clock alignment: transfers (matched send/receive pairs, default) or wall");
  exp->add_flag("--json", args.json, "Print the summary as JSON");
  exp->callback([&outcome] { outcome.exit_code = run_export(args); });

  auto* stats = trace->add_subcommand("stats", "Bytes, bandwidth and latency percentiles per rank, link and NIC");
  stats->add_option("inputs", args.inputs, "Trace files or folders")->required();
  stats->add_option("--top", args.top, "Slowest links to list (default 10)");
  stats->add_flag("--json", args.json, "JSON output (all links)");
  stats->callback([&outcome] { outcome.exit_code = run_stats(args); });

  auto* check = trace->add_subcommand("check", "Validate trace files and count damage (exit 1 if any is damaged)");
  check->add_option("inputs", args.inputs, "Trace files or folders")->required();
  check->add_flag("--json", args.json, "JSON output");
  check->callback([&outcome] { outcome.exit_code = run_check(args); });
}

}  // namespace

ASTRAL_COMMAND(trace, register_trace);
