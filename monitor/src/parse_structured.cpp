// Structured sources: *.events.jsonl (the event model) and the JSON helpers the dump readers
// share (value splitting, Python repr to JSON).
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
    // A top-level array of records (Chrome-style container) is walked one level down. A record
    // of another shape than its reader expects (a number where an object or string belongs:
    // nlohmann's type_error) is damage, counted, never thrown out of the parser.
    auto record = [&](const nlohmann::json& v) {
      try {
        fn(v, start_line);
      } catch (const nlohmann::json::exception&) {
        ++stats.damaged;
      }
    };
    if (j.is_array() && !j.empty() && j.front().is_object()) {
      for (const auto& v : j) record(v);
    } else {
      record(j);
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

}  // namespace astral::monitor
