// Rank, size, coordinator and token from the launcher's environment (Slurm, Open MPI, PMI,
// torchrun), so that `srun astral netbench` and `mpirun astral netbench` need no rank flags.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "astral/netbench/netbench.hpp"
#include "netbench/bootstrap.hpp"

namespace astral::netbench {
namespace {

struct RankSource {
  const char* rank_var;
  const char* size_var;
  const char* launcher;
  const char* step_var = nullptr;  // must also be set (Slurm: inside an srun step, not the batch script)
};
// Open MPI and PMI before Slurm: inside `srun --mpi=pmix` both are set and agree; a mismatch
// means a nested launch and is reported rather than guessed.
constexpr RankSource kRankSources[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
                                       {"PMI_RANK", "PMI_SIZE", "PMI"},
                                       {"SLURM_PROCID", "SLURM_NTASKS", "Slurm", "SLURM_STEP_ID"},
                                       {"RANK", "WORLD_SIZE", "torchrun"}};

std::optional<int> parse_count(const char* text) {
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > (1 << 24)) return std::nullopt;
  return int(v);
}

[[noreturn]] void launch_error(const std::string& what) { throw std::runtime_error("netbench: " + what); }

// "01-03" -> {"01","02","03"}; "7" -> {"7"}. Zero padding of the first bound is kept.
std::vector<std::string> expand_range(const std::string& item, const std::string& list) {
  auto dash = item.find('-');
  if (dash == std::string::npos) return {item};
  std::string lo = item.substr(0, dash), hi = item.substr(dash + 1);
  auto a = parse_count(lo.c_str()), b = parse_count(hi.c_str());
  if (!a || !b || *b < *a || *b - *a > 100000) launch_error(fmt::format("cannot read the Slurm node list '{}'", list));
  std::vector<std::string> out;
  for (int v = *a; v <= *b; ++v) {
    std::string digits = std::to_string(v);
    if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
    out.push_back(digits);
  }
  return out;
}

// One host expression ("gpu[01-02]-ib[1,3]") into its host names.
std::vector<std::string> expand_host(const std::string& expr, const std::string& list) {
  auto open = expr.find('[');
  if (open == std::string::npos) return {expr};
  auto close = expr.find(']', open);
  if (close == std::string::npos) launch_error(fmt::format("cannot read the Slurm node list '{}'", list));
  std::string prefix = expr.substr(0, open), inner = expr.substr(open + 1, close - open - 1);
  std::vector<std::string> rest = expand_host(expr.substr(close + 1), list);
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= inner.size()) {
    size_t comma = inner.find(',', start);
    std::string item = inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    for (const auto& v : expand_range(item, list))
      for (const auto& r : rest) out.push_back(prefix + v + r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The token file: readable by its owner only, since it authenticates every rank.
std::string read_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    launch_error(fmt::format("ASTRAL_NETBENCH_TOKEN_FILE {}: {}", path, std::strerror(errno)));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0 || st.st_uid != ::geteuid())
    launch_error(fmt::format("ASTRAL_NETBENCH_TOKEN_FILE {} must belong to you and be readable by you only "
                             "(chmod 600)", path));
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) launch_error(fmt::format("ASTRAL_NETBENCH_TOKEN_FILE {} is empty", path));
  return token;
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string expr = list.substr(start, i - start);
      if (!expr.empty())
        for (auto& h : expand_host(expr, list)) hosts.push_back(std::move(h));
      start = i + 1;
    }
  }
  return hosts;
}

std::string launch_token(const EnvFn& env) {
  if (const char* token = env("ASTRAL_NETBENCH_TOKEN"); token && *token) return token;
  if (const char* path = env("ASTRAL_NETBENCH_TOKEN_FILE"); path && *path) return read_token_file(path);
  launch_error("set ASTRAL_NETBENCH_TOKEN (or ASTRAL_NETBENCH_TOKEN_FILE, a chmod-600 file) to the same "
               "secret on every host; it authenticates ranks to the coordinator");
}

bool apply_launcher(const EnvFn& env, Options* o) {
  if (o->rank >= 0) return false;  // explicit --rank/--ranks/--coordinator win
  // Rank and size: every launcher present must agree.
  const RankSource* chosen = nullptr;
  int rank = -1, size = 0;
  for (const RankSource& s : kRankSources) {
    const char* r = env(s.rank_var);
    const char* n = env(s.size_var);
    if ((!r && !n) || (s.step_var && !env(s.step_var))) continue;
    auto rv = parse_count(r), nv = parse_count(n);
    if (!rv || !nv)
      launch_error(fmt::format("{} sets {}='{}' and {}='{}'; both must be counts", s.launcher, s.rank_var,
                               r ? r : "", s.size_var, n ? n : ""));
    if (*rv >= *nv)
      launch_error(fmt::format("{}={} is not below {}={}", s.rank_var, *rv, s.size_var, *nv));
    if (!chosen) {
      chosen = &s, rank = *rv, size = *nv;
    } else if (*rv != rank || *nv != size) {
      launch_error(fmt::format("launcher variables disagree: {}={} {}={} but {}={} {}={}", chosen->rank_var, rank,
                               chosen->size_var, size, s.rank_var, *rv, s.size_var, *nv));
    }
  }
  if (!chosen) return false;
  // Nothing in *o changes unless everything resolves: an error leaves the options as they were.
  auto take = [&](std::string coordinator) {
    o->rank = rank;
    o->ranks = size;
    if (o->coordinator.empty()) o->coordinator = std::move(coordinator);
    return true;
  };
  if (!o->coordinator.empty()) return take({});
  // The coordinator: MASTER_ADDR:MASTER_PORT, else the first host of the Slurm step.
  const char* addr = env("MASTER_ADDR");
  const char* port_text = env("MASTER_PORT");
  std::optional<int> port = parse_count(port_text);
  if (port_text && (!port || *port < 1 || *port > 65535))
    launch_error(fmt::format("MASTER_PORT='{}' is not a port number", port_text));
  if (addr && *addr) return take(fmt::format("{}:{}", addr, port.value_or(kDefaultCoordinatorPort)));
  const char* nodes = env("SLURM_STEP_NODELIST");
  if (!nodes || !*nodes) nodes = env("SLURM_NODELIST");
  if (nodes && *nodes) {
    auto hosts = expand_slurm_nodelist(nodes);
    if (hosts.empty()) launch_error(fmt::format("the Slurm node list '{}' names no host", nodes));
    return take(fmt::format("{}:{}", hosts.front(), port.value_or(kDefaultCoordinatorPort)));
  }
  launch_error(fmt::format("{} gives rank {} of {}, but no coordinator: missing MASTER_ADDR (and no "
                           "SLURM_STEP_NODELIST); set MASTER_ADDR[:MASTER_PORT] or pass --coordinator",
                           chosen->launcher, rank, size));
}

}  // namespace astral::netbench
