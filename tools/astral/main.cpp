// astral: git-style CLI over Astral's libraries. Subcommand groups register themselves
// (command.hpp); this file only parses, dispatches and maps errors to exit codes.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "command.hpp"

namespace astral::cli {
namespace {
std::vector<std::pair<std::string, RegisterFn>>& registry() {
  static std::vector<std::pair<std::string, RegisterFn>> groups;
  return groups;
}
}  // namespace

bool register_group(const char* name, RegisterFn fn) {
  registry().emplace_back(name, fn);
  return true;
}
}  // namespace astral::cli

int main(int argc, char** argv) {
  using namespace astral::cli;
  CLI::App app{"astral: topology audit, fabric model, Seer, traces, monitor and facility telemetry",
               "astral"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "astral 0.1.0");
  Outcome outcome;
  auto groups = registry();
  std::sort(groups.begin(), groups.end());  // deterministic --help regardless of link order
  for (auto& [name, fn] : groups) fn(app, outcome);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kBadInput;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "astral: %s\n", e.what());
    return kBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "astral: error: %s\n", e.what());
    return kBadInput;
  }
  return outcome.exit_code;
}
