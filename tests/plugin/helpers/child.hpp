#pragma once
// A child process with pipes on stdin and stdout, for tests that talk to a peer line by line and
// then kill, stop or wait for it. Every wait has a deadline.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "run_process.hpp"

namespace astral::test {

class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    // Everything the child needs is built before fork: the parent has threads (the plugin's,
    // softhca's engine), and a malloc in the child can deadlock on a lock one of them held at
    // the fork (ASan's allocator has no fork handlers). Between fork and exec: no allocation.
    const std::vector<std::string> environment = merged_environment(env);
    std::vector<char*> args = exec_vector(argv), envp = exec_vector(environment);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(to_child_);
    close(from_child_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  void write_line(const std::string& line) {
    std::string text = line + "\n";
    if (::write(to_child_, text.data(), text.size()) != ssize_t(text.size())) {
      throw std::runtime_error("write to child failed");
    }
  }

  // The next line of the child's stdout; throws at EOF or after timeout_s.
  std::string read_line(double timeout_s = 60) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw std::runtime_error("child printed no line in time: " + buffer_);
      pollfd p{from_child_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(from_child_, chunk, sizeof chunk);
      if (n <= 0) throw std::runtime_error("child closed stdout: " + buffer_);
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Everything the child still prints until it exits.
  std::string read_rest(double timeout_s = 60) {
    std::string rest = buffer_;
    buffer_.clear();
    try {
      for (;;) rest += read_line(timeout_s) + "\n";
    } catch (const std::exception&) {
      rest += buffer_;
    }
    return rest;
  }

  // Exit status (or 128 + signal); throws when the child outlives the deadline.
  int wait(double timeout_s = 60) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("child hung");
      usleep(2000);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void signal(int sig) { ::kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

}  // namespace astral::test
