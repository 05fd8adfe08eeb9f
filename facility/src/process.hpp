#pragma once
// Runs a program without a shell (argv as given), with a timeout, capturing stdout and stderr.
#include <chrono>
#include <string>
#include <vector>

namespace astral::facility::detail {

struct CommandResult {
  int exit_code = -1;
  bool not_found = false;  // the program does not exist on PATH
  bool timed_out = false;
  std::string out, err;
};
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace astral::facility::detail
