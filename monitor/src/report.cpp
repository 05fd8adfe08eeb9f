// The diagnosis as JSON (`root_causes` first-class, best first) and as a human report.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/monitor/diagnose.hpp"

namespace astral::monitor {

namespace {

nlohmann::json component_json(const Component& c) {
  nlohmann::json j;
  j["kind"] = to_string(c.kind);
  if (!c.host.empty()) j["host"] = c.host;
  if (!c.device.empty()) j["device"] = c.device;
  if (!c.switch_name.empty()) j["switch"] = c.switch_name;
  if (!c.port.empty()) j["port"] = c.port;
  if (c.rank >= 0) j["rank"] = c.rank;
  return j;
}

nlohmann::json cause_json(const RootCause& rc, const Bundle& b) {
  nlohmann::json j;
  j["component"] = component_json(rc.component);
  j["fault"] = rc.fault;
  j["confidence"] = rc.confidence;
  j["summary"] = rc.summary;
  j["time_window"] = {{"start", format_time(rc.window_start_us)}, {"end", format_time(rc.window_end_us)}};
  nlohmann::json ev = nlohmann::json::array();
  for (const Evidence& e : rc.evidence) {
    nlohmann::json x;
    x["file"] = std::string(b.file_name(e.file));
    x["line"] = e.line;
    if (e.time_us != kUnknownTime) x["time"] = format_time(e.time_us);
    x["host"] = e.host;
    x["layer"] = to_string(e.layer);
    x["kind"] = e.kind;
    x["message"] = e.message;
    x["why"] = e.why;
    ev.push_back(std::move(x));
  }
  j["evidence"] = std::move(ev);
  if (!rc.also_suspect.empty()) {
    nlohmann::json also = nlohmann::json::array();
    for (const Component& c : rc.also_suspect) also.push_back(component_json(c));
    j["also_suspect"] = std::move(also);
  }
  j["blast_radius"] = {{"ranks", rc.blast.ranks.size()},
                       {"rank_list", compress_ranks(rc.blast.ranks)},
                       {"hosts", rc.blast.hosts},
                       {"process_groups", rc.blast.process_groups},
                       {"communicators", rc.blast.communicators}};
  return j;
}

// "link node0036 mlx5_5 <-> r5-01 4", "switch_port r5-01 4", "gpu node7 0000:18:00"
std::string component_text(const Component& c) {
  std::string out(to_string(c.kind));
  for (const std::string* part : {&c.host, &c.device})
    if (!part->empty()) out += " " + *part;
  if (!c.switch_name.empty()) out += std::string(c.host.empty() ? " " : " <-> ") + c.switch_name + " " + c.port;
  if (c.rank >= 0) out += " rank " + std::to_string(c.rank);
  return out;
}

std::string clock(int64_t t) {
  std::string s = format_time(t);
  return s.empty() ? "(time unknown)" : s.substr(0, 10) + " " + s.substr(11, 12);
}

}  // namespace

nlohmann::json to_json(const Diagnosis& d, const Bundle& b, bool with_files) {
  nlohmann::json j;
  j["bundle"] = b.root;
  nlohmann::json rc = nlohmann::json::array();
  for (const auto& c : d.root_causes) rc.push_back(cause_json(c, b));
  j["root_causes"] = std::move(rc);
  nlohmann::json in;
  in["present"] = d.incident.present;
  if (d.incident.present) {
    in["kind"] = d.incident.kind;
    in["summary"] = d.incident.summary;
    in["onset"] = format_time(d.incident.onset_us);
    in["first_symptom"] = format_time(d.incident.first_symptom_us);
    in["last_symptom"] = format_time(d.incident.last_symptom_us);
    if (!d.incident.process_group.empty()) in["process_group"] = d.incident.process_group;
    if (d.incident.seq >= 0) in["seq"] = d.incident.seq;
    if (!d.incident.op.empty()) in["op"] = d.incident.op;
    in["ranks_affected"] = d.incident.ranks_reporting;
    in["stopped_first"] = d.incident.stopped_first;
  }
  in["world_size"] = d.incident.world_size;
  j["incident"] = std::move(in);
  nlohmann::json f = nlohmann::json::array();
  for (const auto& c : d.findings) f.push_back(cause_json(c, b));
  j["findings"] = std::move(f);
  j["clock_offsets_s"] = d.clock_offsets_s;
  uint64_t lines = 0, unknown = 0, damaged = 0, events = 0;
  nlohmann::json files = nlohmann::json::array();
  for (const FileStats& s : b.files) {
    lines += s.lines, unknown += s.unknown, damaged += s.damaged, events += s.events;
    if (!with_files) continue;
    nlohmann::json x = {{"path", s.path}, {"kind", to_string(s.kind)}, {"host", s.host},   {"lines", s.lines},
                        {"events", s.events}, {"unknown", s.unknown}, {"damaged", s.damaged},
                        {"duplicates", s.duplicates}};
    if (!s.notes.empty()) x["notes"] = s.notes;
    files.push_back(std::move(x));
  }
  j["input"] = {{"files", b.files.size()}, {"lines", lines}, {"events", b.events.size()},
                {"unknown_lines", unknown}, {"damaged_lines", damaged},
                {"duplicates_removed", b.duplicates_removed}, {"fabric", b.fabric_sources}};
  if (with_files) j["files"] = std::move(files);
  return j;
}

std::string to_text(const Diagnosis& d, const Bundle& b) {
  std::string out;
  char buf[512];
  uint64_t lines = 0, unknown = 0, damaged = 0;
  for (const FileStats& s : b.files) lines += s.lines, unknown += s.unknown, damaged += s.damaged;
  std::snprintf(buf, sizeof buf, "Bundle %s: %zu files, %llu lines, %zu events (%llu unknown, %llu damaged lines)\n",
                b.root.c_str(), b.files.size(), static_cast<unsigned long long>(lines), b.events.size(),
                static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(damaged));
  out += buf;
  if (!b.fabric_sources.empty()) out += "Fabric: " + b.fabric_sources.front() + "\n";
  if (!d.incident.present) {
    out += "\nNo failure, hang or slowdown in the job's logs: no root cause.\n";
  } else {
    out += "\nIncident: " + d.incident.summary + "\n";
    out += "  onset " + clock(d.incident.onset_us) + ", symptoms until " + clock(d.incident.last_symptom_us) + "\n";
    if (!d.incident.stopped_first.empty())
      out += "  stopped first: rank " + compress_ranks(d.incident.stopped_first) + "\n";
  }
  for (size_t i = 0; i < d.root_causes.size(); ++i) {
    const RootCause& rc = d.root_causes[i];
    std::snprintf(buf, sizeof buf, "\n#%zu  %s  confidence %.2f  [%s]\n", i + 1, std::string(to_string(rc.component.kind)).c_str(),
                  rc.confidence, rc.fault.c_str());
    out += buf;
    out += "    " + rc.summary + "\n";
    out += "    window " + clock(rc.window_start_us) + " .. " + clock(rc.window_end_us) + "\n";
    for (const Component& c : rc.also_suspect) out += "    also suspect (same evidence): " + component_text(c) + "\n";
    if (!rc.blast.ranks.empty())
      out += "    blast radius: " + std::to_string(rc.blast.ranks.size()) + " ranks (" + compress_ranks(rc.blast.ranks) +
             ") on " + std::to_string(rc.blast.hosts.size()) + " hosts\n";
    for (const Evidence& e : rc.evidence) {
      std::string msg = e.message.size() > 140 ? e.message.substr(0, 137) + "..." : e.message;
      out += "      " + std::string(b.file_name(e.file)) + (e.line ? ":" + std::to_string(e.line) : "") + "  " +
             (e.time_us != kUnknownTime ? clock(e.time_us).substr(11) + "  " : "") + msg + "\n";
    }
    if (i == 0 && d.root_causes.size() > 4) {
      out += "\n(" + std::to_string(d.root_causes.size() - 1) + " less likely candidates follow)\n";
    }
  }
  if (!d.findings.empty()) {
    out += "\nOther findings (not linked to the incident):\n";
    for (const RootCause& rc : d.findings) {
      std::snprintf(buf, sizeof buf, "  - %s (%.2f): %s\n", rc.fault.c_str(), rc.confidence, rc.summary.c_str());
      out += buf;
    }
  }
  bool skew = false;
  for (auto& [h, s] : d.clock_offsets_s) skew = skew || std::abs(s) >= 0.5;
  if (skew) {
    out += "\nClock offsets applied (seconds ahead of the reference):";
    int n = 0;
    for (auto& [h, s] : d.clock_offsets_s)
      if (std::abs(s) >= 0.5 && n++ < 12) {
        std::snprintf(buf, sizeof buf, " %s %+.1f", h.c_str(), s);
        out += buf;
      }
    out += "\n";
  }
  return out;
}

}  // namespace astral::monitor
