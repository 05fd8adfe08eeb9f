// astral monitor: diagnose | timeline | simulate | events (thin: parse flags, call the monitor
// library, print).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/monitor/bundle.hpp"
#include "astral/monitor/diagnose.hpp"
#include "astral/monitor/simulate.hpp"
#include "astral/monitor/timeline.hpp"
#include "command.hpp"
#include "monitor_sources.hpp"

namespace astral::cli {
namespace {

using namespace astral::monitor;

struct LoadFlags {
  std::string bundle;
  std::string fabric;
  std::string site;
  int year = 0;
  std::string tz;
  unsigned jobs = 0;
  MonitorSourceFlags sources;  // journal files, syslog tree, Prometheus
};

void add_load_flags(CLI::App* cmd, LoadFlags& f) {
  cmd->add_option("bundle", f.bundle, "Bundle folder (a folder per host, switches/) or one log file "
                                      "(optional with --journal or --syslog-dir)");
  cmd->add_option("--fabric", f.fabric, "Fabric: fabric JSON, ibnetdiscover output or cabling CSV "
                                        "(default: a fabric file found in the bundle)");
  cmd->add_option("--site", f.site, "Site layout (JSON: hosts in racks, the CDUs, loops, shelves and feeds serving "
                                    "them) that joins plant alarms to the job (default: a site layout in the bundle)");
  cmd->add_option("--year", f.year, "Year of year-less timestamps (default: from file times)");
  cmd->add_option("--tz", f.tz, "Zone of the hosts' local timestamps: +08:00, UTC, Europe/Berlin "
                                "(default: inferred from file times)");
  cmd->add_option("--jobs", f.jobs, "Parser threads (default: one per core)");
  add_source_flags(cmd, f.sources);
}

Bundle load(const LoadFlags& f) {
  BundleOptions o;
  o.year = f.year;
  o.fabric_path = f.fabric;
  o.site_path = f.site;
  o.jobs = f.jobs;
  if (!f.tz.empty()) {
    auto tz = parse_tz(f.tz, int64_t(std::time(nullptr)));
    if (!tz) throw UsageError("--tz " + f.tz + ": not a zone (use +08:00, UTC or an IANA name like Asia/Shanghai)");
    o.tz_offset_s = *tz;
  }
  o.progress = [](std::string_view line) { std::fprintf(stderr, "astral monitor: %.*s\n", int(line.size()), line.data()); };
  if (f.bundle.empty() && !has_log_sources(f.sources))
    throw UsageError("give a bundle folder, --journal DIR or --syslog-dir DIR");
  apply_source_flags(o, f.sources);
  if (!f.bundle.empty() && !std::filesystem::exists(f.bundle))
    throw UsageError(f.bundle + ": no such bundle (a folder per host, or a log file)");
  if (!f.fabric.empty() && !std::filesystem::exists(f.fabric))
    throw UsageError(f.fabric + ": no such fabric file (fabric JSON, ibnetdiscover output or cabling CSV)");
  if (!f.site.empty() && !std::filesystem::exists(f.site))
    throw UsageError(f.site + ": no such site layout (docs/facility.md \"Site layout\")");
  return load_bundle(f.bundle, o);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void register_monitor(CLI::App& root, Outcome& outcome) {
  CLI::App* monitor = root.add_subcommand("monitor", "Join every layer's logs from every host and name the root cause");
  monitor->require_subcommand(1);

  // diagnose
  auto diag = std::make_shared<LoadFlags>();
  auto diag_json = std::make_shared<bool>(false);
  auto diag_files = std::make_shared<bool>(false);
  auto diag_timeline = std::make_shared<std::string>();
  auto diag_min = std::make_shared<double>(0.25);
  CLI::App* d = monitor->add_subcommand("diagnose", "Ranked root causes of an incident, with evidence (exit 0 either way)");
  add_load_flags(d, *diag);
  d->add_flag("--json", *diag_json, "JSON report (top level: root_causes, best first)");
  d->add_flag("--files", *diag_files, "Include per-file line counts (unknown, damaged) in the JSON");
  d->add_option("--timeline", *diag_timeline, "Also write the Perfetto timeline to this file");
  d->add_option("--min-confidence", *diag_min, "Drop candidates below this confidence (0..1)");
  d->callback([=, &outcome] {
    auto t0 = std::chrono::steady_clock::now();
    Bundle b = load(*diag);
    const std::vector<MonitorSourceNote> notes = add_source_metrics(b, diag->sources);
    DiagnoseOptions o;
    o.min_confidence = *diag_min;
    Diagnosis result = diagnose(b, o);
    if (!diag_timeline->empty()) write_timeline(b, &result, *diag_timeline);
    if (*diag_json) {
      nlohmann::json j = to_json(result, b, *diag_files);
      for (const MonitorSourceNote& n : notes) j["sources"].push_back({{"source", n.source}, {"status", n.status}, {"detail", n.detail}});
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else
      std::cout << to_text(result, b);
    std::fprintf(stderr, "astral monitor: diagnosed %zu files, %zu events in %.2f s\n", b.files.size(), b.events.size(),
                 seconds_since(t0));
    outcome.exit_code = kOk;
  });

  // timeline
  auto tl = std::make_shared<LoadFlags>();
  auto tl_out = std::make_shared<std::string>();
  auto tl_raw = std::make_shared<bool>(false);
  CLI::App* t = monitor->add_subcommand("timeline", "Merge all layers of all hosts into one Perfetto-openable trace");
  add_load_flags(t, *tl);
  t->add_option("-o,--output", *tl_out, "Output file (Chrome JSON trace; open in ui.perfetto.dev)")->required();
  t->add_flag("--no-diagnosis", *tl_raw, "Skip diagnosis and clock alignment (raw times)");
  t->callback([=, &outcome] {
    Bundle b = load(*tl);
    add_source_metrics(b, tl->sources);
    std::unique_ptr<Diagnosis> result;
    if (!*tl_raw) result = std::make_unique<Diagnosis>(diagnose(b));
    write_timeline(b, result.get(), *tl_out);
    std::fprintf(stderr, "astral monitor: wrote %s (%zu events)\n", tl_out->c_str(), b.events.size());
    outcome.exit_code = kOk;
  });

  // simulate
  auto sim = std::make_shared<SimulateOptions>();
  auto sim_fabric = std::make_shared<std::string>();
  auto sim_fault = std::make_shared<std::string>("none");
  auto sim_out = std::make_shared<std::string>();
  auto sim_quiet = std::make_shared<bool>(false);
  auto sim_json = std::make_shared<bool>(false);
  CLI::App* s = monitor->add_subcommand("simulate", "Write an incident bundle with one injected fault (ground truth beside it)");
  s->add_option("--fabric", *sim_fabric,
                "Fabric file (fabric JSON, ibnetdiscover, cabling CSV), or rail:HOSTS[:RAILS[:HOSTS_PER_LEAF]] "
                "for a built-in rail-optimised fabric")
      ->required();
  std::string kinds;
  for (FaultKind k : all_fault_kinds()) kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(k));
  s->add_option("--fault", *sim_fault, "Fault to inject: " + kinds)->required();
  s->add_option("--ranks", sim->ranks, "Ranks of the job (8 per host)")->required();
  s->add_option("-o,--output", *sim_out, "Bundle folder to create (ground truth: <folder>.truth.json)")->required();
  s->add_option("--seed", sim->seed, "Random seed (formats, times, victim)");
  s->add_option("--gpus-per-host", sim->gpus_per_host, "GPUs per host");
  s->add_flag("--no-noise", *sim_quiet, "No noise (benign warnings, duplicates, truncations, unrelated errors)");
  s->add_flag("--json", *sim_json, "Print the ground truth as JSON");
  s->callback([=, &outcome] {
    auto kind = parse_fault_kind(*sim_fault);
    if (!kind) throw UsageError("--fault " + *sim_fault + ": unknown kind (one of: " + kinds + ")");
    FabricGraph fabric;
    if (sim_fabric->rfind("rail:", 0) == 0 && !std::filesystem::exists(*sim_fabric)) {
      int hosts = 0, rails = 8, per_leaf = 16;
      if (std::sscanf(sim_fabric->c_str() + 5, "%d:%d:%d", &hosts, &rails, &per_leaf) < 1 || hosts < 1 || rails < 1 ||
          per_leaf < 1)
        throw UsageError("--fabric " + *sim_fabric + ": expected rail:HOSTS[:RAILS[:HOSTS_PER_LEAF]]");
      fabric = make_rail_fabric(hosts, rails, per_leaf);
    } else {
      if (!std::filesystem::exists(*sim_fabric)) throw UsageError(*sim_fabric + ": no such fabric file");
      fabric = load_fabric(*sim_fabric);
    }
    SimulateOptions o = *sim;
    o.fault = *kind;
    o.noise = !*sim_quiet;
    GroundTruth truth = simulate(fabric, o, *sim_out);
    if (*sim_json) std::cout << to_json(truth).dump(2) << "\n";
    else
      std::cout << "wrote " << *sim_out << " (" << truth.hosts.size() << " hosts, " << truth.ranks << " ranks), fault "
                << to_string(truth.fault) << (truth.description.empty() ? "" : ": " + truth.description)
                << "\nground truth: " << *sim_out << ".truth.json\n";
    outcome.exit_code = kOk;
  });

  // events
  auto ev = std::make_shared<LoadFlags>();
  auto ev_kind = std::make_shared<std::string>();
  CLI::App* e = monitor->add_subcommand("events", "Print the normalised events of a bundle or file (JSON lines)");
  add_load_flags(e, *ev);
  e->add_option("--kind", *ev_kind, "Only events of this kind");
  e->callback([=, &outcome] {
    Bundle b = load(*ev);
    add_source_metrics(b, ev->sources);
    for (const Event& x : b.events) {
      if (!ev_kind->empty() && x.kind != *ev_kind) continue;
      std::cout << to_json(x, b.file_name(x.file)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    outcome.exit_code = kOk;
  });
}

}  // namespace
}  // namespace astral::cli

ASTRAL_COMMAND(monitor, astral::cli::register_monitor);
