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

// This process's environment with `extra` ("NAME=value") set over it. A child's argv and
// environment are built before fork: the parent may have threads, and a malloc in the child can
// deadlock on a lock one of them held at the fork (ASan's allocator has no fork handlers).
inline std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : extra) replaced = replaced || kv.substr(0, kv.find('=')) == name;
    if (!replaced) out.push_back(std::move(entry));
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// argv/envp form of `strings`: their c_str()s and a terminating null (valid while they live).
inline std::vector<char*> exec_vector(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

inline ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s = 120,
                                 const std::vector<std::string>& extra_env = {}) {
  char out_path[] = "/tmp/astral-test-out-XXXXXX";
  char err_path[] = "/tmp/astral-test-err-XXXXXX";
  int out_fd = mkstemp(out_path);
  int err_fd = mkstemp(err_path);
  ProcessResult result;
  const std::vector<std::string> environment = merged_environment(extra_env);
  std::vector<char*> args = exec_vector(argv), env = exec_vector(environment);
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
