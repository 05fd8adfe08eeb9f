#pragma once
// Job-side emitters of the scenario generator (NCCL, PyTorch, Flight Recorder, Inspector).
#include <cstdint>
#include <string>
#include <vector>

#include "sim_world.hpp"

namespace astral::monitor::sim {

// Ranks on the neighbour hosts that share `r`'s rail (its network peers in the rings).
std::vector<int> network_peers(const World& w, const Rank& r);

void job_start(World& w, int64_t t0);
void training_output(World& w, int64_t from, int64_t to, double iter_s);
// A clean end: every rank destroys its communicator ("Destroy COMPLETE") and the trainer says so.
void job_end(World& w, int64_t t_end);
// One iteration that writes a checkpoint: rank 0 is late to the next collective, once.
void checkpoint_iteration(World& w, int64_t t, double iter_s);
// IB completion error (status 12 retry exceeded, 5 flush) in the wording of the NCCL release.
void completion_error(World& w, const Rank& r, int64_t t, const std::string& peer_ip, int status);
// NCCL's view of the port going down/up (async events).
void port_event(World& w, const Rank& r, int64_t t, bool up);
// Watchdog timeout of `r` stuck in collective `seq`, with the PG status lines of the release.
// `signal_from` is the rank that signals the dump (v2.6+).
void watchdog(World& w, const Rank& r, int64_t t_enq, int64_t seq, const std::string& op, int64_t last_enqueued,
              int64_t last_completed, int signal_from);
void dump_signal(World& w, const Rank& r, int64_t t, int from, int64_t last_enqueued, int64_t last_completed);
void flight_recorder(World& w, const Rank& r, int64_t t_dump, int64_t t_enq, int64_t last_enqueued,
                     int64_t last_completed, const std::string& op);
// NCCL Inspector records: `count` collectives; `straggler` (or -1) arrives late by
// delay_factor x the collective time, so everybody else's collective lasts that much longer.
void inspector(World& w, int64_t from, int count, double base_ms, int straggler, double delay_factor);

}  // namespace astral::monitor::sim
