// NCCL RAS (log-formats.md §3.6): the text status report (DEAD processes, MISMATCH outlier ranks,
// missing ranks), the monitor-mode event lines, and the JSON status (>= 2.28.7).
#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/common/checked.hpp"
#include "astral/common/json_number.hpp"

#include "line_parser.hpp"
#include "names.hpp"
#include "structured.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

Event& node_event(LineParser& p, Severity s, sv kind, sv node, sv body) {
  Event& e = p.emit(Layer::nccl, s, kind, ComponentKind::process, body);
  e.set_attr("reported_by", std::string(p.host()));
  e.host = names::canonical_host(node);
  e.component.host = e.host;
  if (!p.ras_comm.empty()) {
    sv h = p.ras_comm;
    if (auto v = take_hex(h)) e.keys.comm_hash = *v;
  }
  return e;
}

}  // namespace

void finish_ras_block(LineParser& p) {
  if (!p.ras_block_ranks.empty() && p.ras_block_ops.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(p.ras_block_ops.begin(), p.ras_block_ops.end());
    for (auto [index, ops] : p.ras_block_ranks) {
      Event& e = p.out().events[index];
      if (ops < 0 || *lo == *hi) continue;
      if (ops == *hi) {  // listed among those ahead: the others are the ones behind
        e.kind = "ras_ahead_rank";
        e.severity = Severity::info;
      } else {
        e.set_attr("behind_by", std::to_string(*hi - ops));
      }
    }
  }
  p.ras_block_ops.clear();
  p.ras_block_ranks.clear();
  p.ras_ops = -1;
}

Match recognise_ras_text(LineParser& p, sv body) {
  sv t = trim(body);
  if (t == "Errors") { finish_ras_block(p); p.ras_section = 1; return Match::known; }
  if (t == "Warnings") { finish_ras_block(p); p.ras_section = 2; return Match::known; }
  if (t == "DEAD" || t == "INCOMPLETE" || t == "TIMEOUT" || t == "MISMATCH" || t == "NOCOMM") {
    finish_ras_block(p);
    p.ras_status = std::string(t);
    p.ras_comm.clear();
    return Match::known;
  }
  if (t == "Job summary" || starts_with(t, "=====") || starts_with(t, "RAS Monitor Mode")) {
    finish_ras_block(p);
    return Match::known;
  }
  if (starts_with(t, "#") && t.find('(') != sv::npos && t.find(')') != sv::npos) {  // "#0-0 (hash) MISMATCH"
    finish_ras_block(p);
    sv u = t.substr(t.find('(') + 1);
    p.ras_comm = std::string(take_until(u, ")"));
    take(u, ')');
    p.ras_status = std::string(trim(u));
    return Match::known;
  }
  // Communicator table row "    0         1        32  ...  256   RUNNING      OK": the status of
  // every group at the time of the report (a later OK clears an earlier MISMATCH).
  if (!t.empty() && is_digit(t[0]) && (ends_with(t, " OK") || ends_with(t, "MISMATCH") || ends_with(t, "INCOMPLETE") ||
                                       ends_with(t, "DEAD") || ends_with(t, "ERROR"))) {
    sv u = t;
    sv last, before;
    while (!u.empty()) {
      sv w = take_word(u);
      if (w.empty()) break;
      before = last;
      last = w;
    }
    if (before == "RUNNING" || before == "FINALIZED" || before == "ABORTED" || before == "INIT") {
      Event& e = p.emit(Layer::nccl, Severity::info, "ras_comm_status", ComponentKind::process, body);
      e.set_attr("status", std::string(before));
      e.set_attr("errors", std::string(last));
      e.set_attr("reported_by", std::string(p.host()));
      return Match::known;
    }
  }
  // "PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1" (monitor mode)
  if (starts_with(t, "PEER_")) {
    sv event = take_until(t, ":");
    auto pid = int_after(t, "Process ");
    auto node = token_after(t, " on node ", " ");
    if (!pid || !node) return Match::damaged;
    bool dead = event == "PEER_DEAD" || event == "PEER_TIMEOUT_DEAD";
    Event& e = node_event(p, dead ? Severity::critical : Severity::warning, dead ? "ras_peer_dead" : "ras_peer_event",
                          *node, body);
    e.set_attr("pid", std::to_string(*pid));
    e.set_attr("ras_event", std::string(event));
    if (auto gpu = int_after(t, "managing GPU ")) e.set_attr("cuda_dev", std::to_string(*gpu));
    return Match::known;
  }
  // "Process 3487984 on node 172.16.64.213 managing GPU 5"
  if (starts_with(t, "Process ") && contains(t, " on node ")) {
    auto pid = int_after(t, "Process ");
    auto node = token_after(t, " on node ", " ");
    if (!pid || !node) return Match::damaged;
    bool dead = p.ras_status == "DEAD";
    Event& e = node_event(p, dead ? Severity::critical : Severity::warning,
                          dead ? "ras_peer_dead" : "ras_missing_process", *node, body);
    e.set_attr("pid", std::to_string(*pid));
    if (auto gpu = int_after(t, "managing GPU ")) e.set_attr("cuda_dev", std::to_string(*gpu));
    return Match::known;
  }
  // "Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210"
  if (starts_with(t, "Rank ") && contains(t, " managed by process ")) {
    auto rank = int_after(t, "Rank ");
    auto node = token_after(t, " on node ", " ");
    if (!rank || !node) return Match::damaged;
    bool mismatch = p.ras_status == "MISMATCH";
    Event& e = node_event(p, mismatch ? Severity::warning : Severity::info,
                          mismatch ? "ras_lagging_rank" : "ras_rank", *node, body);
    e.keys.rank = int(*rank);
    e.component.rank = int(*rank);
    if (mismatch && p.ras_ops >= 0) {
      e.set_attr("launched_up_to", std::to_string(p.ras_ops));
      p.ras_block_ranks.push_back({p.out().events.size() - 1, p.ras_ops});
    }
    if (auto pid = int_after(t, " process ")) e.set_attr("pid", std::to_string(*pid));
    if (auto gpu = int_after(t, "GPU ")) e.set_attr("cuda_dev", std::to_string(*gpu));
    return Match::known;
  }
  // "The missing rank: 21" / "The missing ranks: 3, 5"
  if (starts_with(t, "The missing rank")) {
    sv u = t.substr(t.find(':') == sv::npos ? t.size() : t.find(':') + 1);
    bool any = false;
    while (true) {
      u = ltrim(u);
      auto r = take_uint(u);
      if (!r) break;
      Event& e = p.emit(Layer::nccl, Severity::warning, "ras_missing_rank", ComponentKind::process, body);
      e.keys.rank = int(*r);
      e.component.rank = int(*r);
      if (!p.ras_comm.empty()) {
        sv h = p.ras_comm;
        if (auto v = take_hex(h)) e.keys.comm_hash = *v;
      }
      any = true;
      take(u, ',');
    }
    return any ? Match::known : Match::damaged;
  }
  if (auto ops = int_after(t, "launched up to operation ")) {
    p.ras_ops = *ops;
    p.ras_block_ops.push_back(*ops);
    return Match::known;
  }
  if (starts_with(t, "Missing communicator data") || starts_with(t, "Communicator ranks have") ||
      starts_with(t, "Encountered ") || contains(t, "considered dead"))
    return Match::known;
  return Match::none;
}

namespace {
// An integer field of a RAS record, or `fallback` when absent, not an integer, or out of range
// (r.value("rank", -1) would cast 1e30 to int: undefined behaviour).
int64_t ras_integer(const nlohmann::json& r, const char* name, int64_t fallback) {
  auto it = r.find(name);
  return it == r.end() ? fallback : json_integer<int64_t>(*it).value_or(fallback);
}
}  // namespace

void parse_ras_json(std::string_view content, const ParseOptions& options, ParseResult& out) {
  for_each_json_value(content, out.stats, [&](const nlohmann::json& j, uint32_t line) {
    auto add = [&](Severity s, std::string kind, const nlohmann::json& r, uint64_t hash) {
      Event e;  // added once complete: a field of the wrong type throws (counted as damage)
      e.layer = Layer::nccl;
      e.severity = s;
      e.kind = std::move(kind);
      e.host = names::canonical_host(r.value("host", std::string(options.default_host)));
      const int rank = checked_cast<int>(ras_integer(r, "rank", -1)).value_or(-1);
      e.component = {ComponentKind::process, e.host, "", "", "", rank};
      e.keys.rank = rank;
      if (hash) e.keys.comm_hash = hash;
      if (r.contains("pid")) e.set_attr("pid", std::to_string(ras_integer(r, "pid", 0)));
      if (r.contains("cuda_dev")) e.set_attr("cuda_dev", std::to_string(ras_integer(r, "cuda_dev", 0)));
      e.set_attr("reported_by", options.default_host);
      e.message = r.dump();
      e.file = options.file_index;
      e.line = line;
      if (auto t = j.find("timestamp"); t != j.end() && t->is_string()) {
        if (auto v = parse_rfc3339(t->get<std::string>())) {
          e.time_us = *v;
          e.time_confidence_s = 1;
        }
      }
      out.events.push_back(std::move(e));
    };
    if (j.contains("event") && j.contains("peer")) {  // monitor mode
      std::string ev = j.value("event", "");
      nlohmann::json peer = j["peer"];
      bool dead = ev == "PEER_DEAD" || ev == "PEER_TIMEOUT_DEAD";
      add(dead ? Severity::critical : Severity::warning, dead ? "ras_peer_dead" : "ras_peer_event", peer, 0);
      return;
    }
    auto comms = j.find("communicators");
    if (comms == j.end() || !comms->is_array()) return;
    for (const auto& c : *comms) {
      uint64_t hash = 0;
      if (c.contains("hash") && c["hash"].is_string()) {
        std::string h = c["hash"];
        sv hv = h;
        if (auto v = take_hex(hv)) hash = *v;
      }
      if (auto m = c.find("missing_ranks"); m != c.end() && m->is_array())
        for (const auto& r : *m) {
          bool dead = r.contains("status") && r["status"].value("considered_dead", false);
          add(dead ? Severity::critical : Severity::warning, dead ? "ras_peer_dead" : "ras_missing_rank", r, hash);
        }
      // Outliers: ranks whose total collective count is below the majority's. A rank whose
      // counts are not integers in range, or whose total overflows, says nothing about lag.
      std::map<int64_t, std::vector<const nlohmann::json*>> by_count;
      if (auto rs = c.find("ranks"); rs != c.end() && rs->is_array())
        for (const auto& r : *rs) {
          std::optional<int64_t> total = 0;
          if (auto cc = r.find("collective_counts"); cc != r.end() && cc->is_object())
            for (auto& [k, v] : cc->items())
              if (v.is_number_integer() && total) {
                const auto n = json_integer<int64_t>(v);
                total = n ? checked_add(*total, *n) : std::nullopt;
              }
          if (total) by_count[*total].push_back(&r);
        }
      if (by_count.size() >= 2) {
        size_t majority = 0;
        int64_t majority_count = 0;
        for (auto& [count, rs] : by_count)
          if (rs.size() > majority) majority = rs.size(), majority_count = count;
        for (auto& [count, rs] : by_count)
          if (count < majority_count)
            for (const auto* r : rs) add(Severity::warning, "ras_lagging_rank", *r, hash);
      }
    }
  });
}

}  // namespace astral::monitor
