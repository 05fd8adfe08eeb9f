// `astral monitor simulate`: one job on the fabric, one injected fault, noise, ground truth.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "astral/monitor/simulate.hpp"
#include "names.hpp"
#include "sim_facility.hpp"
#include "sim_faults.hpp"
#include "sim_job.hpp"
#include "sim_world.hpp"

namespace astral::monitor {
using namespace sim;
namespace fs = std::filesystem;

namespace {

// How the job ends: who hangs until the watchdog, who died, who never issued the collective.
struct Hang {
  int64_t t_enq = 0;
  int64_t seq = 0;
  std::string op = "ALLREDUCE";
  std::set<int> dead, never_issued;
  std::map<int, std::string> other_op;
  bool fr = false;
};

void finish_hang(World& w, const Hang& h) {
  int first = -1;
  for (const Rank& r : w.ranks)
    if (!h.dead.count(r.rank) && !h.never_issued.count(r.rank)) {
      first = r.rank;
      break;
    }
  const int64_t ahead = w.pick(0, 2);
  int64_t t_wd_first = h.t_enq + w.timeout_ms * 1000;
  for (const Rank& r : w.ranks) {
    if (h.dead.count(r.rank)) continue;
    int64_t enq = h.t_enq + w.pick(0, 4000);
    if (h.never_issued.count(r.rank)) {
      dump_signal(w, r, t_wd_first + w.pick(200'000, 900'000), first, h.seq - 1, h.seq - 1);
      if (h.fr) flight_recorder(w, r, t_wd_first + 2'000'000, h.t_enq, h.seq - 1, h.seq - 1, h.op);
      continue;
    }
    auto op = h.other_op.count(r.rank) ? h.other_op.at(r.rank) : h.op;
    watchdog(w, r, enq, h.seq, op, h.seq + ahead, h.seq - 1, first);
    if (r.rank != first && w.chance(0.5)) dump_signal(w, r, t_wd_first + w.pick(200'000, 900'000), first, h.seq + ahead, h.seq - 1);
    if (h.fr) flight_recorder(w, r, t_wd_first + 2'000'000, enq, h.seq + ahead, h.seq - 1, op);
  }
}

void ras_report(World& w, const std::vector<std::string>& lines, int64_t t) {
  const Host& h = w.hosts[0];
  for (size_t i = 0; i < lines.size(); ++i) w.raw_line(h.name + "/ncclras.txt", t + int64_t(i), lines[i], h.skew_us);
}

// Routine and unrelated lines everywhere; errors only on machines outside the job.
void noise(World& w, int64_t t0, int64_t t_fault, int victim_host) {
  for (size_t hi = 0; hi < w.hosts.size(); ++hi) {
    const Host& h = w.hosts[hi];
    if (!h.job) continue;
    int64_t span = std::max<int64_t>(t_fault - t0, 60'000'000);
    if (w.chance(0.4)) {
      const std::string& bdf = h.nics[size_t(w.pick(0, int64_t(h.nics.size()) - 1))].bdf;
      int64_t t = t0 + w.pick(0, span);
      w.kernel_line(int(hi), t, "pcieport 0000:00:03.1: AER: Correctable error message received from " + bdf);
      w.kernel_line(int(hi), t + 20, "mlx5_core " + bdf + ": AER: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)");
      w.kernel_line(int(hi), t + 40, "mlx5_core " + bdf + ": AER:   device [15b3:1021] error status/mask=00000001/00002000");
      w.kernel_line(int(hi), t + 60, "mlx5_core " + bdf + ": AER:    [ 0] RxErr                  (First)");
    }
    if (w.chance(0.5))
      for (int k = 0; k < 3; ++k)
        w.kernel_line(int(hi), t0 + w.pick(0, span),
                      "mlx5_core " + h.nics[0].bdf + ": mlx5_cmd_out_err:838:(pid " + std::to_string(w.pick(1000, 90000)) +
                          "): ACCESS_REG(0x805) op_mod(0x1) failed, status bad parameter(0x3), syndrome (0x6c4d48), err(-22)");
    if (w.chance(0.5)) {
      w.sel_line(int(hi), h.boot_us + 5'000'000, "Event Logging Disabled #0x07", "Log area reset/cleared");
      w.sel_line(int(hi), h.boot_us + 9'000'000, "Power Supply #0x51", "Presence detected");
      if (w.chance(0.5)) w.sel_line(int(hi), t0 + w.pick(0, span), "Memory #0x88", "Correctable ECC (CPU0_G1)");
    }
    if (int(hi) != victim_host && w.chance(0.1)) {
      int gpu = int(w.pick(0, int64_t(h.gpu_bdf.size()) - 1));
      w.kernel_line(int(hi), t0 - w.pick(3600, 7200) * 1000000LL,
                    "NVRM: Xid (PCI:" + h.gpu_bdf[size_t(gpu)].substr(0, 10) +
                        "): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter");
    }
  }
  for (const Rank& r : w.ranks)
    if (r.local == 0 && w.chance(0.4))
      w.python_line(r, t0 + 11'000'000,
                    "[W Utils.hpp:133] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
                    "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())");
  if (w.chance(0.15) && !w.ranks.empty())
    w.python_line(w.ranks[0], t0 + 40'000'000, std::string("\x01\x7f\xfe binary junk \x03", 18));
  // Machines outside the job: real errors that explain nothing about it.
  for (size_t hi = 0; hi < w.hosts.size(); ++hi) {
    const Host& h = w.hosts[hi];
    if (h.job || !w.chance(0.6)) continue;
    int64_t t = t_fault + w.pick(-7200, 1800) * 1000000LL;
    switch (w.pick(0, 3)) {
      case 0:
        gpu_ecc(w, int(hi), int(w.pick(0, int64_t(h.gpu_bdf.size()) - 1)), t, w.pick(1000, 90000));
        break;
      case 1:
        gpu_fell_off(w, int(hi), int(w.pick(0, int64_t(h.gpu_bdf.size()) - 1)), t, w.pick(1000, 90000), false);
        break;
      case 2:
        link_transition(w, int(hi), int(w.pick(0, int64_t(h.nics.size()) - 1)), t, false);
        break;
      default: {
        int nic = int(w.pick(0, int64_t(h.nics.size()) - 1));
        for (int k = 0; k < 3; ++k) {
          link_transition(w, int(hi), nic, t + k * 30'000'000, false);
          link_transition(w, int(hi), nic, t + k * 30'000'000 + 5'000'000, true);
        }
      }
    }
  }
}

// A healthy run's red herrings: conditions that cleared by themselves or predate the job, which
// a finished job must not be blamed on.
void healthy_traps(World& w, int64_t t0, int64_t t_end, double iter_s) {
  const Host& h0 = w.hosts[0];
  // NCCL RAS saw one rank a collective behind; the next report is all OK.
  if (w.chance(0.5) && w.ranks.size() > 1) {
    const Rank& r = w.ranks[size_t(w.pick(0, int64_t(w.ranks.size()) - 1))];
    const Host& rh = w.hosts[size_t(r.host)];
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(w.comm_hash));
    const int64_t op = w.pick(3000, 40000);
    const std::string n = std::to_string(w.ranks.size());
    const int64_t t = t0 + (t_end - t0) / 3;
    std::vector<std::string> lines = {
        "  Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "      0         1         " + std::to_string(w.hosts.size()) + "         8        " + n + "        " + n +
            "   RUNNING  MISMATCH",
        "  #0-0 (" + std::string(hash) + ") MISMATCH",
        "    Communicator ranks have different collective operation counts",
        "    " + std::to_string(w.ranks.size() - 1) + " ranks have launched up to operation " + std::to_string(op),
        "    1 rank has launched up to operation " + std::to_string(op - 1),
        "    Rank " + std::to_string(r.rank) + " -- GPU " + std::to_string(r.local) + " managed by process " +
            std::to_string(r.pid) + " on node " + rh.oob_ip,
        "  Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "      0         1         " + std::to_string(w.hosts.size()) + "         8        " + n + "        " + n +
            "   RUNNING        OK"};
    for (size_t i = 0; i < lines.size(); ++i)
      w.raw_line(h0.name + "/ncclras.txt", t + int64_t(i < 7 ? i : 60'000'000 + i), lines[i], h0.skew_us);
  }
  // A checkpoint iteration: long, and rank 0 late once.
  if (w.chance(0.5)) checkpoint_iteration(w, t0 + (t_end - t0) / 2, iter_s);
  // An Xid from before the job on one of its GPUs (cleared by the reset that preceded it).
  if (w.chance(0.5)) {
    int host = int(w.pick(0, int64_t(w.hosts.size()) - 1));
    while (host > 0 && !w.hosts[size_t(host)].job) --host;
    const Host& h = w.hosts[size_t(host)];
    const std::string pci = h.gpu_bdf[size_t(w.pick(0, int64_t(h.gpu_bdf.size()) - 1))].substr(0, 10);
    w.kernel_line(host, t0 - w.pick(2, 8) * 3600'000'000LL,
                  "NVRM: Xid (PCI:" + pci + "): 48, pid=" + std::to_string(w.pick(1000, 90000)) +
                      ", name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.");
  }
  // A port flapping on a host outside the job.
  for (size_t hi = 0; hi < w.hosts.size(); ++hi) {
    if (w.hosts[hi].job || !w.chance(0.5)) continue;
    const int nic = int(w.pick(0, int64_t(w.hosts[hi].nics.size()) - 1));
    const int64_t t = t0 + w.pick(0, std::max<int64_t>(t_end - t0, 1));
    for (int k = 0; k < 3; ++k) {
      link_transition(w, int(hi), nic, t + k * 20'000'000, false);
      link_transition(w, int(hi), nic, t + k * 20'000'000 + 4'000'000, true);
    }
    break;
  }
}

std::string fabric_file(World& w, const FabricGraph& fabric, std::string& name) {
  switch (w.pick(0, 3)) {
    case 0: name = "ibnetdiscover.txt"; return fabric_to_ibnetdiscover(fabric);
    case 1: name = "fabric.json"; return fabric_to_json(fabric);
    default: name = "cabling.csv"; return fabric.to_cabling_csv();
  }
}

}  // namespace

GroundTruth simulate(const FabricGraph& fabric, const SimulateOptions& o, const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec))
    throw std::runtime_error(out_dir + ": output folder exists and is not empty");
  World w(fabric, o);
  GroundTruth truth;
  truth.fault = o.fault;
  truth.ranks = o.ranks;
  truth.seed = o.seed;
  for (const Host& h : w.hosts)
    if (h.job) truth.hosts.push_back(h.name);
  const int64_t t0 = w.start_us;
  std::map<std::string, std::vector<std::string>> redfish_events;  // plant faults: source -> payloads
  std::map<std::string, std::map<std::string, std::string>> mockups;  // source -> Redfish mockup tree
  const int64_t t_fault = t0 + w.pick(15, 90) * 60'000'000 + w.pick(0, 59'999'999);
  const double iter_s = w.uniform(0.8, 2.5);
  for (size_t hi = 0; hi < w.hosts.size(); ++hi) host_boot_lines(w, int(hi));
  job_start(w, t0);
  // A failing cooling loop or power shelf slows the job for minutes before it stops.
  const bool slow_plant = o.fault == FaultKind::cooling_loss || o.fault == FaultKind::power_capping;
  const int64_t plant_lead = slow_plant ? plant_lead_us(w) : 0;
  training_output(w, t0 + 60'000'000, t_fault - plant_lead, iter_s);
  Hang hang;
  hang.seq = w.pick(2000, 60000);
  hang.t_enq = t_fault - w.pick(0, 800'000);
  hang.fr = w.era != Era::v1 && w.chance(0.4);
  if (w.chance(0.3)) hang.op = w.chance(0.5) ? "_REDUCE_SCATTER_BASE" : "_ALLGATHER_BASE";
  bool hangs = true;
  // The victim: a random rank (its host, GPU and NIC).
  const Rank& v = w.ranks[size_t(w.pick(0, int64_t(w.ranks.size()) - 1))];
  const Host& vh = w.hosts[size_t(v.host)];
  const Nic& vn = vh.nics[size_t(v.nic)];
  const int vsw = w.switch_index.count(vn.sw) ? w.switch_index[vn.sw] : -1;
  const std::string gpu_pci = vh.gpu_bdf[size_t(v.local)].substr(0, 10);
  truth.fault_time_us = t_fault;
  int victim_host = v.host;
  switch (o.fault) {
    case FaultKind::none:
      hangs = false;
      victim_host = -1;
      truth.description = "healthy run";
      if (w.chance(0.3)) inspector(w, t_fault - 120'000'000, 40, w.uniform(8, 40), -1, 0);
      if (o.noise) healthy_traps(w, t0, t_fault, iter_s);
      job_end(w, t_fault + w.pick(1'000'000, 30'000'000));
      break;
    case FaultKind::nic_down: {
      if (w.chance(0.5))
        w.kernel_line(v.host, t_fault - 2'000'000, "mlx5_core " + vn.bdf + ": poll_health:739:(pid 0): device's health compromised - reached miss count");
      link_transition(w, v.host, v.nic, t_fault, false);
      if (w.chance(0.5))
        w.kernel_line(v.host, t_fault + 6'000'000, "mlx5_core " + vn.bdf + ": mlx5_health_try_recover:338:(pid " +
                                                       std::to_string(w.pick(500, 9000)) + "): health recovery flow aborted, PCI reads still not working");
      network_errors(w, v.host, v.nic, t_fault + w.pick(15'000'000, 30'000'000));
      truth.component = {ComponentKind::nic, vh.name, vn.name, "", "", -1};
      truth.description = vn.name + " on " + vh.name + " went down";
      break;
    }
    case FaultKind::link_flap: {
      int flaps = int(w.pick(3, 6));
      int64_t t = t_fault;
      int longest = int(w.pick(0, flaps - 1));
      for (int k = 0; k < flaps; ++k) {
        int64_t down = k == longest ? w.pick(20, 45) * 1000000LL : w.pick(1, 12) * 1000000LL;
        link_transition(w, v.host, v.nic, t, false);
        link_transition(w, v.host, v.nic, t + down, true);
        if (k == longest) network_errors(w, v.host, v.nic, t + w.pick(15'000'000, 19'000'000));
        t += down + w.pick(5, 60) * 1000000LL;
      }
      truth.component = {ComponentKind::link, vh.name, vn.name, vn.sw, vn.port, -1};
      truth.description = "link " + vn.name + " on " + vh.name + " <-> " + vn.sw + " " + vn.port + " flapped";
      break;
    }
    case FaultKind::optic_ber: {
      if (vsw < 0) throw std::runtime_error("simulate: the victim NIC has no switch in the fabric");
      int64_t t = t_fault - w.pick(5, 20) * 60'000'000;
      optic_alarm(w, vsw, vn.port, t, false);
      for (; t < t_fault; t += w.pick(40, 90) * 1000000LL) ber_warning(w, vsw, vn.port, t);
      if (w.chance(0.7)) optic_alarm(w, vsw, vn.port, t_fault - w.pick(5, 40) * 1000000LL, true);
      if (w.chance(0.3)) {
        link_transition(w, v.host, v.nic, t_fault + 2'000'000, false);
        link_transition(w, v.host, v.nic, t_fault + 9'000'000, true);
      }
      network_errors(w, v.host, v.nic, t_fault + w.pick(0, 20'000'000));
      truth.component = {ComponentKind::optic, "", "", vn.sw, vn.port, -1};
      truth.description = "transceiver at " + vn.sw + " " + vn.port + " degraded (low RX power, high BER)";
      break;
    }
    case FaultKind::switch_reboot: {
      if (vsw < 0) throw std::runtime_error("simulate: the victim NIC has no switch in the fabric");
      int64_t t_back = t_fault + w.pick(120, 240) * 1000000LL;
      bool logs_down = w.chance(0.5);
      switch_reboot(w, vsw, t_fault, t_back, w.chance(0.8));
      for (size_t hi = 0; hi < w.hosts.size(); ++hi)
        for (size_t n = 0; n < w.hosts[hi].nics.size(); ++n) {
          if (w.hosts[hi].nics[n].sw != vn.sw) continue;
          link_transition(w, int(hi), int(n), t_fault + w.pick(0, 500'000), false, true, logs_down);
          link_transition(w, int(hi), int(n), t_back + w.pick(1'000'000, 4'000'000), true, true, false);
          if (w.hosts[hi].job) network_errors(w, int(hi), int(n), t_fault + w.pick(15'000'000, 30'000'000));
        }
      truth.component = {ComponentKind::switch_, "", "", vn.sw, "", -1};
      truth.description = "switch " + vn.sw + " rebooted";
      break;
    }
    case FaultKind::gpu_xid79: {
      gpu_fell_off(w, v.host, v.local, t_fault, v.pid, w.chance(0.5));
      if (w.chance(0.6)) w.python_line(v, t_fault + 900'000, "RuntimeError: CUDA error: unspecified launch failure");
      if (w.chance(0.3)) w.sel_line(v.host, t_fault, "Critical Interrupt #0xa1", "Bus Fatal Error");
      hang.dead.insert(v.rank);
      for (int p : network_peers(w, v))
        completion_error(w, w.ranks[size_t(p)], t_fault + w.pick(18'000'000, 32'000'000), vh.oob_ip, 12);
      if (w.chance(0.2))
        ras_report(w, {"  Errors", "  ======", "", "  DEAD", "    1 job process is considered dead (unreachable via the RAS network)",
                       "    Process " + std::to_string(v.pid) + " on node " + vh.oob_ip + " managing GPU " + std::to_string(v.local)},
                   t_fault + 120'000'000);
      truth.component = {ComponentKind::gpu, vh.name, gpu_pci, "", "", v.rank};
      truth.description = "GPU " + gpu_pci + " on " + vh.name + " fell off the bus (Xid 79)";
      break;
    }
    case FaultKind::gpu_ecc: {
      gpu_ecc(w, v.host, v.local, t_fault, v.pid);
      w.python_line(v, t_fault + 500'000, "RuntimeError: CUDA error: uncorrectable ECC error encountered");
      if (w.chance(0.5)) w.nccl_line(v, t_fault + 400'000, "WARN", "Cuda failure 'uncorrectable ECC error encountered'", "enqueue.cc:1556");
      hang.dead.insert(v.rank);
      for (int p : network_peers(w, v))
        completion_error(w, w.ranks[size_t(p)], t_fault + w.pick(18'000'000, 32'000'000), vh.oob_ip, 12);
      truth.component = {ComponentKind::gpu, vh.name, gpu_pci, "", "", v.rank};
      truth.description = "uncorrectable ECC error on GPU " + gpu_pci + " of " + vh.name;
      break;
    }
    case FaultKind::pcie_aer: {
      int bursts = int(w.pick(3, 8));
      for (int k = 0; k < bursts; ++k) pcie_aer_burst(w, v.host, v.local, t_fault - w.pick(0, 120) * 1000000LL);
      if (w.chance(0.3)) {
        gpu_fell_off(w, v.host, v.local, t_fault + 5'000'000, v.pid, true);
        hang.dead.insert(v.rank);
      } else if (w.era == Era::v2_6 && w.chance(0.6)) {
        w.torch_line(v, hang.t_enq + 480'000'000, 'E', 1743,
                     w.pg_prefix(v) + " ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in "
                                      "monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., "
                                      "CudaEventDestroy) hang blocking the watchdog, and could be triggered by another "
                                      "thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or "
                                      "other deadlock-prone behaviors.");
      }
      truth.component = {ComponentKind::gpu, vh.name, gpu_pci, "", "", v.rank};
      truth.description = "PCIe errors (AER completion timeouts) on the link of GPU " + gpu_pci + " of " + vh.name;
      break;
    }
    case FaultKind::app_desync: {
      if (w.era != Era::v1 && w.chance(0.5)) {
        hang.other_op[v.rank] = "BROADCAST";
        hang.op = "ALLREDUCE";
      } else {
        hang.never_issued.insert(v.rank);
        if (w.era != Era::v2_6) hang.fr = true;  // without dump signals, the dumps tell
        if (w.chance(0.2)) {
          char hash[24];
          std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(w.comm_hash));
          ras_report(w, {"  #0-0 (" + std::string(hash) + ") MISMATCH", "    Communicator ranks have different collective operation counts",
                         "    " + std::to_string(w.ranks.size() - 1) + " ranks have launched up to operation " + std::to_string(hang.seq),
                         "    1 rank has launched up to operation " + std::to_string(hang.seq - 1),
                         "    Rank " + std::to_string(v.rank) + " -- GPU " + std::to_string(v.local) + " managed by process " +
                             std::to_string(v.pid) + " on node " + vh.oob_ip},
                     t_fault + 200'000'000);
        }
      }
      victim_host = -1;
      truth.component = {ComponentKind::process, vh.name, "", "", "", v.rank};
      truth.description = "rank " + std::to_string(v.rank) + " desynchronised from its process group";
      break;
    }
    case FaultKind::cooling_loss:
    case FaultKind::power_capping:
    case FaultKind::leak: {
      PlantOutcome plant = plant_fault(w, o.fault, v, t_fault, plant_lead, iter_s);
      hangs = plant.hangs;
      hang.dead = plant.dead;
      hang.never_issued = plant.late;
      truth.component = plant.component;
      truth.description = plant.description;
      redfish_events = std::move(plant.redfish_events);
      mockups = std::move(plant.mockups);
      break;
    }
    case FaultKind::gpu_straggler: {
      hangs = false;
      double base = w.uniform(8, 40);
      inspector(w, t_fault - 600'000'000, int(w.pick(30, 60)), base, v.rank, w.uniform(0.7, 2.5));
      training_output(w, t_fault - 600'000'000, t_fault, iter_s * 1.6);
      truth.component = {ComponentKind::gpu, vh.name, gpu_pci, "", "", v.rank};
      truth.description = "GPU " + gpu_pci + " of " + vh.name + " (rank " + std::to_string(v.rank) + ") is slow";
      break;
    }
  }
  if (hangs) {
    if (w.chance(0.2)) inspector(w, t_fault - 300'000'000, 30, w.uniform(8, 40), -1, 0);
    finish_hang(w, hang);
  }
  if (o.noise) noise(w, t0, t_fault, victim_host);
  w.write(out_dir);
  if (o.include_fabric) {
    std::string name;
    std::string text = fabric_file(w, fabric, name);
    std::ofstream(fs::path(out_dir) / name, std::ios::binary) << text;
  }
  for (const auto& [source, payloads] : redfish_events) {
    const fs::path dir = out_dir + ".plant";
    fs::create_directories(dir);
    std::ofstream events(dir / (source + ".redfish-events.jsonl"));
    for (const std::string& p : payloads) events << p << "\n";
  }
  // <out>.plant/<source>/: a DMTF mockup directory (<path>/index.json) in the plant's state now.
  for (const auto& [source, resources] : mockups)
    for (const auto& [path, json_text] : resources) {
      const fs::path dir = fs::path(out_dir + ".plant") / source / fs::path(path.substr(std::string("/redfish/v1").size())).relative_path();
      fs::create_directories(dir);
      std::ofstream(dir / "index.json") << json_text << "\n";
    }
  std::ofstream(out_dir + ".truth.json") << to_json(truth).dump(2) << "\n";
  return truth;
}

}  // namespace astral::monitor
