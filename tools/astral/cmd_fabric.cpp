// astral fabric generate|show|paths|locate|sim|compare: the cluster fabric model and the flow-level
// simulator (topo/fabric*, seer/flowsim*). Thin: parse flags, call the libraries, print.
#include <fmt/format.h>

#include <astral/seer/ecmp_table.hpp>
#include <astral/seer/flowsim.hpp>
#include <astral/seer/flowsim_compare.hpp>
#include <astral/seer/flowsim_plot.hpp>
#include <astral/topo/fabric.hpp>
#include <astral/topo/fabric_generate.hpp>
#include <astral/topo/fabric_routing.hpp>
#include <astral/topo/fabric_summary.hpp>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.hpp"

namespace astral::cli {
namespace {

using nlohmann::json;

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }
void progress_line(const std::string& message) { std::fprintf(stderr, "astral fabric: %s\n", message.c_str()); }

// "64MiB", "1.5GiB", "512KB", "1e9" -> bytes.
double parse_bytes(const std::string& text) {
  static const std::pair<const char*, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"K", 1024.0},   {"M", 1048576.0},   {"G", 1073741824.0},   {"B", 1.0}};
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  double scale = unit.empty() ? 1.0 : 0.0;
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (end == 0 || scale == 0 || !(value > 0))
    throw UsageError(fmt::format("--bytes '{}': expected a size such as 64MiB, 1GiB or 1e9", text));
  return value * scale;
}

topo::Fabric load(const std::string& path) {
  try {
    return topo::load_fabric(path);
  } catch (const topo::FabricError& e) {
    throw UsageError(fmt::format("{} (fix the file or regenerate it with `astral fabric generate`)", e.what()));
  }
}

// A GPU as "node0001:3", "node0001:gpu3" or a global index "517".
int parse_gpu(const topo::Fabric& f, const std::string& text, const char* flag) {
  auto colon = text.rfind(':');
  int index = -1;
  if (colon == std::string::npos) {
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
    if (ec == std::errc() && p == text.data() + text.size() && index >= 0 && index < f.gpu_count())
      return index;
  } else if (auto host = f.find_host(text.substr(0, colon))) {
    std::string local = text.substr(colon + 1);
    if (local.rfind("gpu", 0) == 0 || local.rfind("GPU", 0) == 0) local = local.substr(3);
    auto [p, ec] = std::from_chars(local.data(), local.data() + local.size(), index);
    if (ec == std::errc() && p == local.data() + local.size() && index >= 0 &&
        index < f.profile_of(*host).gpus)
      return f.global_gpu(*host, index);
  }
  throw UsageError(fmt::format("{} '{}': not a GPU of this fabric; use HOST:GPU (e.g. {}:0) or a "
                               "global index below {}",
                               flag, text, f.hosts().empty() ? "node0001" : f.hosts()[0].name,
                               f.gpu_count()));
}

// Generator flags shared by `generate` and `compare`.
struct GeneratorFlags {
  topo::GenerateOptions o;
  void add(CLI::App* app) {
    app->add_option("--gpus-per-host", o.gpus_per_host, "GPUs (and rail NICs) per host")->capture_default_str();
    app->add_option("--radix", o.radix, "switch ports (e.g. 64 or 128)")->capture_default_str();
    app->add_option("--port-gbps", o.port_gbps, "switch port speed, Gb/s")->capture_default_str();
    app->add_option("--nic-gbps", o.nic_gbps, "NIC speed, Gb/s (split over two ports with --dual-plane)")
        ->capture_default_str();
    app->add_option("--oversubscription", o.oversubscription,
                    "down:up ratio at the top tier boundary (e.g. 3 for 3:1)")
        ->capture_default_str();
    app->add_flag("--dual-plane", o.dual_plane, "dual-ToR: the two ports of a NIC on leaves of two planes");
    app->add_option("--planes", o.planes, "multi-plane NICs: 1, 2 or 4 ports per NIC, one per plane");
    app->add_option("--tiers", o.tiers, "fat-tree only: force 2 or 3 tiers (default: fewest that fit)");
    app->add_flag("--bundle", o.bundle, "fewest spines, with parallel leaf-spine links");
  }
};

// Simulation flags shared by `sim` and `compare`.
struct SimFlags {
  seer::FlowSimOptions o;
  std::string pattern = "alltoall", bytes = "64MiB", placement = "packed", balance = "equal",
              engine = "auto";
  void add(CLI::App* app) {
    app->add_option("--engine", engine, "auto | classes | counted (ECMP counted from the hash model) | connections (the per-connection reference)")
        ->capture_default_str();
    app->add_option("--memory-limit", o.memory_limit_gib, "GiB: refuse a larger simulation up front")
        ->capture_default_str();
    app->add_option("--fail-switch", o.fail_switches, "take every link of a switch down (repeatable)");
    app->add_option("--pattern", pattern, "alltoall | moe | permutation | ring | tree")->capture_default_str();
    app->add_option("--bytes", bytes, "per GPU: all-to-all buffer, all-reduce buffer or message")
        ->capture_default_str();
    app->add_option("--qps", o.qps, "QPs per connection and NIC port (NCCL_IB_QPS_PER_CONNECTION)")
        ->capture_default_str();
    app->add_option("--balance", balance, "how bytes spread over QPs: equal (NCCL) | adaptive")
        ->capture_default_str();
    app->add_option("--placement", placement, "packed | fragmented")->capture_default_str();
    app->add_option("--jobs", o.jobs, "jobs sharing the cluster")->capture_default_str();
    app->add_option("--fill", o.fill, "fraction of hosts given to jobs")->capture_default_str();
    app->add_option("--skew", o.moe_skew, "moe: Zipf exponent of expert popularity")->capture_default_str();
    app->add_option("--polarisation", o.routing.polarisation,
                    "fraction of switches sharing one ECMP hash seed (0..1)")
        ->capture_default_str();
    app->add_flag("--cross-segment-only", o.cross_segment_only,
                  "all-to-all: only pairs of hosts under different leaves");
    app->add_option("--trials", o.trials, "independent hash seeds and draws to average")->capture_default_str();
    app->add_option("--seed", o.seed, "random seed")->capture_default_str();
    app->add_option("--event-limit", o.event_sim_limit,
                    "subflows up to which non-uniform traffic is simulated event by event")
        ->capture_default_str();
    app->add_option("--event-tolerance", o.event_tolerance,
                    "batch completions within this fraction of elapsed time")
        ->capture_default_str();
    app->add_option("--goodput-limit", o.goodput_limit, "subflows up to which the t=0 goodput is solved")
        ->capture_default_str();
  }
  seer::FlowSimOptions resolve() {
    auto p = seer::parse_pattern(pattern);
    if (!p) throw UsageError(fmt::format("--pattern '{}': use alltoall, moe, permutation, ring or tree", pattern));
    o.pattern = *p;
    auto pl = seer::parse_placement(placement);
    if (!pl) throw UsageError(fmt::format("--placement '{}': use packed or fragmented", placement));
    o.placement = *pl;
    if (balance != "equal" && balance != "adaptive")
      throw UsageError(fmt::format("--balance '{}': use equal or adaptive", balance));
    o.balance = balance == "equal" ? seer::QpBalance::kEqualSplit : seer::QpBalance::kAdaptive;
    o.bytes = parse_bytes(bytes);
    if (engine == "auto") o.engine = seer::SimEngine::kAuto;
    else if (engine == "classes") o.engine = seer::SimEngine::kClasses;
    else if (engine == "connections") o.engine = seer::SimEngine::kConnections;
    else if (engine == "counted") o.engine = seer::SimEngine::kCounted;
    else throw UsageError(fmt::format("--engine '{}': use auto, classes, counted or connections", engine));
    return o;
  }
};

void add_generate(CLI::App* fabric, Outcome&) {
  struct Flags {
    std::string kind, output;
    int gpus = 0;
    bool json = false;
    GeneratorFlags gen;
  };
  static Flags f;
  auto* app = fabric->add_subcommand("generate", "generate a fabric: same-rail-t2 | fat-tree | rail-only");
  app->add_option("kind", f.kind, "same-rail-t2 | fat-tree | rail-only")->required();
  app->add_option("--gpus", f.gpus, "GPU count")->required();
  app->add_option("-o,--output", f.output, "fabric JSON to write")->required();
  f.gen.add(app);
  app->add_flag("--json", f.json, "print the summary as JSON");
  app->callback([] {
    auto kind = topo::parse_fabric_kind(f.kind);
    if (!kind) throw UsageError(fmt::format("kind '{}': use same-rail-t2, fat-tree or rail-only", f.kind));
    f.gen.o.kind = *kind;
    f.gen.o.gpus = f.gpus;
    topo::Fabric fab = [&] {
      try {
        return topo::generate_fabric(f.gen.o);
      } catch (const topo::FabricError& e) {
        throw UsageError(e.what());
      }
    }();
    topo::save_fabric(fab, f.output);
    auto summary = topo::summarize(fab);
    if (f.json) {
      json j = topo::to_json(summary);
      j["output"] = f.output;
      print(j.dump(2) + "\n");
    } else {
      print(topo::format_summary(summary));
      print(fmt::format("written    {}\n", f.output));
    }
  });
}

void add_show(CLI::App* fabric, Outcome&) {
  struct Flags {
    std::string path;
    bool json = false;
  };
  static Flags f;
  auto* app = fabric->add_subcommand("show", "switch and link counts per tier, oversubscription, bisection, optics");
  app->add_option("fabric,--fabric", f.path, "fabric JSON")->required();
  app->add_flag("--json", f.json, "machine-readable output");
  app->callback([] {
    auto summary = topo::summarize(load(f.path));
    print(f.json ? topo::to_json(summary).dump(2) + "\n" : topo::format_summary(summary));
  });
}

void add_paths(CLI::App* fabric, Outcome&) {
  struct Flags {
    std::string path, from, to;
    size_t limit = 8;
    bool json = false;
  };
  static Flags f;
  auto* app = fabric->add_subcommand("paths", "candidate paths between two GPUs (direct and via PXN)");
  app->add_option("--fabric", f.path, "fabric JSON")->required();
  app->add_option("--from", f.from, "source GPU: HOST:GPU or global index")->required();
  app->add_option("--to", f.to, "destination GPU: HOST:GPU or global index")->required();
  app->add_option("--limit", f.limit, "paths to list")->capture_default_str();
  app->add_flag("--json", f.json, "machine-readable output");
  app->callback([] {
    topo::Fabric fab = load(f.path);
    topo::Router router(fab);
    int src = parse_gpu(fab, f.from, "--from"), dst = parse_gpu(fab, f.to, "--to");
    long total = 0;
    auto paths = router.candidates(src, dst, f.limit, &total);
    if (f.json) {
      json j = {{"from", src}, {"to", dst}, {"total_paths", total}, {"paths", json::array()}};
      for (const auto& p : paths) {
        json path = {{"pxn", p.pxn}, {"nvlink_only", p.nvlink_only}, {"description", router.describe(p)}};
        if (p.pxn) path["via_gpu"] = p.via_gpu;
        for (int sw : p.switches) path["switches"].push_back(fab.switches()[sw].name);
        if (!p.nvlink_only) {
          path["links"].push_back(fab.link_label(p.src_link));
          for (int l : p.switch_links) path["links"].push_back(fab.link_label(l));
          path["links"].push_back(fab.link_label(p.dst_link));
        }
        j["paths"].push_back(std::move(path));
      }
      print(j.dump(2) + "\n");
      return;
    }
    print(fmt::format("{} candidate paths (showing {})\n", total, paths.size()));
    for (const auto& p : paths) print("  " + router.describe(p) + "\n");
  });
}

void add_locate(CLI::App* fabric, Outcome& outcome) {
  struct Flags {
    std::string path, port;
    bool json = false;
  };
  static Flags f;
  auto* app = fabric->add_subcommand("locate", "what a NIC or switch port is cabled to");
  app->add_option("--fabric", f.path, "fabric JSON")->required();
  app->add_option("port", f.port, "host:nic:port (node0001:mlx5_0:1) or switch:port (r3-07:17)")->required();
  app->add_flag("--json", f.json, "machine-readable output");
  app->callback([&outcome] {
    topo::Fabric fab = load(f.path);
    auto end = fab.parse_endpoint(f.port);
    if (!end)
      throw UsageError(fmt::format("'{}' names no port in {}: use host:nic:port or switch:port[/lane]", f.port, f.path));
    auto link = fab.find_link(f.port);
    if (!link) {
      print(fmt::format("{}: not cabled\n", f.port));
      outcome.exit_code = kChecksFailed;
      return;
    }
    const topo::Link& l = fab.links()[*link];
    const topo::Endpoint& other = l.a == *end ? l.b : l.a;
    auto device = [&](const topo::Endpoint& e) {
      return e.is_host() ? fab.hosts()[e.host].name : fab.switches()[e.sw].name;
    };
    if (f.json) {
      json j = {{"port", fab.endpoint_label(*end)}, {"peer", fab.endpoint_label(other)},
                {"peer_device", device(other)}, {"link", *link}, {"gbps", l.gbps},
                {"state", l.state == topo::LinkState::kUp ? "up" : "down"}};
      if (!other.is_host()) j["peer_tier"] = fab.switches()[other.sw].tier;
      print(j.dump(2) + "\n");
      return;
    }
    print(fmt::format("{} -> {} (link #{}, {} Gb/s, {})\n", fab.endpoint_label(*end),
                      fab.endpoint_label(other), *link, l.gbps,
                      l.state == topo::LinkState::kUp ? "up" : "down"));
  });
}

void add_sim(CLI::App* fabric, Outcome& outcome) {
  struct Flags {
    std::string path, routing = "ecmp", plot;
    std::vector<std::string> fail;
    bool json = false, quiet = false;
    SimFlags sim;
  };
  static Flags f;
  auto* app = fabric->add_subcommand("sim", "flow-level simulation of a traffic pattern on a fabric");
  app->add_option("--fabric", f.path, "fabric JSON")->required();
  app->add_option("--routing", f.routing, "ecmp | pinned | same-rail | same-rail-pinned")->capture_default_str();
  f.sim.add(app);
  app->add_option("--fail", f.fail, "take a link down: switch:port, host:nic:port or #index (repeatable)");
  app->add_option("--fail-random", f.sim.o.fail_random_links, "take N random switch-to-switch links down");
  app->add_option("--plot", f.plot, "write the link-load distribution as SVG");
  app->add_flag("--json", f.json, "machine-readable output");
  app->add_flag("-q,--quiet", f.quiet, "no progress on stderr");
  app->callback([&outcome] {
    topo::Fabric fab = load(f.path);
    seer::FlowSimOptions o = f.sim.resolve();
    auto routing = topo::parse_routing(f.routing);
    if (!routing) throw UsageError(fmt::format("--routing '{}': use ecmp, pinned, same-rail or same-rail-pinned", f.routing));
    routing->polarisation = o.routing.polarisation;
    o.routing = *routing;
    o.fail_links = f.fail;
    seer::FlowSimResult r;
    try {
      r = seer::simulate(fab, o, f.quiet ? seer::Progress{} : seer::Progress{progress_line});
    } catch (const topo::FabricError& e) {
      throw UsageError(e.what());
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    if (!f.plot.empty())
      cli::write_text_file(f.plot, seer::svg_load_cdf(r.load_factors, fmt::format("{} on {} ({})", r.pattern, r.fabric, r.routing)));
    print(f.json ? seer::to_json(r).dump(2) + "\n" : seer::format_result(r));
    if (r.unroutable > 0) outcome.exit_code = kChecksFailed;
  });
}

void add_compare(CLI::App* fabric, Outcome&) {
  struct Flags {
    std::vector<int> gpus;
    std::vector<std::string> failures;
    std::string plot;
    bool json = false, quiet = false;
    GeneratorFlags gen;
    SimFlags sim;
  };
  static Flags f;
  auto* app = fabric->add_subcommand(
      "compare", "same-rail Tier-2 against a fat tree with ECMP at the same GPU count");
  app->add_option("--gpus", f.gpus, "GPU counts, e.g. 1024,4096,16384")->required()->delimiter(',');
  app->add_option("--failure", f.failures, "failure cases per design: spine, tor, nic-port, links:K")
      ->delimiter(',');
  f.gen.add(app);
  f.sim.add(app);
  app->add_option("--plot", f.plot, "write the efficiencies as an SVG bar chart");
  app->add_flag("--json", f.json, "machine-readable output");
  app->add_flag("-q,--quiet", f.quiet, "no progress on stderr");
  app->callback([] {
    seer::FlowSimOptions o = f.sim.resolve();
    o.goodput_limit = std::min<size_t>(o.goodput_limit, 0);  // compare reports completion only
    std::vector<seer::FabricComparison> all;
    for (int gpus : f.gpus) {
      try {
        all.push_back(seer::compare_fabrics(gpus, f.gen.o, o, f.quiet ? seer::Progress{} : seer::Progress{progress_line},
                                            f.failures));
      } catch (const topo::FabricError& e) {
        throw UsageError(e.what());
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    }
    if (!f.plot.empty()) {
      std::vector<std::string> groups;
      std::vector<seer::BarSeries> series;
      for (const auto& c : all) {
        groups.push_back(fmt::format("{} GPUs", c.gpus));
        for (size_t i = 0; i < c.rows.size(); ++i) {
          if (series.size() <= i) series.push_back({c.rows[i].fabric_kind + " " + c.rows[i].routing, {}});
          series[i].values.push_back(c.rows[i].result.efficiency);
        }
      }
      cli::write_text_file(f.plot, seer::svg_bar_chart(fmt::format("{} efficiency (achieved / ideal)", all[0].rows[0].result.pattern),
                                             "efficiency", groups, series, 1.0));
    }
    if (f.json) {
      json j = json::array();
      for (const auto& c : all) j.push_back(seer::to_json(c));
      print(j.dump(2) + "\n");
    } else {
      print(seer::format_comparisons(all));
    }
  });
}

void add_ecmp_table(CLI::App* fabric, Outcome&) {
  struct Flags {
    std::string path, routing = "ecmp", output;
    std::vector<int> qps{1, 4};
    std::vector<std::string> patterns{"alltoall", "ring"}, placements{"packed", "fragmented"};
    bool quiet = false;
    SimFlags sim;
  };
  static Flags f;
  auto* app = fabric->add_subcommand(
      "ecmp-table", "write the ECMP-efficiency table of a fabric for Seer (per pattern, group size, QPs)");
  app->add_option("--fabric", f.path, "fabric JSON")->required();
  app->add_option("--routing", f.routing, "ecmp | pinned | same-rail | same-rail-pinned")->capture_default_str();
  app->add_option("--qps-list", f.qps, "QP counts, e.g. 1,4")->delimiter(',')->capture_default_str();
  app->add_option("--patterns", f.patterns, "patterns, e.g. alltoall,ring")->delimiter(',')->capture_default_str();
  app->add_option("--placements", f.placements, "packed,fragmented")->delimiter(',')->capture_default_str();
  app->add_option("-o,--output", f.output, "table JSON to write")->required();
  f.sim.add(app);
  app->add_flag("-q,--quiet", f.quiet, "no progress on stderr");
  app->callback([] {
    topo::Fabric fab = load(f.path);
    seer::EcmpTableOptions t;
    t.sim = f.sim.resolve();
    auto routing = topo::parse_routing(f.routing);
    if (!routing) throw UsageError(fmt::format("--routing '{}': use ecmp, pinned, same-rail or same-rail-pinned", f.routing));
    routing->polarisation = t.sim.routing.polarisation;
    t.sim.routing = *routing;
    t.patterns.clear();
    for (const auto& p : f.patterns) {
      auto pattern = seer::parse_pattern(p);
      if (!pattern) throw UsageError(fmt::format("--patterns '{}': use alltoall, moe, permutation, ring or tree", p));
      t.patterns.push_back(*pattern);
    }
    t.placements.clear();
    for (const auto& p : f.placements) {
      auto placement = seer::parse_placement(p);
      if (!placement) throw UsageError(fmt::format("--placements '{}': use packed or fragmented", p));
      t.placements.push_back(*placement);
    }
    for (int q : f.qps)
      if (q < 1 || q > 64) throw UsageError(fmt::format("--qps-list {}: must be 1..64", q));
    t.qps = f.qps;
    seer::EcmpTable table;
    try {
      table = seer::make_ecmp_table(fab, t, f.quiet ? seer::Progress{} : seer::Progress{progress_line});
    } catch (const topo::FabricError& e) {
      throw UsageError(e.what());
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    cli::write_text_file(f.output, seer::to_json(table).dump(1) + "\n");
    print(fmt::format("{} entries for {} written to {}\n", table.entries.size(), table.fabric_name, f.output));
  });
}

void register_fabric(CLI::App& root, Outcome& outcome) {
  auto* fabric = root.add_subcommand("fabric", "cluster fabric model and flow-level simulator");
  fabric->require_subcommand(1);
  add_generate(fabric, outcome);
  add_show(fabric, outcome);
  add_paths(fabric, outcome);
  add_locate(fabric, outcome);
  add_sim(fabric, outcome);
  add_compare(fabric, outcome);
  add_ecmp_table(fabric, outcome);
}

}  // namespace
}  // namespace astral::cli

ASTRAL_COMMAND(fabric, astral::cli::register_fabric);
