// PyTorch Flight Recorder dumps (JSON, or the Python repr the tutorial prints) and NCCL Inspector
// records. A dump per rank makes these the bulk of a large bundle, so they are read with the
// forward-only JsonCursor; the full JSON parser is the fallback for whatever it cannot read.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_cursor.hpp"
#include "names.hpp"
#include "structured.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

struct FrEntry {
  std::string pg;
  int64_t pg_id = -1;
  int64_t seq = -1;
  std::string op, state, input_sizes;
  int64_t created_ns = 0, completed_ns = 0;
  double duration_ms = -1;
  std::string retired;  // "true"/"false" as written, empty when absent
  bool is_p2p = false;
};

struct FrStatus {
  std::string id;
  int64_t enqueued = -1, started = -1, completed = -1;
};

struct FrDump {
  std::string version;
  int rank = -1;
  std::vector<FrEntry> entries;
  std::vector<FrStatus> status;
  std::map<std::string, std::string> config;  // pg name -> "name(desc)"
};

std::string pg_key(const std::string& name, const std::string& desc) {
  return desc.empty() ? name : name + "(" + desc + ")";
}

// "name(desc)" from a raw process_group value: ["0", "default_pg"] or a plain "name".
std::string process_group_name(sv raw) {
  JsonCursor c(raw);
  std::string name, desc;
  if (c.peek() == '[') {
    c.enter_array();
    if (c.next_element()) c.read_string(name);
    if (c.next_element()) c.read_string(desc);
    while (c.next_element()) c.skip();
    return pg_key(name, desc);
  }
  c.read_string(name);
  return name;
}

// Rank of a Flight Recorder dump: the trailing integer of its file name (as torchfrtrace does).
int rank_from_file_name(sv name) {
  size_t slash = name.find_last_of('/');
  if (slash != sv::npos) name.remove_prefix(slash + 1);
  for (sv ext : {sv(".json"), sv(".pkl"), sv(".pickle"), sv(".txt")})
    if (ends_with(name, ext)) name.remove_suffix(ext.size());
  size_t end = name.size(), k = end;
  while (k > 0 && is_digit(name[k - 1])) --k;
  if (k == end) return -1;
  sv digits = name.substr(k);
  auto v = take_uint(digits);
  return v ? int(*v) : -1;
}

// The process group last read, raw and as "name(desc)": entries repeat it, and building the
// name for each was a good part of reading a dump.
struct PgCache {
  sv raw;
  std::string name;
};

// `key` against a literal: memcmp of a constant size, which the compiler turns into a few integer
// compares (string_view's == calls memcmp with a run-time length, per key of every entry).
template <size_t N>
bool key_is(sv key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

// One entry of "entries".
bool read_entry(JsonCursor& c, FrEntry& e, PgCache& pg) {
  if (!c.enter_object()) return false;
  sv key;
  while (c.next_member(key)) {
    // Dispatch on the length first: most keys are rejected without comparing text.
    switch (key.size()) {
      case 5:
        if (key_is(key, "pg_id")) c.read_int(e.pg_id);
        else if (key_is(key, "state")) c.read_string(e.state);
        else c.skip();
        break;
      case 6:
        if (key_is(key, "is_p2p")) c.read_bool(e.is_p2p);
        else c.skip();
        break;
      case 7:
        if (key_is(key, "retired")) e.retired = std::string(c.raw_value());
        else c.skip();
        break;
      case 11:
        if (key_is(key, "duration_ms")) c.read_number(e.duration_ms);
        else if (key_is(key, "input_sizes")) e.input_sizes = std::string(c.raw_value());
        else c.skip();
        break;
      case 13:
        if (key_is(key, "process_group")) {
          sv raw = c.raw_value();
          if (pg.raw.empty() || raw != pg.raw) pg = {raw, process_group_name(raw)};
          e.pg = pg.name;
        } else {
          c.skip();
        }
        break;
      case 14:
        if (key_is(key, "profiling_name")) c.read_string(e.op);
        else c.skip();
        break;
      case 15:
        if (key_is(key, "time_created_ns")) c.read_int(e.created_ns);
        else c.skip();
        break;
      case 17:
        if (key_is(key, "collective_seq_id")) c.read_int(e.seq);
        else c.skip();
        break;
      case 28:
        if (key_is(key, "time_discovered_completed_ns")) c.read_int(e.completed_ns);
        else c.skip();
        break;
      default: c.skip();
    }
  }
  return c.ok();
}

bool read_fr_fast(sv text, FrDump& d) {
  JsonCursor c(text);
  if (!c.enter_object()) return false;
  sv key;
  while (c.next_member(key)) {
    if (key == "version") {
      c.read_string(d.version);
    } else if (key == "rank") {
      int64_t r = -1;
      c.read_int(r);
      d.rank = int(r);
    } else if (key == "entries") {
      if (!c.enter_array()) return false;
      PgCache pg;
      while (c.next_element()) {
        FrEntry e;
        if (!read_entry(c, e, pg)) return false;
        d.entries.push_back(std::move(e));
      }
    } else if (key == "pg_status") {
      if (!c.enter_object()) return false;
      sv id;
      while (c.next_member(id)) {
        FrStatus st;
        st.id = std::string(id);
        if (!c.enter_object()) return false;
        sv k;
        while (c.next_member(k)) {
          if (k == "last_enqueued_collective") c.read_int(st.enqueued);
          else if (k == "last_started_collective") c.read_int(st.started);
          else if (k == "last_completed_collective") c.read_int(st.completed);
          else c.skip();
        }
        d.status.push_back(std::move(st));
      }
    } else if (key == "pg_config") {
      if (!c.enter_object()) return false;
      sv name;
      while (c.next_member(name)) {
        std::string desc;
        if (c.peek() == '{') {
          c.enter_object();
          sv k;
          while (c.next_member(k))
            if (k == "desc") c.read_string(desc);
            else c.skip();
        } else {
          c.skip();
        }
        d.config[std::string(name)] = pg_key(std::string(name), desc);
      }
    } else {
      c.skip();
    }
  }
  return c.ok() && c.at_end();
}

bool read_fr_dom(sv text, FrDump& d) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) j = nlohmann::json::parse(python_repr_to_json(text), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  // Re-serialise compactly and read it like any JSON dump: one reader for the fields.
  return read_fr_fast(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), d);
}

}  // namespace

void parse_flight_recorder(sv content, const ParseOptions& options, ParseResult& out) {
  FrDump d;
  if (!read_fr_fast(content, d)) {
    d = FrDump{};
    if (!read_fr_dom(content, d)) {
      ++out.stats.damaged;
      out.stats.notes.push_back("Flight Recorder dump could not be read as JSON");
      return;
    }
  }
  const int rank = d.rank >= 0 ? d.rank : rank_from_file_name(options.file_name);
  auto base_event = [&](Severity s, const char* kind, int64_t time_ns, std::string msg) -> Event& {
    Event& e = out.events.emplace_back();
    e.layer = Layer::pytorch;
    e.severity = s;
    e.kind = kind;
    e.host = options.default_host;
    e.component = {ComponentKind::process, e.host, "", "", "", rank};
    e.keys.rank = rank;
    e.message = std::move(msg);
    e.file = options.file_index;
    if (time_ns > 0) {
      e.time_us = time_ns / 1000;
      e.time_confidence_s = 0.001;
    }
    return e;
  };
  std::map<int64_t, std::string> pg_by_id;  // local pg_id -> cross-rank key
  std::map<std::string, const FrEntry*> last_completed;
  int64_t dump_ns = 0;
  for (const FrEntry& e : d.entries) {
    if (e.pg_id >= 0) pg_by_id[e.pg_id] = e.pg;
    dump_ns = std::max({dump_ns, e.created_ns, e.completed_ns});
    if (e.duration_ms > 0) {
      CollectiveSample s;
      s.comm_hash = process_group_key(e.pg);
      s.seq = e.seq;
      s.rank = rank;
      s.host = options.default_host;
      s.op = e.op;
      s.start_us = e.created_ns / 1000;
      s.duration_us = int64_t(e.duration_ms * 1000);
      s.file = options.file_index;
      out.samples.push_back(std::move(s));
    }
    if (e.state == "completed") {
      last_completed[e.pg] = &e;
      continue;
    }
    Event& ev = base_event(Severity::warning, "fr_entry", e.created_ns,
                           "FR " + e.op + " seq " + std::to_string(e.seq) + " " + e.state);
    ev.keys.seq = e.seq;
    ev.keys.process_group = e.pg;
    ev.set_attr("state", e.state);
    ev.set_attr("op_type", e.op);
    if (!e.retired.empty()) ev.set_attr("retired", e.retired);
    if (!e.input_sizes.empty()) ev.set_attr("input_sizes", e.input_sizes);
    if (e.is_p2p) ev.set_attr("is_p2p", "1");
  }
  for (auto& [pg, e] : last_completed) {
    Event& ev = base_event(Severity::info, "fr_entry", e->created_ns, "FR " + e->op + " last completed");
    ev.keys.seq = e->seq;
    ev.keys.process_group = pg;
    ev.set_attr("state", "completed");
    ev.set_attr("op_type", e->op);
  }
  for (const FrStatus& st : d.status) {
    sv idv = st.id;
    auto pid = take_int(idv);
    std::string pg = pid && pg_by_id.count(*pid) ? pg_by_id[*pid] : st.id;
    if (pg == st.id && d.config.count(st.id)) pg = d.config[st.id];
    Event& ev = base_event(Severity::info, "fr_pg_status", dump_ns,
                           "FR pg_status " + pg + ": last enqueued " + std::to_string(st.enqueued) +
                               ", last completed " + std::to_string(st.completed));
    ev.keys.process_group = pg;
    ev.keys.seq = st.enqueued;
    ev.set_attr("last_enqueued", std::to_string(st.enqueued));
    ev.set_attr("last_started", std::to_string(st.started));
    ev.set_attr("last_completed", std::to_string(st.completed));
  }
  Event& dump = base_event(Severity::info, "fr_dump", dump_ns, "Flight Recorder dump");
  dump.set_attr("version", d.version);
  dump.set_attr("entries", std::to_string(d.entries.size()));
  out.stats.recognised += d.entries.size();
}

namespace {

// One Inspector record: {"header":{"id","rank","n_ranks"},"metadata":{"hostname"},"coll_perf":{...}}
bool read_inspector(JsonCursor& c, CollectiveSample& s, std::string& host, int& n_ranks) {
  if (!c.enter_object()) return false;
  sv key;
  bool header = false, perf = false;
  while (c.next_member(key)) {
    sv k;
    if (key == "header") {
      header = true;
      if (!c.enter_object()) return false;
      while (c.next_member(k)) {
        if (k == "id") {
          std::string id;
          c.read_string(id);
          sv v = id;
          if (auto x = take_hex(v)) s.comm_hash = *x;
        } else if (k == "rank") {
          int64_t r = -1;
          c.read_int(r);
          s.rank = int(r);
        } else if (k == "n_ranks") {
          int64_t n = 0;
          c.read_int(n);
          n_ranks = int(n);
        } else {
          c.skip();
        }
      }
    } else if (key == "metadata") {
      if (!c.enter_object()) return false;
      while (c.next_member(k))
        if (k == "hostname") c.read_string(host);
        else c.skip();
    } else if (key == "coll_perf") {
      perf = true;
      if (!c.enter_object()) return false;
      while (c.next_member(k)) {
        if (k == "coll") c.read_string(s.op);
        else if (k == "coll_sn") c.read_int(s.seq);
        else if (k == "coll_exec_time_us") c.read_int(s.duration_us);
        else if (k == "event_trace_ts") {
          if (!c.enter_object()) return false;
          sv t;
          int64_t coll_start = kUnknownTime, kernel_start = kUnknownTime;
          while (c.next_member(t)) {
            if (t == "coll_start_ts") c.read_int(coll_start);
            else if (t == "kernel_events" && c.peek() == '[') {
              c.enter_array();
              bool first = true;
              while (c.next_element()) {
                if (first && c.peek() == '{') {
                  c.enter_object();
                  sv kk;
                  while (c.next_member(kk))
                    if (kk == "kernel_start_ts") c.read_int(kernel_start);
                    else c.skip();
                  first = false;
                } else {
                  c.skip();
                }
              }
            } else {
              c.skip();
            }
          }
          s.start_us = kernel_start != kUnknownTime ? kernel_start : coll_start;
        } else {
          c.skip();
        }
      }
    } else {
      c.skip();
    }
  }
  return c.ok() && header && perf;
}

}  // namespace

void parse_inspector(sv content, const ParseOptions& options, ParseResult& out) {
  std::set<std::pair<uint64_t, int>> ranks_seen;
  auto record = [&](CollectiveSample s, std::string host, int n_ranks, uint32_t line) {
    host = host.empty() ? options.default_host : names::canonical_host(host);
    s.host = host;
    s.file = options.file_index;
    if (ranks_seen.insert({s.comm_hash, s.rank}).second) {  // rank -> host, as the Inspector saw it
      Event& e = out.events.emplace_back();
      e.layer = Layer::nccl;
      e.severity = Severity::debug;
      e.kind = "inspector_rank";
      e.host = host;
      e.component = {ComponentKind::process, host, "", "", "", s.rank};
      e.keys.rank = s.rank;
      if (s.comm_hash) e.keys.comm_hash = s.comm_hash;
      e.message = "NCCL Inspector records for rank " + std::to_string(s.rank);
      e.file = options.file_index;
      e.line = line;
      if (s.start_us != kUnknownTime) {
        e.time_us = s.start_us;
        e.time_confidence_s = 0.001;
      }
      e.set_attr("n_ranks", std::to_string(n_ranks));
    }
    out.samples.push_back(std::move(s));
    ++out.stats.recognised;
  };
  // Fast path: one record per line (the Inspector's JSON-lines output).
  size_t pos = 0;
  uint32_t line = 0;
  bool fast = true;
  while (fast && pos < content.size()) {
    size_t nl = content.find('\n', pos);
    sv l = trim(content.substr(pos, nl == sv::npos ? sv::npos : nl - pos));
    pos = nl == sv::npos ? content.size() : nl + 1;
    ++line;
    if (l.empty()) continue;
    if (l.front() != '{' || l.back() != '}') {
      fast = false;  // pretty-printed: read by value below
      break;
    }
    JsonCursor c(l);
    CollectiveSample s;
    std::string host;
    int n_ranks = 0;
    if (read_inspector(c, s, host, n_ranks) && c.at_end()) record(std::move(s), std::move(host), n_ranks, line);
    else ++out.stats.damaged;
  }
  if (fast) return;
  out.stats.damaged = 0;
  out.stats.recognised = 0;
  out.samples.clear();
  out.events.clear();
  ranks_seen.clear();
  for_each_json_value(content, out.stats, [&](const nlohmann::json& j, uint32_t at) {
    std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    JsonCursor c(text);
    CollectiveSample s;
    std::string host;
    int n_ranks = 0;
    if (read_inspector(c, s, host, n_ranks)) record(std::move(s), std::move(host), n_ranks, at);
    else ++out.stats.unknown;
  });
}

}  // namespace astral::monitor
