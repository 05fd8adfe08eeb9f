#pragma once
// Runs a program as a child process and collects its exit code, stdout and stderr; used by CLI and
// multi-process tests. A hung child is killed after timeout_s so a test can fail instead of hang.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace astral::test {

struct ProcessResult {
  int exit_code = -1;  // -1 with signal set when the child died from a signal
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The child's environment: this process's, with each NAME=VALUE of `extra_env` replacing NAME.
// Built before fork, because the child of a multi-threaded test may not allocate (another thread
// can hold the allocator's lock at the fork) and putenv can allocate.
inline std::vector<char*> child_environment(const std::vector<std::string>& extra_env) {
  std::vector<char*> env;
  auto name_of = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& kv : extra_env) replaced = replaced || name_of(kv) == name_of(*e);
    if (!replaced) env.push_back(*e);
  }
  for (const auto& kv : extra_env) env.push_back(const_cast<char*>(kv.c_str()));
  env.push_back(nullptr);
  return env;
}

inline ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s = 120,
                                 const std::vector<std::string>& extra_env = {}) {
  char out_path[] = "/tmp/astral-test-out-XXXXXX";
  char err_path[] = "/tmp/astral-test-err-XXXXXX";
  int out_fd = mkstemp(out_path);
  int err_fd = mkstemp(err_path);
  ProcessResult result;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env = child_environment(extra_env);
  pid_t pid = fork();
  if (pid == 0) {  // nothing allocates from here to exec
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execvpe(args[0], args.data(), env.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  close(out_fd);
  close(err_fd);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  unlink(out_path);
  unlink(err_path);
  return result;
}

}  // namespace astral::test
