// The astral CLI's shared conventions: help, version and exit codes for bad usage.
#include <catch2/catch.hpp>

#include "run_process.hpp"

using astral::test::run_process;

TEST_CASE("astral --help lists the command groups and exits 0") {
  auto r = run_process({ASTRAL_CLI, "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Usage: astral") != std::string::npos);
  CHECK(r.out.find("topo") != std::string::npos);
}

TEST_CASE("astral with an unknown subcommand is bad usage (exit 2)") {
  auto r = run_process({ASTRAL_CLI, "no-such-command"});
  CHECK(r.exit_code == 2);
  CHECK_FALSE(r.err.empty());
}

TEST_CASE("astral --version prints the version") {
  auto r = run_process({ASTRAL_CLI, "--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("astral 0.1.0") != std::string::npos);
}
