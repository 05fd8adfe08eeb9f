#pragma once
// How a subcommand group plugs into the `astral` CLI. Each tools/astral/cmd_<group>.cpp defines a
// function that adds its subcommands to the root app and registers it with ASTRAL_COMMAND; main()
// needs no edit when a group is added.
#include <CLI/CLI.hpp>

#include <string>

namespace astral::cli {

// Exit codes shared by every command (DESIGN.md): 0 ok, 1 checks failed, 2 bad usage or input.
enum ExitCode : int { kOk = 0, kChecksFailed = 1, kBadInput = 2 };

// What a command reports back to main(); set from inside a CLI11 callback.
struct Outcome {
  int exit_code = kOk;
};

// Thrown by commands for bad input: main() prints "astral: <message>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whole-file output and input for commands; failures throw UsageError naming the path.
void write_text_file(const std::string& path, const std::string& text);
// The same through a temporary file in the same directory renamed over `path`: a reader sees the
// old file or the whole new one, never part of it.
void write_text_file_atomically(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);

using RegisterFn = void (*)(CLI::App& root, Outcome& outcome);
bool register_group(const char* name, RegisterFn fn);

}  // namespace astral::cli

#define ASTRAL_COMMAND(name, fn) \
  [[maybe_unused]] static const bool astral_registered_##name = ::astral::cli::register_group(#name, fn)
