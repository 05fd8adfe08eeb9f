#pragma once
// The simulated cluster behind `astral monitor simulate`: hosts with GPUs and NICs cabled as the
// fabric says, ranks, clocks (skew and zone per machine), and one emitter per log source that
// renders a line in the real format of the release or OS chosen for this scenario.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "astral/monitor/fabric_graph.hpp"
#include "astral/monitor/simulate.hpp"

namespace astral::monitor::sim {

struct Nic {
  std::string name;    // mlx5_N
  int rail = 0;
  std::string bdf;     // 0000:0c:00.0
  std::string netdev;  // enp12s0np0
  std::string ip;      // RoCE address
  std::string sw, port;
};

struct Host {
  std::string name;
  std::vector<std::string> gpu_bdf;  // 0000:18:00.0 ...
  std::vector<Nic> nics;
  std::string oob_ip;
  int64_t skew_us = 0;   // host clock minus true time
  int64_t boot_us = 0;   // true time of boot
  int kernel_style = 0;  // 0 syslog, 1 journal ISO, 2 dmesg --ctime, 3 dmesg raw (+ kern.log copy)
  bool job = true;
  std::vector<int> ranks;
};

struct Rank {
  int rank = 0;
  int host = 0;
  int local = 0;
  int64_t pid = 0;
  int nic = 0;
  std::string comm_ptr;
};

struct Switch {
  std::string name;
  int style = 0;  // 0 SONiC with year, 1 SONiC without year, 2 Cumulus, 3 Onyx
  int64_t skew_us = 0;
  int64_t boot_us = 0;
};

struct Line {
  int64_t true_us;
  std::string text;
};

enum class Era { v1, v2_4, v2_5, v2_6 };          // PyTorch
enum class NcclEra { v2_18, v2_21, v2_26, v2_28, v2_29 };

class World {
 public:
  World(const FabricGraph& fabric, const SimulateOptions& options);

  std::mt19937_64 rng;
  SimulateOptions options;
  std::vector<Host> hosts;    // job hosts first, then bystanders
  std::vector<Rank> ranks;
  std::vector<Switch> switches;
  std::map<std::string, int> switch_index;
  Era era = Era::v2_6;
  NcclEra nccl = NcclEra::v2_21;
  bool roce = true;
  int job_layout = 0;  // 0 per-host train.log, 1 per-rank files, 2 CRI pod log per host
  int64_t tz_s = 0;    // the site's zone
  uint64_t comm_hash = 0;
  int64_t timeout_ms = 600000;
  std::map<std::string, std::vector<Line>> files;  // relative path -> lines
  std::map<std::string, int64_t> file_skew;        // relative path -> clock skew of its writer

  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); }
  int64_t pick(int64_t a, int64_t b) { return std::uniform_int_distribution<int64_t>(a, b)(rng); }
  bool chance(double p) { return uniform(0, 1) < p; }

  // Emitters (time = true time; each renders with its machine's clock).
  void nccl_line(const Rank& r, int64_t t, const std::string& level, const std::string& msg,
                 const std::string& source = "");
  void torch_line(const Rank& r, int64_t t, char severity, int src_line, const std::string& msg);
  void python_line(const Rank& r, int64_t t, const std::string& msg);
  void kernel_line(int host, int64_t t, const std::string& msg);
  void switch_line(int sw, int64_t t, const std::string& severity, const std::string& program, const std::string& msg);
  void sel_line(int host, int64_t t, const std::string& sensor, const std::string& event, bool asserted = true);
  void raw_line(const std::string& path, int64_t t, const std::string& text, int64_t skew = 0);

  std::string job_file(const Rank& r) const;
  const Nic& nic_of(const Rank& r) const { return hosts[size_t(r.host)].nics[size_t(r.nic)]; }
  // Port name as the switch's OS prints it.
  std::string port_name(int sw, const std::string& fabric_port) const;
  std::string pg_prefix(const Rank& r) const;

  // Writes every file (sorted by time, with duplicated/truncated lines as noise) and sets file
  // times to the last line's local clock.
  void write(const std::string& out_dir);

  int64_t start_us = 0;  // true time the job started
  const FabricGraph* fabric = nullptr;
};

// Calendar helpers for rendering.
struct Civil {
  int year, month, day, hour, minute, second;
  int64_t micros;
  int weekday;  // 0 Sunday
};
Civil to_civil(int64_t us);
std::string two(int v);

}  // namespace astral::monitor::sim
