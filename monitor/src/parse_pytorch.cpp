// PyTorch c10d output (log-formats.md §2): glog prefixes without year or zone, watchdog timeout
// and PG-status lines of every release, dump signals, heartbeat monitor, the ncclComm_ line that
// joins a process group to a communicator, and Python-level CUDA/NCCL errors.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "line_parser.hpp"
#include "text.hpp"

namespace astral::monitor {
using namespace text;

namespace {

struct Glog {
  char severity = 'I';
  bool timed = false;
  int month = 0, day = 0;
  int64_t clock_us = 0;
  int64_t tid = -1;
  sv msg;
};

Severity from_glog(char c) {
  switch (c) {
    case 'F': return Severity::critical;
    case 'E': return Severity::error;
    case 'W': return Severity::warning;
    default: return Severity::info;
  }
}

// "MDD"/"MMDD" as PyTorch prints it ("E816" is August 16, "E1206" December 6).
bool month_day(sv digits, int& month, int& day) {
  if (digits.size() < 3 || digits.size() > 4) return false;
  for (char c : digits)
    if (!is_digit(c)) return false;
  day = (digits[digits.size() - 2] - '0') * 10 + (digits.back() - '0');
  month = digits.size() == 3 ? digits[0] - '0' : (digits[0] - '0') * 10 + (digits[1] - '0');
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// "[E1206 18:44:12.715298746 File.cpp:607] ", "[E File.cpp:737] ", "I0527 15:16:57.738664 58629 File.cpp:2183] "
bool read_glog(sv body, Glog& g) {
  sv t = body;
  bool bracket = take(t, '[');
  if (t.empty() || (t[0] != 'I' && t[0] != 'W' && t[0] != 'E' && t[0] != 'F')) return false;
  g.severity = t[0];
  t.remove_prefix(1);
  if (!t.empty() && t[0] == ' ') {  // old form: no time
    if (!bracket) return false;
    t.remove_prefix(1);
  } else {
    sv digits = take_until(t, " ");
    if (!month_day(digits, g.month, g.day) || !take(t, ' ')) return false;
    auto clock = take_clock(t);
    if (!clock) return false;
    g.clock_us = *clock;
    g.timed = true;
    t = ltrim(t);
    if (!t.empty() && is_digit(t[0])) {  // native glog thread id
      auto tid = take_uint(t);
      g.tid = tid ? *tid : -1;
      t = ltrim(t);
    }
  }
  sv file = take_until(t, ":]");
  if (file.empty() || !take(t, ':')) return false;
  if (!take_uint(t) || !take(t, ']')) return false;
  g.msg = ltrim(t);
  return true;
}

struct PgPrefix {
  std::string key;  // cross-rank identity of the process group
  std::string name;
  int rank = -1;
};

// "[PG 1 Rank 0]", "[PG 0 (default_pg) Rank 7]", "[PG ID 0 PG GUID 0(default_pg) Rank 1]", "[Rank 7]"
PgPrefix read_pg(sv msg) {
  PgPrefix pg;
  size_t at = find(msg, "[PG ");
  if (at != sv::npos) {
    sv t = msg.substr(at + 4);
    sv id, guid, desc;
    if (take(t, "ID ")) {
      id = take_until(t, " ");
      t = ltrim(t);
      if (take(t, "PG GUID ")) guid = take_until(t, "( ");
    } else {
      id = take_until(t, " ");
    }
    t = ltrim(t);
    if (take(t, '(')) {
      desc = take_until(t, ")");
      take(t, ')');
    }
    t = ltrim(t);
    if (take(t, "Rank ")) {
      if (auto r = take_uint(t)) pg.rank = int(*r);
    }
    std::string base(guid.empty() ? id : guid);
    pg.key = desc.empty() ? base : base + "(" + std::string(desc) + ")";
    pg.name = std::string(desc);
    return pg;
  }
  if (auto r = int_after(msg, "[Rank ")) pg.rank = int(*r);
  return pg;
}

void fill_process(Event& e, const PgPrefix& pg, int prefix_rank) {
  int rank = prefix_rank >= 0 ? prefix_rank : pg.rank;
  e.keys.rank = rank;
  e.component.rank = rank;
  if (pg.rank >= 0) e.set_attr("pg_rank", std::to_string(pg.rank));
  e.keys.process_group = pg.key;
}

// WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)
void read_work(Event& e, sv msg) {
  if (auto s = int_after(msg, "SeqNum=")) e.keys.seq = *s;
  if (auto op = token_after(msg, "OpType=", ", )")) e.set_attr("op_type", std::string(*op));
  if (auto v = int_after(msg, "NumelIn=")) e.set_attr("numel_in", std::to_string(*v));
  if (auto v = int_after(msg, "NumelOut=")) e.set_attr("numel_out", std::to_string(*v));
  if (auto v = int_after(msg, "Timeout(ms)=")) e.set_attr("timeout_ms", std::to_string(*v));
  if (auto v = int_after(msg, " ran for ")) e.set_attr("ran_for_ms", std::to_string(*v));
}

// "last enqueued [NCCL] work: N" ("Last ..." in dump-signal lines): `what` omits the first letter.
std::optional<int64_t> work_count(sv msg, sv what) {
  for (size_t at = find(msg, what); at != sv::npos; at = find(msg, what, at + 1)) {
    sv t = msg.substr(at + what.size());
    take(t, "NCCL ");
    if (take(t, "work: ")) return take_int(t);
  }
  return std::nullopt;
}

// The three generations of "work S, last enqueued E, last completed C".
bool read_status(Event& e, sv msg) {
  auto enq = work_count(msg, "ast enqueued ");
  auto done = enq ? work_count(msg, "ast completed ") : std::nullopt;
  if (!enq || !done) return false;
  // "... watchdog at work: S", "Timeout at NCCL work: S" or "... at work sequence id: S"; one
  // search for the part they share.
  std::optional<int64_t> s;
  for (size_t at = find(msg, " work"); at != sv::npos && !s; at = find(msg, " work", at + 1)) {
    sv t = msg.substr(at + 5);
    const sv before = msg.substr(0, at);
    if ((take(t, ": ") && (ends_with(before, "detected by watchdog at") || ends_with(before, "Timeout at NCCL"))) ||
        (take(t, " sequence id: ") && ends_with(before, " at")))
      s = take_int(t);
  }
  if (s) e.keys.seq = *s;
  e.set_attr("last_enqueued", std::to_string(*enq));
  e.set_attr("last_completed", std::to_string(*done));
  return true;
}

// torchrun's ChildFailedError summary, one block per failed rank:
//   "[1]:" / "  rank      : 1 (local_rank: 1)" / "  exitcode  : -6 (pid: 2385923)" ...
// after "Root Cause (first observed failure):" the block is the first rank that failed.
Match child_failed_line(LineParser& p, sv body) {
  sv t = trim(body);
  if (contains(t, "ChildFailedError")) {
    p.child_summary = true;
    p.child_root = false;
    return Match::known;
  }
  if (!p.child_summary) return Match::none;
  if (starts_with(t, "Root Cause")) {
    p.child_root = true;
    return Match::known;
  }
  auto field = [&](sv name) -> std::optional<sv> {
    if (!starts_with(t, name)) return std::nullopt;
    sv u = ltrim(t.substr(name.size()));
    if (!take(u, ':')) return std::nullopt;
    return ltrim(u);
  };
  if (auto v = field("rank")) {
    sv u = *v;
    auto r = take_int(u);
    p.child_rank = r ? int(*r) : -1;
    auto lr = int_after(u, "local_rank: ");
    p.child_local_rank = lr ? int(*lr) : -1;
    return Match::known;
  }
  if (auto v = field("host")) {
    p.child_host = std::string(*v);
    return Match::known;
  }
  if (auto v = field("exitcode")) {
    sv u = *v;
    auto code = take_int(u);
    if (!code) return Match::damaged;
    Event& e = p.emit(Layer::pytorch, p.child_root ? Severity::critical : Severity::error, "child_failed",
                      ComponentKind::process, body);
    e.keys.rank = p.child_rank;
    e.component.rank = p.child_rank;
    e.set_attr("exit_code", std::to_string(*code));
    if (auto pid = int_after(u, "pid: ")) e.set_attr("pid", std::to_string(*pid));
    if (p.child_local_rank >= 0) e.set_attr("local_rank", std::to_string(p.child_local_rank));
    if (!p.child_host.empty()) e.set_attr("reported_host", p.child_host);
    if (p.child_root) e.set_attr("root_cause", "1");
    if (*code < 0 && *code > -256) e.set_attr("signal", std::to_string(-*code));
    return Match::known;
  }
  if (field("time") || field("error_file") || field("traceback") || starts_with(t, "[") || starts_with(t, "---") ||
      starts_with(t, "===") || starts_with(t, "Failures:") || ends_with(t, "FAILED"))
    return Match::known;
  return Match::none;
}

// "srun: error: HOST: task N: Exited with exit code 1" (also "Killed", "Aborted", "Segmentation fault").
Match srun_line(LineParser& p, sv body) {
  auto rest = after(body, "srun: error: ");
  if (!rest) return Match::none;
  sv t = *rest;
  sv host = take_until(t, ":");
  if (!take(t, ':')) return Match::none;
  t = ltrim(t);
  if (!take(t, "task ")) return Match::known;  // other srun errors: nothing to join
  auto task = take_uint(t);
  if (!task || !take(t, ':')) return Match::damaged;
  sv what = trim(t);
  Event& e = p.emit(Layer::pytorch, Severity::error, "process_exit", ComponentKind::process, body);
  e.host = std::string(host);
  e.component.host = e.host;
  e.keys.rank = int(*task);
  e.component.rank = int(*task);
  if (auto code = int_after(what, "exit code ")) e.set_attr("exit_code", std::to_string(*code));
  e.set_attr("how", std::string(what));
  return Match::known;
}

// The training loop's own step time: "time/iter=1.23s" (a common trainer line) and Megatron-LM's
// "elapsed time per iteration (ms): 1234.5". A throttled rack shows first as steps that creep.
Match step_time_line(LineParser& p, sv body) {
  double scale = 1;
  auto value = after(body, "time/iter=");
  if (!value) {
    value = after(body, "elapsed time per iteration (ms):");
    scale = 1e-3;
  }
  if (!value) return Match::none;
  sv rest = ltrim(*value);
  const std::string number(take_until(rest, " s|,"));
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !(v >= 0) || v > 1e7) return Match::damaged;
  Event& e = p.emit(Layer::pytorch, Severity::info, "step_time", ComponentKind::process, body);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v * scale);
  e.set_attr("seconds", buf);
  return Match::known;
}

Match python_line(LineParser& p, sv body) {
  if (Match m = child_failed_line(p, body); m != Match::none) return m;
  if (Match m = step_time_line(p, body); m != Match::none) return m;
  if (Match m = srun_line(p, body); m != Match::none) return m;
  // "Last error:" ends the line: NCCL's message is on the next one.
  if (ends_with(trim(body), "Last error:")) {
    p.last_error_line = p.current_line();
    return Match::known;
  }
  if (contains(body, "watchdog thread terminated with exception")) {
    Event& e = p.emit(Layer::pytorch, Severity::error, "watchdog_exception", ComponentKind::process, body);
    if (e.keys.rank < 0)
      if (auto r = int_after(body, "Rank ")) e.keys.rank = int(*r);
    e.component.rank = e.keys.rank;
    if (auto what = after(body, "terminated with exception: ")) e.set_attr("error", std::string(trim(*what)));
    return Match::known;
  }
  // Python-level errors (tracebacks, launcher summaries) carry no glog prefix.
  if (auto what = after(body, "CUDA error: ")) {
    Event& e = p.emit(Layer::pytorch, Severity::error, "cuda_error", ComponentKind::process, body);
    e.set_attr("error", std::string(trim(take_until(*what, "\n"))));
    e.component.rank = e.keys.rank;
    return Match::known;
  }
  if (contains(body, "Got completion from peer")) {
    return parse_ib_completion(p, body, Layer::nccl) ? Match::known : Match::damaged;
  }
  if (contains(body, "DistBackendError") || contains(body, "NCCL error in:") ||
      contains(body, "ncclRemoteError") || contains(body, "ncclSystemError") ||
      contains(body, "ncclInternalError") || contains(body, "ncclUnhandledCudaError")) {
    Event& e = p.emit(Layer::pytorch, Severity::error, "nccl_error", ComponentKind::process, body);
    e.component.rank = e.keys.rank;
    return Match::known;
  }
  // TORCH_NCCL_DESYNC_DEBUG report: "- [47] joined but didn't finish collective #41207" and
  // "ranks [1, 2] are the lagging ranks that caused this timeout".
  if (contains(body, "joined but didn't finish collective") || contains(body, "are the lagging ranks")) {
    sv t = ltrim(body);
    take(t, "- ");
    std::string ranks;
    if (auto list = token_after(t, "ranks [", "]")) ranks = std::string(*list);
    else if (take(t, '[')) ranks = std::string(take_until(t, "]"));
    if (ranks.empty()) return Match::damaged;
    Event& e = p.emit(Layer::pytorch, Severity::error, "desync_report", ComponentKind::process, body);
    e.set_attr("ranks", ranks);
    return Match::known;
  }
  if (starts_with(body, "terminate called after throwing")) {
    Event& e = p.emit(Layer::pytorch, Severity::error, "process_abort", ComponentKind::process, body);
    e.component.rank = e.keys.rank;
    return Match::known;
  }
  if (starts_with(body, "Traceback (most recent call last)") || starts_with(body, "what():") ||
      starts_with(body, "Exception raised from"))
    return Match::known;
  return Match::none;
}

}  // namespace

Match recognise_last_error(LineParser& p, sv body) {
  sv t = trim(body);
  if (t.empty()) return Match::none;
  if (contains(t, "Got completion from peer") || contains(t, "Got completion with "))
    return parse_ib_completion(p, t, Layer::nccl) ? Match::known : Match::damaged;
  if (Event* e = verbs_call_failure(p, t, Layer::nccl)) {
    e->set_attr("quoted_by", "pytorch");
    return Match::known;
  }
  const bool socket = starts_with(t, "socket") || contains(t, "Call to ") || contains(t, "Connection reset") ||
                      contains(t, "Connection closed") || contains(t, "Broken pipe") || contains(t, "Connection refused");
  // The network plugins (NET/IB, NET/OFI, NET/Socket) speak of requests on a NIC.
  const bool net = starts_with(t, "NET/") && !starts_with(t, "NET/Socket");
  Event& e = p.emit(Layer::nccl, Severity::error, socket ? "nccl_socket_error" : "nccl_last_error",
                    net ? ComponentKind::nic : ComponentKind::process, t);
  e.set_attr("quoted_by", "pytorch");
  if (socket) set_socket_peer(e, t);
  if (!net) e.component.rank = e.keys.rank;
  return Match::known;
}

Match recognise_pytorch(LineParser& p, sv body) {
  Glog g;
  if (!read_glog(body, g)) {
    // A glog-looking start that does not parse is a damaged line, not an unknown one.
    if ((starts_with(body, "[E") || starts_with(body, "[W") || starts_with(body, "[I")) &&
        contains(body.substr(0, 64), ".cpp:"))
      return Match::damaged;
    // Exception text re-printing the watchdog message ("what():  [PG ...] ... Watchdog caught").
    if (!contains(body, "Watchdog caught collective operation timeout")) return python_line(p, body);
    g = Glog{};
    g.severity = 'E';
    g.msg = body;
  }
  // A zoned collector time (journal, CRI) beats glog's local, year-less one.
  if (g.timed && (p.prefix().time_us == kUnknownTime || p.prefix().yearless))
    p.set_line_time(days_from_civil(p.year(), unsigned(g.month), unsigned(g.day)) * 86400000000LL +
                        g.clock_us,
                    true, true, 0.001);
  sv msg = g.msg;
  PgPrefix pg = read_pg(msg);
  const int prefix_rank = p.prefix().rank;
  Severity sev = from_glog(g.severity);
  auto process_event = [&](sv kind, Severity s) -> Event& {
    Event& e = p.emit(Layer::pytorch, s, kind, ComponentKind::process, msg);
    fill_process(e, pg, prefix_rank);
    if (g.tid >= 0) e.set_attr("tid", std::to_string(g.tid));
    return e;
  };
  if (contains(msg, "Watchdog caught collective operation timeout") || contains(msg, "timed out in blocking wait")) {
    if (!contains(msg, "SeqNum=")) return Match::damaged;
    Event& e = process_event("watchdog_timeout", Severity::error);
    read_work(e, msg);
    if (contains(msg, "blocking wait")) e.set_attr("blocking_wait", "1");
    // The pre-2.2 one-liner also carries the status; newer releases print it next.
    read_status(e, msg);
    return Match::known;
  }
  if (contains(msg, "detected by watchdog at work") || contains(msg, "Timeout at NCCL work")) {
    Event& e = process_event("watchdog_status", Severity::error);
    if (!read_status(e, msg)) {
      p.out().events.pop_back();
      return Match::damaged;
    }
    return Match::known;
  }
  if (contains(msg, "Received a dump signal")) {
    Event& e = process_event("dump_signal", Severity::warning);
    read_status(e, msg);
    if (contains(msg, "from this local rank")) e.set_attr("signal_from", "self");
    else if (auto r = int_after(msg, " rank ")) e.set_attr("signal_from", std::to_string(*r));
    return Match::known;
  }
  if (contains(msg, "Heartbeat monitor timed out") || contains(msg, "watchdog got stuck")) {
    Event& e = process_event("watchdog_stuck", Severity::error);
    if (auto v = int_after(msg, "got stuck for ")) e.set_attr("stuck_s", std::to_string(*v));
    return Match::known;
  }
  if (contains(msg, "ProcessGroupNCCL created ncclComm_")) {
    Event& e = process_event("pg_comm_created", Severity::info);
    if (auto ptr = token_after(msg, "ncclComm_ ", " ")) e.set_attr("comm", std::string(*ptr));
    if (auto dev = after(msg, "CUDA device: ")) {
      sv d = *dev;
      if (!d.empty() && is_digit(d[0])) e.set_attr("cuda_dev", std::string(take_until(d, " ")));
      else if (!d.empty() && static_cast<unsigned char>(d[0]) < 8)  // device index streamed as a char
        e.set_attr("cuda_dev", std::to_string(int(d[0])));
    }
    return Match::known;
  }
  if (contains(msg, "Some NCCL operations have failed or timed out")) {
    process_event("nccl_async_failure", Severity::error);
    if (contains(msg, "Got completion from peer")) parse_ib_completion(p, msg, Layer::nccl);
    return Match::known;
  }
  // torchrun's agent: "failed (exitcode: -6) local_rank: 3 (pid: 26026) of binary: ..."
  if (auto code = int_after(msg, "failed (exitcode: ")) {
    Event& e = process_event("child_failed", Severity::error);
    e.set_attr("exit_code", std::to_string(*code));
    if (auto lr = int_after(msg, "local_rank: ")) e.set_attr("local_rank", std::to_string(*lr));
    if (auto pid = int_after(msg, "(pid: ")) e.set_attr("pid", std::to_string(*pid));
    if (*code < 0 && *code > -256) e.set_attr("signal", std::to_string(-*code));
    return Match::known;
  }
  if (contains(msg, "watchdog thread terminated with exception")) {
    Event& e = process_event("watchdog_exception", Severity::error);
    if (auto what = after(msg, "terminated with exception: ")) e.set_attr("error", std::string(trim(*what)));
    return Match::known;
  }
  if (contains(msg, "taking the entire process down")) {
    process_event("process_abort", Severity::error);
    return Match::known;
  }
  if (contains(msg, "lagging ranks") || contains(msg, "lagging/dead/mismatched")) {
    Event& e = process_event("desync_report", Severity::error);
    if (auto ranks = token_after(msg, "ranks [", "]")) e.set_attr("ranks", std::string(*ranks));
    return Match::known;
  }
  if (contains(msg, "Got completion from peer")) {
    return parse_ib_completion(p, msg, Layer::nccl) ? Match::known : Match::damaged;
  }
  if (sev >= Severity::error && (contains(msg, "NCCL error") || contains(msg, "ncclRemoteError") ||
                                 contains(msg, "ncclSystemError"))) {
    process_event("nccl_error", Severity::error);
    return Match::known;
  }
  return Match::known;
}

}  // namespace astral::monitor
