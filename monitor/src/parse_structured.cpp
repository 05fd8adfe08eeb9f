// Structured sources: *.events.jsonl (the event model), PyTorch Flight Recorder dumps in JSON
// (and the Python repr the tutorial prints), NCCL Inspector records.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "names.hpp"
#include "structured.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

void for_each_json_value(sv content, FileStats& stats,
                         const std::function<void(const nlohmann::json&, uint32_t)>& fn) {
  size_t i = 0;
  uint32_t line = 1;
  const size_t n = content.size();
  auto column_of = [&](size_t at) {
    size_t bol = content.rfind('\n', at == 0 ? 0 : at - 1);
    return bol == sv::npos ? at : at - bol - 1;
  };
  while (i < n) {
    char c = content[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (is_space(c) || c == ',') {
      ++i;
      continue;
    }
    const uint32_t start_line = line;
    if (c != '{' && c != '[') {  // not a JSON value: skip the rest of the line
      while (i < n && content[i] != '\n') ++i;
      ++stats.damaged;
      continue;
    }
    const size_t start = i;
    const size_t indent = column_of(start);
    int depth = 0;
    bool in_string = false, escape = false, closed = false, cut = false;
    for (; i < n; ++i) {
      char d = content[i];
      if (d == '\n') {
        // A value cut short (a crash while writing JSON lines) is followed by the next record:
        // a line that opens a value at the indentation of this one. JSON strings never span
        // lines, so a newline inside one means the same.
        size_t k = i + 1;
        while (k < n && (content[k] == ' ' || content[k] == '\t')) ++k;
        if (in_string || (k < n && content[k] == '{' && k - i - 1 <= indent)) {
          cut = true;
          break;
        }
        ++line;
        continue;
      }
      if (in_string) {
        if (escape) escape = false;
        else if (d == '\\') escape = true;
        else if (d == '"') in_string = false;
        continue;
      }
      if (d == '"') in_string = true;
      else if (d == '{' || d == '[') ++depth;
      else if (d == '}' || d == ']') {
        if (--depth == 0) {
          ++i;
          closed = true;
          break;
        }
      }
    }
    if (!closed) {
      ++stats.damaged;  // truncated: count it and go on with the next record
      if (cut) continue;
      break;
    }
    nlohmann::json j = nlohmann::json::parse(content.substr(start, i - start), nullptr, false);
    if (j.is_discarded()) {
      ++stats.damaged;
      continue;
    }
    // A top-level array of records (Chrome-style container) is walked one level down.
    if (j.is_array() && !j.empty() && j.front().is_object()) {
      for (const auto& v : j) fn(v, start_line);
    } else {
      fn(j, start_line);
    }
  }
}

std::string python_repr_to_json(sv s) {
  std::string out;
  out.reserve(s.size());
  auto last_significant = [&]() -> char {
    for (size_t k = out.size(); k-- > 0;)
      if (!is_space(out[k]) && out[k] != '\n') return out[k];
    return 0;
  };
  auto drop_trailing_comma = [&]() {
    for (size_t k = out.size(); k-- > 0;) {
      if (is_space(out[k]) || out[k] == '\n') continue;
      if (out[k] == ',') out.erase(k, 1);
      return;
    }
  };
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '"' || c == '\'') {
      char q = c;
      out += '"';
      ++i;
      while (i < s.size() && s[i] != q) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          out += s[i];
          out += s[i + 1];
          i += 2;
          continue;
        }
        if (s[i] == '"') out += "\\\"";
        else if (s[i] == '\n') out += "\\n";
        else out += s[i];
        ++i;
      }
      out += '"';
      ++i;
      continue;
    }
    if (c == '(') { out += '['; ++i; continue; }
    if (c == ')' || c == ']' || c == '}') {
      drop_trailing_comma();
      out += c == ')' ? ']' : c;
      ++i;
      continue;
    }
    if (c == ',') {
      char prev = last_significant();
      if (prev != ',' && prev != '[' && prev != '{' && prev != 0) out += ',';
      ++i;
      continue;
    }
    if (s.compare(i, 3, "...") == 0) { i += 3; continue; }
    if (s.compare(i, 4, "None") == 0) { out += "null"; i += 4; continue; }
    if (s.compare(i, 4, "True") == 0) { out += "true"; i += 4; continue; }
    if (s.compare(i, 5, "False") == 0) { out += "false"; i += 5; continue; }
    out += c;
    ++i;
  }
  return out;
}

uint64_t process_group_key(sv name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return h | 1;  // never 0 (0 means "unknown" for NCCL split communicators)
}

void parse_events_jsonl(sv content, const ParseOptions& options, ParseResult& out) {
  uint32_t line = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    sv l = content.substr(pos, nl == sv::npos ? sv::npos : nl - pos);
    pos = nl == sv::npos ? content.size() : nl + 1;
    ++line;
    if (trim(l).empty()) continue;
    nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded()) {
      ++out.stats.damaged;
      continue;
    }
    try {
      Event e = event_from_json(j);
      if (auto src = j.find("source"); src != j.end() && src->is_object()) {
        if (src->contains("file") && (*src)["file"].is_string())
          e.set_attr("origin_file", (*src)["file"].get<std::string>());
        if (e.line) e.set_attr("origin_line", std::to_string(e.line));
      }
      if (e.host.empty()) e.host = options.default_host;
      if (e.component.host.empty() && e.component.kind != ComponentKind::switch_ &&
          e.component.kind != ComponentKind::switch_port)
        e.component.host = e.host;
      e.file = options.file_index;
      e.line = line;
      if (!e.has_time()) e.time_confidence_s = 0;
      out.events.push_back(std::move(e));
    } catch (const std::exception&) {
      ++out.stats.damaged;
    }
  }
}

namespace {

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

std::string pg_key_of(const nlohmann::json& pg) {
  if (pg.is_array() && pg.size() >= 2 && pg[0].is_string() && pg[1].is_string())
    return pg[1].get<std::string>().empty() ? pg[0].get<std::string>()
                                            : pg[0].get<std::string>() + "(" + pg[1].get<std::string>() + ")";
  if (pg.is_string()) return pg.get<std::string>();
  return {};
}

int64_t ns_field(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

}  // namespace

void parse_flight_recorder(sv content, const ParseOptions& options, ParseResult& out) {
  nlohmann::json j = nlohmann::json::parse(content, nullptr, false);
  if (j.is_discarded()) j = nlohmann::json::parse(python_repr_to_json(content), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ++out.stats.damaged;
    out.stats.notes.push_back("Flight Recorder dump could not be read as JSON");
    return;
  }
  const int rank = j.contains("rank") && j["rank"].is_number_integer() ? j["rank"].get<int>()
                                                                         : rank_from_file_name(options.file_name);
  auto base_event = [&](Severity s, const char* kind, int64_t time_ns, const std::string& msg) -> Event& {
    Event& e = out.events.emplace_back();
    e.layer = Layer::pytorch;
    e.severity = s;
    e.kind = kind;
    e.host = options.default_host;
    e.component = {ComponentKind::process, e.host, "", "", "", rank};
    e.keys.rank = rank;
    e.message = msg;
    e.file = options.file_index;
    if (time_ns > 0) {
      e.time_us = time_ns / 1000;
      e.time_confidence_s = 0.001;
    }
    return e;
  };
  std::map<int64_t, std::string> pg_by_id;  // local pg_id -> cross-rank key
  const nlohmann::json empty = nlohmann::json::array();
  const nlohmann::json& entries = j.contains("entries") && j["entries"].is_array() ? j["entries"] : empty;
  int64_t dump_ns = 0;
  struct Last {
    const nlohmann::json* completed = nullptr;
  };
  std::map<std::string, Last> last;
  for (const auto& e : entries) {
    if (!e.is_object()) {
      ++out.stats.damaged;
      continue;
    }
    std::string pg = pg_key_of(e.value("process_group", nlohmann::json()));
    if (e.contains("pg_id") && e["pg_id"].is_number_integer()) pg_by_id[e["pg_id"].get<int64_t>()] = pg;
    dump_ns = std::max({dump_ns, ns_field(e, "time_created_ns"), ns_field(e, "time_discovered_completed_ns")});
    std::string state = e.value("state", "");
    int64_t seq = e.contains("collective_seq_id") && e["collective_seq_id"].is_number_integer()
                      ? e["collective_seq_id"].get<int64_t>()
                      : -1;
    std::string op = e.value("profiling_name", "");
    if (e.contains("duration_ms") && e["duration_ms"].is_number() && e["duration_ms"].get<double>() > 0) {
      CollectiveSample s;
      s.comm_hash = process_group_key(pg);
      s.seq = seq;
      s.rank = rank;
      s.host = options.default_host;
      s.op = op;
      s.start_us = ns_field(e, "time_created_ns") / 1000;
      s.duration_us = int64_t(e["duration_ms"].get<double>() * 1000);
      s.file = options.file_index;
      out.samples.push_back(std::move(s));
    }
    if (state == "completed") {
      last[pg].completed = &e;
      continue;
    }
    Event& ev = base_event(Severity::warning, "fr_entry", ns_field(e, "time_created_ns"),
                           "FR " + op + " seq " + std::to_string(seq) + " " + state);
    ev.keys.seq = seq;
    ev.keys.process_group = pg;
    ev.set_attr("state", state);
    ev.set_attr("op_type", op);
    if (e.contains("retired")) ev.set_attr("retired", e["retired"].dump());
    if (e.contains("input_sizes")) ev.set_attr("input_sizes", e["input_sizes"].dump());
    if (e.value("is_p2p", false)) ev.set_attr("is_p2p", "1");
  }
  for (auto& [pg, l] : last) {
    if (!l.completed) continue;
    const auto& e = *l.completed;
    Event& ev = base_event(Severity::info, "fr_entry", ns_field(e, "time_created_ns"),
                           "FR " + e.value("profiling_name", std::string()) + " last completed");
    ev.keys.seq = e.value("collective_seq_id", int64_t(-1));
    ev.keys.process_group = pg;
    ev.set_attr("state", "completed");
    ev.set_attr("op_type", e.value("profiling_name", std::string()));
  }
  if (auto st = j.find("pg_status"); st != j.end() && st->is_object()) {
    for (auto& [id, status] : st->items()) {
      if (!status.is_object()) continue;
      sv idv = id;
      auto pid = take_int(idv);
      std::string pg = pid && pg_by_id.count(*pid) ? pg_by_id[*pid] : std::string(id);
      if (pg == id && j.contains("pg_config") && j["pg_config"].is_object()) {  // pg_config by name
        for (auto& [name, cfg] : j["pg_config"].items())
          if (name == id && cfg.is_object())
            pg = cfg.value("desc", "").empty() ? name : name + "(" + cfg.value("desc", "") + ")";
      }
      Event& ev = base_event(Severity::info, "fr_pg_status", dump_ns, "FR pg_status " + status.dump());
      ev.keys.process_group = pg;
      int64_t enq = status.value("last_enqueued_collective", int64_t(-1));
      ev.keys.seq = enq;
      ev.set_attr("last_enqueued", std::to_string(enq));
      ev.set_attr("last_started", std::to_string(status.value("last_started_collective", int64_t(-1))));
      ev.set_attr("last_completed", std::to_string(status.value("last_completed_collective", int64_t(-1))));
    }
  }
  Event& dump = base_event(Severity::info, "fr_dump", dump_ns, "Flight Recorder dump");
  dump.set_attr("version", j.value("version", ""));
  dump.set_attr("entries", std::to_string(entries.size()));
  out.stats.recognised += entries.size();
}

void parse_inspector(sv content, const ParseOptions& options, ParseResult& out) {
  std::set<std::pair<uint64_t, int>> ranks_seen;
  for_each_json_value(content, out.stats, [&](const nlohmann::json& j, uint32_t line) {
    if (!j.is_object() || !j.contains("header") || !j.contains("coll_perf")) {
      ++out.stats.unknown;
      return;
    }
    const auto& h = j["header"];
    const auto& c = j["coll_perf"];
    CollectiveSample s;
    if (h.contains("id") && h["id"].is_string()) {
      std::string id = h["id"];
      sv v = id;
      if (auto x = take_hex(v)) s.comm_hash = *x;
    }
    s.rank = h.value("rank", -1);
    s.seq = c.value("coll_sn", int64_t(-1));
    s.op = c.value("coll", "");
    s.duration_us = c.value("coll_exec_time_us", int64_t(-1));
    std::string host = options.default_host;
    if (j.contains("metadata") && j["metadata"].is_object())
      host = names::canonical_host(j["metadata"].value("hostname", host));
    s.host = host;
    if (c.contains("event_trace_ts") && c["event_trace_ts"].is_object()) {
      const auto& ts = c["event_trace_ts"];
      if (ts.contains("kernel_events") && ts["kernel_events"].is_array() && !ts["kernel_events"].empty() &&
          ts["kernel_events"][0].is_object())
        s.start_us = ts["kernel_events"][0].value("kernel_start_ts", int64_t(kUnknownTime));
      else
        s.start_us = ts.value("coll_start_ts", int64_t(kUnknownTime));
    }
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
      if (j.contains("header")) e.set_attr("n_ranks", std::to_string(h.value("n_ranks", 0)));
    }
    out.samples.push_back(std::move(s));
    ++out.stats.recognised;
  });
}

}  // namespace astral::monitor
