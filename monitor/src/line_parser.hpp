#pragma once
// The per-file state of the text-log parser and the recognisers it calls for each line.
// A line goes through strip_prefix (collector headers), then each recogniser in turn until one
// claims it; a recogniser returns Match::none when the line is not its format, Match::known when
// it understood the line (with or without an event) and Match::damaged when the line starts like
// its format but cannot be read.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "astral/monitor/parse.hpp"
#include "prefix.hpp"

namespace astral::monitor {

enum class Match { none, known, damaged };

// The last few keys seen, without allocating: a filter in front of exact de-duplication.
class RecentKeys {
 public:
  bool insert(uint64_t key) {  // false when already present
    for (size_t i = 0; i < std::min(next_, keys_.size()); ++i)
      if (keys_[i] == key) return false;
    keys_[next_++ % keys_.size()] = key;
    return true;
  }

 private:
  std::array<uint64_t, 16> keys_ {};
  size_t next_ = 0;
};

class LineParser {
 public:
  LineParser(const ParseOptions& options, ParseResult& out);
  void feed(std::string_view raw_line);  // one line, without its newline
  // A line whose source dates it apart from its text (a journal entry's receive time): the
  // line's own time, when it has one, still wins.
  void feed_at(std::string_view raw_line, int64_t time_us);
  void finish();

  // --- used by the recognisers -------------------------------------------------------------
  // Adds an event stamped with the current line's time, host and source; returns it to fill.
  Event& emit(Layer layer, Severity severity, std::string_view kind, ComponentKind component,
              std::string_view message);
  // An event whose source says its time is unknown (BMC "Pre-Init" rows).
  Event& emit_undated(Layer layer, Severity severity, std::string_view kind, ComponentKind component,
                      std::string_view message);
  const Prefix& prefix() const { return prefix_; }
  // Trigger words present in the current line (keywords.hpp).
  uint32_t triggers() const { return triggers_; }
  uint32_t current_line() const { return event_line_; }
  // Host for this line: the prefix's (syslog), else the file's default host.
  std::string_view host() const;
  // Overrides the time of the current line (sources that carry their own clock, e.g. glog).
  void set_line_time(int64_t time_us, bool local, bool yearless, double confidence_s);
  bool switch_context() const { return options_.switch_context; }
  int year() const { return year_; }
  const ParseOptions& options() const { return options_; }
  ParseResult& out() { return out_; }

  // Small state some recognisers keep between lines.
  std::unordered_set<std::string> seen;  // de-duplication of repeated facts
  std::unordered_set<uint64_t> seen_ids;  // the same, by hash (NCCL channels, the most repeated)
  RecentKeys channel_lines;  // NET channel lines read in full lately (is_quiet_nccl_info)
  int ras_section = 0;                   // NCCL RAS text: 1 errors, 2 warnings
  std::string ras_status;                // DEAD / MISMATCH / INCOMPLETE ... of the current block
  std::string ras_comm;                  // "(27a079b828ff1a75)" of the current block
  // MISMATCH blocks list ranks under "N ranks have launched up to operation X": the ranks and
  // the X they were listed under, decided (behind or ahead) when the block ends.
  int64_t ras_ops = -1;
  std::vector<int64_t> ras_block_ops;
  std::vector<std::pair<size_t, int64_t>> ras_block_ranks;
  int64_t aer_event = -1;                // index of the last AER event (bit lines attach to it)
  std::string ghes_severity;             // firmware-first "[Hardware Error]" record in progress
  int64_t last_uptime_us = -1;           // detects a reboot inside a dmesg dump
  std::string nvrm_gpu;                  // GPU the last NVRM line named (wrapped messages)
  uint32_t nvrm_gpu_line = 0;
  uint32_t last_error_line = 0;          // PyTorch's "Last error:" (the error is on the next line)
  // The IB port whose counters follow (perfquery / ibqueryerrors / ibdiagnet headers).
  std::string ib_switch, ib_port, ib_lid, ib_guid;
  std::string ib_ca_host, ib_ca_nic;  // an HCA's port in a fabric-wide report (ibqueryerrors)
  // ibdiagnet2.db_csv: the table being read (START_x .. END_x), its header, and node
  // descriptions by GUID from START_NODES (to name the switches of START_PM_INFO rows).
  std::string ib_table;
  std::vector<std::string> ib_columns;
  std::unordered_map<std::string, std::string> ib_node_desc;
  // torchrun's ChildFailedError summary: the block being read ("[1]:" ... "exitcode : -6 (pid: N)").
  bool child_summary = false, child_root = false;
  int child_rank = -1, child_local_rank = -1;
  std::string child_host;

 private:
  void process(std::string_view line, uint32_t triggers);
  void resolve_time();
  bool start_join(std::string_view line, uint32_t triggers);
  void flush_join();

  const ParseOptions& options_;
  ParseResult& out_;
  int year_;
  uint32_t line_no_ = 0;
  uint32_t triggers_ = 0;
  uint32_t event_line_ = 0;
  Prefix prefix_;
  // Time of the current line after resolution.
  int64_t line_time_ = kUnknownTime;
  bool line_local_ = false, line_yearless_ = false;
  double line_confidence_ = 0;
  int64_t line_uptime_ = -1;
  // Running time for lines without a time of their own (NCCL INFO before 2.26, dmesg -H).
  int64_t last_time_ = kUnknownTime;
  bool last_local_ = false, last_yearless_ = false;
  std::vector<size_t> untimed_;      // events before the first timed line
  std::vector<size_t> inherited_;    // events dated by the previous dated line, awaiting the next
  std::vector<size_t> local_;        // events whose time is in the writer's zone
  std::vector<size_t> yearless_;     // events whose year came from the hint
  std::vector<size_t> uptime_only_;  // events dated only by the kernel's uptime
  std::vector<std::pair<int64_t, int64_t>> uptime_pairs_;  // (wall local-or-utc, uptime)
  bool uptime_pairs_local_ = false;
  // Lines split by a terminal or a paste: joined before recognition.
  std::string join_;
  int join_mode_ = 0;  // 1: indented continuation (space-joined), 2: hard wrap (concatenated)
  uint32_t join_line_ = 0;
  int join_count_ = 0;
  // Exact duplicates (log shippers that send a line twice).
  std::string previous_;
  int64_t given_time_ = kUnknownTime;  // feed_at
};

// Recognisers (one file each).
Match recognise_nccl(LineParser&, std::string_view body);
Match recognise_pytorch(LineParser&, std::string_view body);
Match recognise_kernel(LineParser&, std::string_view body);
Match recognise_switch(LineParser&, std::string_view body);
Match recognise_bmc(LineParser&, std::string_view body);
Match recognise_ras_text(LineParser&, std::string_view body);
Match recognise_ib_diagnostics(LineParser&, std::string_view body);
// Decides the direction of the MISMATCH block just read (called at each block's end).
void finish_ras_block(LineParser&);
// True when `line` is a bare "host:pid:tid [dev] NCCL INFO ..." line (the marker at `info`) that
// recognise_nccl would read without an event (most of a job log): it is skipped without the full
// path. `channel_lines` remembers the NET channel lines already read in full.
bool is_quiet_nccl_info(std::string_view line, size_t info, RecentKeys& channel_lines);
// NCCL's IB completion error text anywhere in `text` (also inside PyTorch exceptions).
bool parse_ib_completion(LineParser&, std::string_view text, Layer layer);
// The line after PyTorch's "Last error:": the NCCL error it quotes, in any of NCCL's wordings.
Match recognise_last_error(LineParser&, std::string_view body);
// The peer a socket error names (peer_ip / peer_host, peer_port).
void set_socket_peer(Event& e, std::string_view msg);
// A verbs call failure ("Call to ibv_X failed ..."): an ib_verbs_error on the NIC, or nullptr.
Event* verbs_call_failure(LineParser&, std::string_view msg, Layer layer);

}  // namespace astral::monitor
