#pragma once
// Physical-layer emitters of the scenario generator.
#include <cstdint>
#include <string>

#include "sim_world.hpp"

namespace astral::monitor::sim {

void switch_port_state(World& w, int sw, const std::string& fabric_port, int64_t t, bool up);
// Both ends of a host cable change state (kernel, switch, and NCCL's async events on its ranks).
void link_transition(World& w, int host, int nic, int64_t t, bool up, bool host_side = true, bool switch_side = true);
// Retry-exceeded errors between the ranks on (host, nic) and their network peers, both ways.
void network_errors(World& w, int host, int nic, int64_t t);
void optic_alarm(World& w, int sw, const std::string& fabric_port, int64_t t, bool alarm);
void ber_warning(World& w, int sw, const std::string& fabric_port, int64_t t);
void switch_reboot(World& w, int sw, int64_t t, int64_t t_back, bool announce);
void gpu_fell_off(World& w, int host, int gpu, int64_t t, int64_t pid, bool with_aer);
void gpu_ecc(World& w, int host, int gpu, int64_t t, int64_t pid);
void pcie_aer_burst(World& w, int host, int gpu, int64_t t);
void host_boot_lines(World& w, int host);

}  // namespace astral::monitor::sim
