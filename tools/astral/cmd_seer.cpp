// astral seer: step-time prediction, layout search, calibration, trace comparison and validation
// (library: seer).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/calibrate_kineto.hpp"
#include "astral/seer/calibrate_steps.hpp"
#include "astral/seer/ecmp_table.hpp"
#include "astral/seer/kineto.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/report.hpp"
#include "command.hpp"

namespace {

using namespace astral;
using namespace astral::seer;
using nlohmann::json;

struct Common {
  std::string model, hw, network, ecmp_table;
  int gpus = 0;
  bool json = false;
};

// Layout flags that override (or replace) a config file.
struct LayoutFlags {
  std::string config;
  int global_batch = 0, micro_batch = 0, tp = 0, cp = 0, pp = 0, dp = -1, ep = 0, vp = 0;
  int first_stage_layers = -1, last_stage_layers = -1;
  double ep_imbalance = 0;
  std::string recompute, dtype;
  bool sp = false, no_sp = false, dist_opt = false, flash = false, no_flash = false;
};

void add_common(CLI::App* app, Common& c, bool need_model) {
  auto* m = app->add_option("--model", c.model, "model JSON file or bundled name (astral seer list)");
  if (need_model) m->required();
  app->add_option("--hw", c.hw, "hardware JSON file or bundled name (a100-80gb, h100-sxm, h200-sxm)")->required();
  app->add_option("--gpus", c.gpus, "number of GPUs")->required()->check(CLI::PositiveNumber);
  app->add_option("--network", c.network, "network JSON file or bundled name (default: a uniform non-blocking fabric)");
  app->add_option("--ecmp-table", c.ecmp_table,
                  "the network's ECMP-efficiency table (astral fabric ecmp-table): collectives that cross "
                  "switches take the simulated efficiency")
      ->check(CLI::ExistingFile);
  app->add_flag("--json", c.json, "print JSON instead of text");
}

void add_layout(CLI::App* app, LayoutFlags& f) {
  app->add_option("--config", f.config, "training configuration JSON file or bundled name");
  app->add_option("--global-batch", f.global_batch, "sequences per step")->check(CLI::PositiveNumber);
  app->add_option("--micro-batch", f.micro_batch, "sequences per micro-batch")->check(CLI::PositiveNumber);
  app->add_option("--tp", f.tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  app->add_option("--pp", f.pp, "pipeline-parallel size")->check(CLI::PositiveNumber);
  app->add_option("--dp", f.dp, "data-parallel size (default: GPUs / (tp x pp))")->check(CLI::PositiveNumber);
  app->add_option("--ep", f.ep, "expert-parallel size")->check(CLI::PositiveNumber);
  app->add_option("--cp", f.cp, "context-parallel size (ring attention)")->check(CLI::PositiveNumber);
  app->add_option("--ep-imbalance", f.ep_imbalance,
                  "router skew: tokens of the busiest expert-parallel rank over the mean (1 to ep)")
      ->check(CLI::Range(1.0, 1e6));
  app->add_option("--vp", f.vp, "virtual pipeline stages (interleaved 1F1B)")->check(CLI::PositiveNumber);
  app->add_option("--first-stage-layers", f.first_stage_layers, "layers of the first pipeline stage (0: an even split)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--last-stage-layers", f.last_stage_layers, "layers of the last pipeline stage (0: an even split)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--dtype", f.dtype, "GEMM precision: bf16 | fp16 | fp8 (per-tensor scaled) | tf32 | fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "tf32", "fp32"}));
  app->add_option("--recompute", f.recompute, "none | selective | full")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app->add_flag("--sequence-parallel", f.sp, "turn sequence parallelism on");
  app->add_flag("--no-sequence-parallel", f.no_sp, "turn sequence parallelism off");
  app->add_flag("--distributed-optimizer", f.dist_opt, "shard optimizer states across data-parallel ranks");
  app->add_flag("--flash-attention", f.flash, "fused attention kernels");
  app->add_flag("--no-flash-attention", f.no_flash, "unfused attention (softmax and dropout kernels)");
}

TrainConfig layout_of(const LayoutFlags& f) {
  TrainConfig c;
  if (!f.config.empty()) c = load_config(f.config);
  if (f.global_batch) c.global_batch = f.global_batch;
  if (f.micro_batch) c.micro_batch = f.micro_batch;
  if (f.tp) c.tp = f.tp;
  if (f.pp) c.pp = f.pp;
  if (f.dp > 0) c.dp = f.dp;
  if (f.tp || f.pp || f.cp) c.dp = f.dp > 0 ? f.dp : 0;  // re-derive unless given
  if (f.ep) c.ep = f.ep;
  if (f.cp) c.cp = f.cp;
  if (f.ep_imbalance > 0) c.ep_imbalance = f.ep_imbalance;
  if (f.vp) c.vp = f.vp;
  if (f.first_stage_layers >= 0) c.first_stage_layers = f.first_stage_layers;
  if (f.last_stage_layers >= 0) c.last_stage_layers = f.last_stage_layers;
  if (!f.dtype.empty()) c.dtype = dtype_from_string(f.dtype, "--dtype");
  if (!f.recompute.empty())
    c.recompute = f.recompute == "full" ? Recompute::kFull
                  : f.recompute == "selective" ? Recompute::kSelective : Recompute::kNone;
  if (f.sp) c.sequence_parallel = true;
  if (f.no_sp) c.sequence_parallel = false;
  if (f.dist_opt) c.distributed_optimizer = true;
  if (f.flash) c.flash_attention = true;
  if (f.no_flash) c.flash_attention = false;
  if (c.global_batch <= 0)
    throw cli::UsageError("no global batch: give --config FILE or --global-batch B");
  return c;
}

Network network_of(const Common& c, const HardwareSpec& hw) {
  if (c.network.empty()) {
    if (!c.ecmp_table.empty()) throw cli::UsageError("--ecmp-table needs the --network it was simulated on");
    return uniform_network(hw, c.gpus);
  }
  Network n = load_network(c.network, hw);
  int need = (c.gpus + n.gpus_per_host - 1) / n.gpus_per_host;
  if (n.hosts < need)
    throw cli::UsageError(fmt::format("{}: {} hosts x {} GPUs cannot hold --gpus {}", c.network, n.hosts,
                                      n.gpus_per_host, c.gpus));
  if (!c.ecmp_table.empty()) attach_ecmp_table(n, c.ecmp_table);  // checks the fabric size
  return n;
}

json read_json_file(const std::string& path) {
  try {
    return json::parse(cli::read_text_file(path));
  } catch (const json::parse_error& e) {
    throw cli::UsageError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

// ---- predict

struct PredictArgs {
  Common common;
  LayoutFlags layout;
  std::string timeline;
  std::string timeline_level = "op";
};

int run_predict(const PredictArgs& a) {
  ModelSpec model = load_model(a.common.model);
  HardwareSpec hw = load_hardware(a.common.hw);
  TrainConfig config = layout_of(a.layout);
  validate(model, config, a.common.gpus);
  Network net = network_of(a.common, hw);
  std::vector<TimelineEvent> events;
  PredictOptions opts;
  if (!a.timeline.empty()) opts.timeline = &events;
  opts.timeline_layers_only = a.timeline_level == "layer";
  Prediction p = predict(model, hw, net, config, a.common.gpus, opts);
  if (!a.timeline.empty())
    cli::write_text_file(a.timeline, chrome_trace(events, timeline_metadata(model, hw, config, a.common.gpus, p)).dump());
  if (a.common.json) {
    std::cout << prediction_report(model, hw, config, a.common.gpus, p).dump(2) << "\n";
  } else {
    std::cout << format_prediction(model, hw, net, config, a.common.gpus, p);
    if (!a.timeline.empty()) std::cout << fmt::format("timeline    {} ({} events)\n", a.timeline, events.size());
  }
  return p.memory.fits() ? cli::kOk : cli::kChecksFailed;
}

CLI::App* add_predict(CLI::App* seer, PredictArgs& a) {
  auto* cmd = seer->add_subcommand("predict", "predict one training step: time, MFU/HFU, memory, breakdown");
  add_common(cmd, a.common, true);
  add_layout(cmd, a.layout);
  cmd->add_option("--timeline", a.timeline, "write the step's operator timeline as Chrome trace JSON");
  cmd->add_option("--timeline-level", a.timeline_level, "op (every operator, for compare) or layer (smaller)")
      ->check(CLI::IsMember({"op", "layer"}));
  return cmd;
}

// ---- search

struct SearchArgs {
  Common common;
  SearchOptions options;
  bool quiet = false;
  std::string recompute_list;
  std::vector<std::string> dtype_list;
  std::string base_config;
};

std::vector<Recompute> recompute_modes(const std::string& list) {
  std::vector<Recompute> modes;
  std::stringstream ss(list);
  for (std::string m; std::getline(ss, m, ',');) {
    if (m == "none") modes.push_back(Recompute::kNone);
    else if (m == "selective") modes.push_back(Recompute::kSelective);
    else if (m == "full") modes.push_back(Recompute::kFull);
    else throw cli::UsageError(fmt::format("--recompute: unknown mode \"{}\" (none, selective, full)", m));
  }
  return modes;
}

// A live bar on a terminal; one summary line otherwise (logs stay readable).
void draw_search_progress(size_t done, size_t total) {
  const int width = 30;
  int filled = total ? int(double(done) / total * width) : width;
  std::fprintf(stderr, "\rastral seer search: [%s%s] %zu/%zu layouts", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
}

int run_search(const SearchArgs& a) {
  ModelSpec model = load_model(a.common.model);
  HardwareSpec hw = load_hardware(a.common.hw);
  Network net = network_of(a.common, hw);
  SearchOptions opts = a.options;
  if (!a.base_config.empty()) {
    opts.base = load_config(a.base_config);
    if (opts.global_batch == 0) opts.global_batch = opts.base.global_batch;
  }
  if (!a.recompute_list.empty()) opts.recompute = recompute_modes(a.recompute_list);
  for (const auto& d : a.dtype_list) opts.dtypes.push_back(dtype_from_string(d, "--dtypes"));
  const bool terminal = isatty(STDERR_FILENO);
  if (!a.quiet && terminal) opts.progress = draw_search_progress;
  SearchResult r = search(model, hw, net, a.common.gpus, opts);
  if (!a.quiet && !terminal)
    std::fprintf(stderr, "astral seer search: %zu layouts, %zu predicted in %.2f s\n", r.enumerated, r.evaluated,
                 r.seconds);
  std::cout << (a.common.json ? search_report(model, hw, net, a.common.gpus, r).dump(2) + "\n"
                              : format_search(model, hw, net, a.common.gpus, r));
  return r.top.empty() ? cli::kChecksFailed : cli::kOk;
}

CLI::App* add_search(CLI::App* seer, SearchArgs& a) {
  auto* cmd = seer->add_subcommand("search", "enumerate parallel layouts, prune by memory, rank by step time");
  auto& o = a.options;
  add_common(cmd, a.common, true);
  cmd->add_option("--global-batch", o.global_batch, "sequences per step (default: about 4M tokens)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top", o.top_k, "how many layouts to print")->check(CLI::PositiveNumber);
  cmd->add_option("--tp", o.tp, "tensor-parallel sizes to try (default 1,2,4,... up to GPUs per host)")->delimiter(',');
  cmd->add_option("--pp", o.pp, "pipeline sizes to try (default: divisors of the layer count)")->delimiter(',');
  cmd->add_option("--micro-batch", o.micro_batch, "micro-batch sizes to try (default 1,2,4,8)")->delimiter(',');
  cmd->add_option("--vp", o.vp, "virtual pipeline stages to try (default 1,2,3,4,6,8)")->delimiter(',');
  cmd->add_option("--ep", o.ep, "expert-parallel sizes to try (default: divisors of the expert count)")->delimiter(',');
  cmd->add_option("--cp", o.cp, "context-parallel sizes to try (default 1; 1,2,4,8 for sequences of 16K or more)")
      ->delimiter(',');
  cmd->add_option("--recompute", a.recompute_list, "recompute modes to try (default none,selective,full)");
  cmd->add_option("--dtypes", a.dtype_list, "GEMM precisions to try, e.g. bf16,fp8 (default: the --config's; fp8 "
                                             "only where the hardware has an FP8 peak)")
      ->delimiter(',');
  cmd->add_flag("!--no-lighter-end-stages", o.lighter_end_stages,
                "only even pipeline splits (default: also first and last stages one layer lighter)");
  cmd->add_option("--config", a.base_config,
                  "configuration whose fixed switches (dtype, flash attention, overlaps) the layouts share");
  cmd->add_flag("--no-progress", a.quiet, "no progress bar on stderr");
  return cmd;
}

// ---- calibrate

struct CalibrateArgs {
  std::string hw, ops, steps, kineto, out;
  int rank = -1;
  std::string fit = "compute,comm,overhead";
  bool json = false;
};

// From measured step times: the profile is written only after the fit succeeded, and atomically.
int run_calibrate_steps(const CalibrateArgs& a) {
  json doc = read_json_file(a.steps);
  std::string hw_name = a.hw.empty() ? step_runs_hardware(doc) : a.hw;
  if (hw_name.empty())
    throw cli::UsageError(fmt::format("{}: hardware: missing (name the starting profile there or give --hw)", a.steps));
  HardwareSpec hw = load_hardware(hw_name);
  StepFitOptions options;
  options.fit = step_factors_from_string(a.fit, "--fit");
  StepFitResult r = calibrate_steps(hw, parse_step_runs(doc, a.steps, hw), options);
  if (!a.out.empty()) cli::write_text_file_atomically(a.out, to_json(r.calibrated).dump(2) + "\n");
  if (a.json) {
    std::cout << to_json(r).dump(2) << "\n";
  } else {
    std::cout << format_step_fit(r, a.steps);
    if (!a.out.empty()) std::cout << "written to " << a.out << "\n";
  }
  return cli::kOk;
}

// From a profiler trace: the whole trace is read and fitted before anything is written.
int run_calibrate_kineto(const CalibrateArgs& a) {
  HardwareSpec hw = load_hardware(a.hw);
  KinetoCalibration c;
  try {
    c = calibrate_kineto(hw, read_kineto_trace(a.kineto), KinetoCalibrationOptions{a.rank});
  } catch (const std::runtime_error& e) {
    throw cli::UsageError(e.what());
  }
  if (!a.out.empty()) cli::write_text_file_atomically(a.out, to_json(c.fit.calibrated).dump(2) + "\n");
  if (a.json) {
    std::cout << to_json(c).dump(2) << "\n";
  } else {
    std::cout << format_kineto_calibration(c, a.kineto);
    if (!a.out.empty()) std::cout << "written to " << a.out << "\n";
  }
  return cli::kOk;
}

int run_calibrate(const CalibrateArgs& a) {
  if (int(!a.ops.empty()) + int(!a.steps.empty()) + int(!a.kineto.empty()) != 1)
    throw cli::UsageError("calibrate: give exactly one of --ops FILE, --steps FILE and --kineto FILE");
  if (!a.steps.empty()) return run_calibrate_steps(a);
  if (a.hw.empty()) throw cli::UsageError(fmt::format("calibrate --{}: --hw is required", a.ops.empty() ? "kineto" : "ops"));
  if (!a.kineto.empty()) return run_calibrate_kineto(a);
  HardwareSpec hw = load_hardware(a.hw);
  auto ops = parse_operator_csv(cli::read_text_file(a.ops), a.ops);
  CalibrationResult r = calibrate(hw, ops);
  if (!a.out.empty()) cli::write_text_file_atomically(a.out, to_json(r.calibrated).dump(2) + "\n");
  if (a.json) {
    std::cout << to_json(r).dump(2) << "\n";
  } else {
    std::cout << format_calibration(r);
    if (!a.out.empty()) std::cout << "written to " << a.out << "\n";
  }
  return cli::kOk;
}

CLI::App* add_calibrate(CLI::App* seer, CalibrateArgs& a) {
  auto* cmd = seer->add_subcommand(
      "calibrate",
      "fit the hardware profile to measured operator times (--ops, --kineto) or step times of runs (--steps)");
  cmd->add_option("--hw", a.hw, "hardware JSON file or bundled name to start from (--steps: default the file's)");
  cmd->add_option("--ops", a.ops, "CSV of measured operators: kind,m,n,k,batch,bytes,dtype,time_us[,name]");
  cmd->add_option("--steps", a.steps, "JSON of measured runs: {hardware, runs: [{name, model, config, gpus, measured_s}]}");
  cmd->add_option("--kineto", a.kineto, "PyTorch profiler (Kineto) trace JSON of a few steps, recorded with shapes");
  cmd->add_option("--rank", a.rank, "--kineto: the rank the trace must be (its distributedInfo.rank)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--fit", a.fit, "--steps: factors to fit, from compute,comm,overhead,straggler (default: the first three; straggler needs runs at several scales)");
  cmd->add_option("--out", a.out, "write the calibrated hardware profile here");
  cmd->add_flag("--json", a.json, "print JSON instead of text");
  return cmd;
}

// ---- compare

struct CompareArgs {
  std::string predicted, measured;
  int rank = -1;
  bool json = false;
};

int run_compare(const CompareArgs& a) {
  json p = read_json_file(a.predicted), m = read_json_file(a.measured);
  Comparison c;
  try {
    c = compare_timelines(p, m, CompareOptions{a.rank});
  } catch (const std::runtime_error& e) {
    throw cli::UsageError(e.what());
  }
  std::cout << (a.json ? to_json(c).dump(2) + "\n" : format_comparison(c));
  return cli::kOk;
}

CLI::App* add_compare(CLI::App* seer, CompareArgs& a) {
  auto* cmd = seer->add_subcommand("compare", "compare a predicted timeline with a PyTorch profiler (Kineto) trace");
  cmd->add_option("--predicted", a.predicted, "timeline from astral seer predict --timeline")->required();
  cmd->add_option("--measured", a.measured, "Kineto trace JSON (torch.profiler export_chrome_trace)")->required();
  cmd->add_option("--rank", a.rank, "predicted rank to compare (default: the measured trace's rank)");
  cmd->add_flag("--json", a.json, "print JSON instead of text");
  return cmd;
}

// ---- validate

struct ValidateArgs {
  std::string set = "korthikanti", hw;
  bool json = false, calibrate_smallest = false;
};

int run_validate(const ValidateArgs& a) {
  json set = load_json("validation", a.set);
  HardwareSpec hw;
  if (!a.hw.empty()) hw = load_hardware(a.hw);
  if (a.calibrate_smallest) {
    CalibratedValidation c = run_validation_calibrated_on_smallest(set, a.hw.empty() ? nullptr : &hw);
    std::cout << (a.json ? to_json(c).dump(2) + "\n" : format_calibrated_validation(c));
    return c.report.within_tolerance() ? cli::kOk : cli::kChecksFailed;
  }
  ValidationReport r = run_validation(set, a.hw.empty() ? nullptr : &hw);
  std::cout << (a.json ? to_json(r).dump(2) + "\n" : format_validation(r));
  return r.within_tolerance() ? cli::kOk : cli::kChecksFailed;
}

CLI::App* add_validate(CLI::App* seer, ValidateArgs& a) {
  auto* cmd = seer->add_subcommand("validate", "predict a published validation set and report the errors");
  cmd->add_option("--set", a.set, "validation set JSON file or bundled name (default korthikanti)");
  cmd->add_option("--hw", a.hw, "hardware profile to use instead of the set's");
  cmd->add_flag("--calibrate-smallest", a.calibrate_smallest,
                "fit the compute factor on the set's smallest run, then predict the others");
  cmd->add_flag("--json", a.json, "print JSON instead of text");
  return cmd;
}

// ---- collective

struct CollectiveArgs {
  Common common;
  std::string op = "allreduce";
  double bytes = 1 << 30;
  int ranks = 0, stride = 1;
};

int run_collective(const CollectiveArgs& a) {
  HardwareSpec hw = load_hardware(a.common.hw);
  Network net = network_of(a.common, hw);
  int ranks = a.ranks ? a.ranks : a.common.gpus;
  if (ranks > a.common.gpus)
    throw cli::UsageError(fmt::format("--ranks {} does not fit in --gpus {}", ranks, a.common.gpus));
  Collective op = Collective::kAllReduce;
  for (int i = 0; i <= int(Collective::kSendRecv); ++i)
    if (a.op == to_string(static_cast<Collective>(i))) op = static_cast<Collective>(i);
  Group g = group_of(ranks, a.stride, net.gpus_per_host);
  CollectiveModel model(net, g);
  CostTable t;
  model.cost_table(op, a.bytes, t);
  CollectiveCost best = model.best(op, a.bytes);
  std::cout << (a.common.json ? collective_report(op, a.bytes, g, t, best).dump(2) + "\n"
                              : format_collective(op, a.bytes, g, t, best));
  return cli::kOk;
}

CLI::App* add_collective(CLI::App* seer, CollectiveArgs& a) {
  auto* cmd = seer->add_subcommand("collective", "cost one collective for every NCCL algorithm and protocol");
  cmd->add_option("--hw", a.common.hw, "hardware JSON file or bundled name")->required();
  cmd->add_option("--gpus", a.common.gpus, "GPUs in the cluster")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--network", a.common.network, "network JSON file or bundled name");
  cmd->add_option("--ecmp-table", a.common.ecmp_table, "the network's ECMP-efficiency table (astral fabric ecmp-table)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--op", a.op, "allreduce | allgather | reducescatter | alltoall | broadcast | reduce | sendrecv")
      ->check(CLI::IsMember({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"}));
  cmd->add_option("--bytes", a.bytes, "buffer size in bytes (NCCL's convention)")->check(CLI::PositiveNumber);
  cmd->add_option("--ranks", a.ranks, "communicator size (default: all GPUs)")->check(CLI::PositiveNumber);
  cmd->add_option("--stride", a.stride, "distance between members in rank order (8 = one per host)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", a.common.json, "print JSON instead of text");
  return cmd;
}

// ---- registration

struct SeerArgs {
  PredictArgs predict;
  SearchArgs search;
  CalibrateArgs calibrate;
  CompareArgs compare;
  ValidateArgs validate;
  CollectiveArgs collective;
};

// The subcommand runs `fn(args)`; its result is the exit code, and a SpecError (bad input)
// becomes a usage error with the same one-line message.
template <typename Args>
void on_run(CLI::App* cmd, cli::Outcome& outcome, int (*fn)(const Args&), const Args& args) {
  cmd->callback([&outcome, fn, &args] {
    try {
      outcome.exit_code = fn(args);
    } catch (const SpecError& e) {
      throw cli::UsageError(e.what());
    }
  });
}

void register_seer(CLI::App& root, cli::Outcome& outcome) {
  static SeerArgs args;  // CLI11 writes the parsed flags here; the callbacks read them
  auto* seer = root.add_subcommand("seer", "Seer: predict step time, search parallel layouts, calibrate, compare");
  seer->require_subcommand(1);
  on_run(add_predict(seer, args.predict), outcome, run_predict, args.predict);
  on_run(add_search(seer, args.search), outcome, run_search, args.search);
  on_run(add_calibrate(seer, args.calibrate), outcome, run_calibrate, args.calibrate);
  on_run(add_compare(seer, args.compare), outcome, run_compare, args.compare);
  on_run(add_validate(seer, args.validate), outcome, run_validate, args.validate);
  on_run(add_collective(seer, args.collective), outcome, run_collective, args.collective);
  seer->add_subcommand("list", "list the bundled models, hardware, configs, networks and validation sets")
      ->callback([] { std::cout << format_bundled_list(); });
}

}  // namespace

ASTRAL_COMMAND(seer, register_seer);
