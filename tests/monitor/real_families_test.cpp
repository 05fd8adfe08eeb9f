// Families of real-world lines that the fixtures under tests/fixtures/real-logs do not cover on
// their own: the direction of NCCL RAS mismatch lists, mlx5_ib port states, routine BMC power
// rows, srun task exits, PyTorch's watchdog-thread exception, the line after "Last error:", and
// NCCL's origin (pid, tid, cudaDev) as part of an event's identity in a bundle.
#include <catch2/catch.hpp>

#include "astral/monitor/bundle.hpp"
#include "monitor_test_util.hpp"

using namespace astral::monitor;
using namespace astral::monitor::testing;

TEST_CASE("NCCL RAS mismatch lists: the ranks under the lower count are behind, under the highest ahead") {
  const std::string head =
      "  #0-0 (27a079b828ff1a75) MISMATCH\n"
      "    Communicator ranks have different collective operation counts\n";
  SECTION("the listed ranks launched fewer operations: behind") {
    ParseResult r = parse_text(head +
                                   "    26 ranks have launched up to operation 6650\n"
                                   "    6 ranks have launched up to operation 6649\n"
                                   "    Rank 0 -- GPU 0 managed by process 483072 on node 172.16.64.210\n",
                               "node01");
    auto lag = kind_of(r, "ras_lagging_rank");
    REQUIRE(lag.size() == 1);
    CHECK(lag[0]->keys.rank == 0);
    CHECK(lag[0]->attr("behind_by") == "1");
    CHECK(kind_of(r, "ras_ahead_rank").empty());
  }
  SECTION("the listed ranks launched more: ahead, not to blame") {
    ParseResult r = parse_text(head +
                                   "    2 ranks have launched up to operation 6651\n"
                                   "    Rank 4 -- GPU 4 managed by process 483076 on node 172.16.64.210\n"
                                   "    Rank 5 -- GPU 5 managed by process 483077 on node 172.16.64.210\n"
                                   "    30 ranks have launched up to operation 6650\n",
                               "node01");
    CHECK(kind_of(r, "ras_lagging_rank").empty());
    auto ahead = kind_of(r, "ras_ahead_rank");
    REQUIRE(ahead.size() == 2);
    CHECK(ahead[0]->severity == Severity::info);
  }
}

TEST_CASE("mlx5_ib port state lines: Link DOWN and ACTIVE on the HCA's port") {
  ParseResult r = parse_text(
      "[ 8812.101] mlx5_core 0000:3b:00.0: Port: 1 Link DOWN\n"
      "[ 8815.448] mlx5_core 0000:3b:00.0: Port: 1 Link ACTIVE\n",
      "node07");
  auto down = kind_of(r, "nic_link_down");
  auto up = kind_of(r, "nic_link_up");
  REQUIRE(down.size() == 1);
  REQUIRE(up.size() == 1);
  CHECK(down[0]->component.port == "1");
  CHECK(down[0]->attr("bdf") == "0000:3b:00");
}

TEST_CASE("BMC SEL: a routine power-off row is not a hardware fault, AC loss is") {
  ParseResult r = parse_text(
      "   1 | 05/14/2026 | 20:40:26 | Power Unit #0x01 | Power off/down | Asserted\n"
      "   2 | 05/14/2026 | 20:40:27 | System ACPI Power State #0x02 | S4/S5: soft-off | Asserted\n"
      "   3 | 05/14/2026 | 21:02:11 | Power Unit #0x01 | AC lost | Asserted\n",
      "node07");
  auto routine = kind_of(r, "bmc_power_state");
  REQUIRE(routine.size() == 2);
  for (const Event* e : routine) CHECK(e->severity == Severity::info);
  auto sel = kind_of(r, "sel_event");
  REQUIRE(sel.size() == 1);
  CHECK(sel[0]->severity >= Severity::error);
}

TEST_CASE("srun task exits and PyTorch's watchdog-thread exception") {
  ParseResult r = parse_text(
      "srun: error: gpu-a07: task 13: Exited with exit code 1\n"
      "srun: error: gpu-a07: task 14: Killed\n"
      "[rank3]:[E1118 09:13:44.337000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process "
      "group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error\n",
      "login01");
  auto exits = kind_of(r, "process_exit");
  REQUIRE(exits.size() == 2);
  CHECK(exits[0]->host == "gpu-a07");
  CHECK(exits[0]->keys.rank == 13);
  CHECK(exits[0]->attr("exit_code") == "1");
  CHECK(exits[1]->keys.rank == 14);
  auto wd = kind_of(r, "watchdog_exception");
  REQUIRE(wd.size() == 1);
  CHECK(wd[0]->keys.rank == 3);
}

TEST_CASE("The line after PyTorch's 'Last error:' is NCCL's error, whatever its wording") {
  ParseResult r = parse_text(
      "[rank7]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
      "[rank7]: Last error:\n"
      "[rank7]: NET/IB : Got completion from peer 10.1.0.9<40111> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
      "Last error:\n"
      "Call to ibv_reg_mr failed with error Cannot allocate memory\n",
      "node03");
  auto retry = kind_of(r, "retry_exceeded");
  REQUIRE(retry.size() == 1);
  CHECK(retry[0]->attr("peer_ip") == "10.1.0.9");
  CHECK(retry[0]->keys.rank == 7);
  auto verbs = kind_of(r, "ib_verbs_error");
  REQUIRE(verbs.size() == 1);
  CHECK(verbs[0]->attr("error") == "Cannot allocate memory");
}

TEST_CASE("Bundle: identical NCCL errors of different processes stay apart, a line shipped twice does not") {
  TempDir dir;
  const std::string a = "node1:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error\n";
  const std::string b = "node1:814:868 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error\n";
  dir.write("node1/train.log", a + b);
  dir.write("node1/copy-of-train.log", a);
  BundleOptions o;
  o.jobs = 1;
  o.year = 2025;
  Bundle bundle = load_bundle(dir.path(), o);
  int fatal = 0;
  for (const Event& e : bundle.events) fatal += e.kind == "ib_fatal_event";
  CHECK(fatal == 2);
}
