// libhwloc 2.9's XML import trusts its input: some malformed files crash it inside
// hwloc_topology_load (a root object without complete_nodeset makes it set a bit in a NULL
// bitmap: tests/fixtures/astral/fuzz-regressions/topo_hwloc_xml). Validating the XML ourselves
// would mean knowing every assumption hwloc makes, so tools import the file once in a child
// process: a crash there is reported as bad input, and the caller then imports the file in process
// knowing that the same library on the same bytes gets through.
#include "hwloc_xml_probe.hpp"

#include <fcntl.h>
#include <hwloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "astral/topo/node.hpp"

namespace astral::topo::detail {
namespace {

constexpr int kImported = 0;
constexpr int kRejected = 3;  // hwloc said no: the in-process import gives the reason
constexpr int kTimeoutSeconds = 30;

// Runs in the child: only hwloc, then _exit, so nothing of the parent's state (atexit handlers,
// buffered streams, sanitizer leak checks) runs twice. hwloc's complaints and a sanitizer's
// report of the crash go to /dev/null: the parent says it in one line.
[[noreturn]] void import_and_exit(const char* path) {
  // A crash must kill the child by its signal: handlers it inherited (a sanitizer's, a fuzzer's
  // that writes the input out as a finding) would report the parent's input as their own crash.
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) signal(sig, SIG_DFL);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
  }
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) _exit(kRejected);
  if (hwloc_topology_set_xml(topo, path) != 0) _exit(kRejected);
  if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) _exit(kRejected);
  _exit(hwloc_topology_load(topo) == 0 ? kImported : kRejected);
}

// waitpid with a deadline: hwloc on a valid file takes milliseconds, so poll with a short sleep.
bool wait_with_deadline(pid_t pid, int& status) {
  timespec step{0, 1'000'000};  // 1 ms, doubling to 50 ms
  for (double waited = 0; waited < kTimeoutSeconds;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // not ours to wait for any more: treat as done
    nanosleep(&step, nullptr);
    waited += double(step.tv_nsec) / 1e9;
    step.tv_nsec = std::min<long>(step.tv_nsec * 2, 50'000'000);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace

void probe_hwloc_xml_in_child(const std::string& path) {
  pid_t pid = fork();
  if (pid < 0) return;  // no child to spare: the in-process import is all there is
  if (pid == 0) import_and_exit(path.c_str());
  int status = 0;
  if (!wait_with_deadline(pid, status))
    throw TopologyError(fmt::format("{}: hwloc's XML import did not finish in {} s; not a usable "
                                    "hwloc XML topology", path, kTimeoutSeconds));
  if (WIFEXITED(status) && (WEXITSTATUS(status) == kImported || WEXITSTATUS(status) == kRejected))
    return;
  std::string how = WIFSIGNALED(status) ? fmt::format("signal {}", strsignal(WTERMSIG(status)))
                                        : fmt::format("exit status {}", WEXITSTATUS(status));
  throw TopologyError(fmt::format("{}: malformed hwloc XML: libhwloc's import crashed on it ({}, "
                                  "in a child process)", path, how));
}

}  // namespace astral::topo::detail
