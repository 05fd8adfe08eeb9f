// astral seer: step-time prediction, layout search, calibration, trace comparison and validation
// (library: seer).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/seer/calibrate.hpp"
#include "astral/seer/inputs.hpp"
#include "astral/seer/report.hpp"
#include "command.hpp"

namespace {

using namespace astral;
using namespace astral::seer;
using nlohmann::json;

struct Common {
  std::string model, hw, network;
  int gpus = 0;
  bool json = false;
};

// Layout flags that override (or replace) a config file.
struct LayoutFlags {
  std::string config;
  int global_batch = 0, micro_batch = 0, tp = 0, pp = 0, dp = -1, ep = 0, vp = 0;
  std::string recompute;
  bool sp = false, no_sp = false, dist_opt = false, flash = false, no_flash = false;
};

void add_common(CLI::App* app, Common& c, bool need_model) {
  auto* m = app->add_option("--model", c.model, "model JSON file or bundled name (astral seer list)");
  if (need_model) m->required();
  app->add_option("--hw", c.hw, "hardware JSON file or bundled name (a100-80gb, h100-sxm, h200-sxm)")->required();
  app->add_option("--gpus", c.gpus, "number of GPUs")->required()->check(CLI::PositiveNumber);
  app->add_option("--network", c.network, "network JSON file or bundled name (default: a uniform non-blocking fabric)");
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
  app->add_option("--vp", f.vp, "virtual pipeline stages (interleaved 1F1B)")->check(CLI::PositiveNumber);
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
  if (f.tp || f.pp) c.dp = f.dp > 0 ? f.dp : 0;  // re-derive unless given
  if (f.ep) c.ep = f.ep;
  if (f.vp) c.vp = f.vp;
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
  if (c.network.empty()) return uniform_network(hw, c.gpus);
  Network n = load_network(c.network, hw);
  int need = (c.gpus + n.gpus_per_host - 1) / n.gpus_per_host;
  if (n.hosts < need)
    throw cli::UsageError(fmt::format("{}: {} hosts x {} GPUs cannot hold --gpus {}", c.network, n.hosts,
                                      n.gpus_per_host, c.gpus));
  return n;
}

json read_json_file(const std::string& path) {
  try {
    return json::parse(cli::read_text_file(path));
  } catch (const json::parse_error& e) {
    throw cli::UsageError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

// SpecError (bad input) becomes a usage error with the same one-line message.
template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    throw cli::UsageError(e.what());
  }
}

void register_seer(CLI::App& root, cli::Outcome& outcome) {
  auto* seer = root.add_subcommand("seer", "Seer: predict step time, search parallel layouts, calibrate, compare");
  seer->require_subcommand(1);

  // ---- predict
  static Common pc;
  static LayoutFlags pl;
  static std::string timeline;
  auto* predict_cmd = seer->add_subcommand("predict", "predict one training step: time, MFU/HFU, memory, breakdown");
  add_common(predict_cmd, pc, true);
  add_layout(predict_cmd, pl);
  predict_cmd->add_option("--timeline", timeline, "write the step's operator timeline as Chrome trace JSON");
  static std::string timeline_level = "op";
  predict_cmd->add_option("--timeline-level", timeline_level, "op (every operator, for compare) or layer (smaller)")
      ->check(CLI::IsMember({"op", "layer"}));
  predict_cmd->callback([&outcome] {
    guarded([&] {
      ModelSpec model = load_model(pc.model);
      HardwareSpec hw = load_hardware(pc.hw);
      TrainConfig config = layout_of(pl);
      validate(model, config, pc.gpus);
      Network net = network_of(pc, hw);
      std::vector<TimelineEvent> events;
      PredictOptions opts;
      if (!timeline.empty()) opts.timeline = &events;
      opts.timeline_layers_only = timeline_level == "layer";
      Prediction p = predict(model, hw, net, config, pc.gpus, opts);
      if (!timeline.empty()) {
        json meta = {{"seer", {{"model", model.name}, {"hardware", hw.name}, {"gpus", pc.gpus},
                               {"step_time_s", p.step_time}, {"tp", config.tp}, {"pp", config.pp},
                               {"dp", config.dp}, {"config", to_json(config)}}}};
        cli::write_text_file(timeline, chrome_trace(events, meta).dump());
      }
      if (pc.json) {
        json j = to_json(p);
        j["model"] = model.name;
        j["hardware"] = hw.name;
        j["gpus"] = pc.gpus;
        j["config"] = to_json(config);
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << format_prediction(model, hw, net, config, pc.gpus, p);
        if (!timeline.empty()) std::cout << fmt::format("timeline    {} ({} events)\n", timeline, events.size());
      }
      outcome.exit_code = p.memory.fits() ? cli::kOk : cli::kChecksFailed;
    });
  });

  // ---- search
  static Common sc;
  static SearchOptions so;
  static bool quiet = false;
  static std::string recompute_list;
  auto* search_cmd = seer->add_subcommand("search", "enumerate parallel layouts, prune by memory, rank by step time");
  add_common(search_cmd, sc, true);
  search_cmd->add_option("--global-batch", so.global_batch, "sequences per step (default: about 4M tokens)")
      ->check(CLI::PositiveNumber);
  search_cmd->add_option("--top", so.top_k, "how many layouts to print")->check(CLI::PositiveNumber);
  search_cmd->add_option("--tp", so.tp, "tensor-parallel sizes to try (default 1,2,4,... up to GPUs per host)")
      ->delimiter(',');
  search_cmd->add_option("--pp", so.pp, "pipeline sizes to try (default: divisors of the layer count)")->delimiter(',');
  search_cmd->add_option("--micro-batch", so.micro_batch, "micro-batch sizes to try (default 1,2,4,8)")->delimiter(',');
  search_cmd->add_option("--vp", so.vp, "virtual pipeline stages to try (default 1,2,3,4,6,8)")->delimiter(',');
  search_cmd->add_option("--ep", so.ep, "expert-parallel sizes to try (default: divisors of the expert count)")
      ->delimiter(',');
  search_cmd->add_option("--recompute", recompute_list, "recompute modes to try (default none,selective,full)");
  static std::string search_base;
  search_cmd->add_option("--config", search_base,
                         "configuration whose fixed switches (dtype, flash attention, overlaps) the layouts share");
  search_cmd->add_flag("--no-progress", quiet, "no progress bar on stderr");
  search_cmd->callback([&outcome] {
    guarded([&] {
      ModelSpec model = load_model(sc.model);
      HardwareSpec hw = load_hardware(sc.hw);
      Network net = network_of(sc, hw);
      SearchOptions opts = so;
      if (!search_base.empty()) {
        opts.base = load_config(search_base);
        if (opts.global_batch == 0) opts.global_batch = opts.base.global_batch;
      }
      if (!recompute_list.empty()) {
        opts.recompute.clear();
        std::stringstream ss(recompute_list);
        for (std::string m; std::getline(ss, m, ',');) {
          if (m == "none") opts.recompute.push_back(Recompute::kNone);
          else if (m == "selective") opts.recompute.push_back(Recompute::kSelective);
          else if (m == "full") opts.recompute.push_back(Recompute::kFull);
          else throw cli::UsageError(fmt::format("--recompute: unknown mode \"{}\" (none, selective, full)", m));
        }
      }
      // A live bar on a terminal; one summary line otherwise (logs stay readable).
      if (!quiet && isatty(STDERR_FILENO))
        opts.progress = [](size_t done, size_t total) {
          const int width = 30;
          int filled = total ? int(double(done) / total * width) : width;
          std::fprintf(stderr, "\rastral seer search: [%s%s] %zu/%zu layouts", std::string(filled, '#').c_str(),
                       std::string(width - filled, '.').c_str(), done, total);
          if (done == total) std::fprintf(stderr, "\n");
        };
      SearchResult r = search(model, hw, net, sc.gpus, opts);
      if (!quiet && !isatty(STDERR_FILENO))
        std::fprintf(stderr, "astral seer search: %zu layouts, %zu predicted in %.2f s\n", r.enumerated, r.evaluated,
                     r.seconds);
      if (sc.json) {
        json j = to_json(r);
        j["model"] = model.name;
        j["hardware"] = hw.name;
        j["gpus"] = sc.gpus;
        j["network"] = net.name;
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << format_search(model, hw, net, sc.gpus, r);
      }
      outcome.exit_code = r.top.empty() ? cli::kChecksFailed : cli::kOk;
    });
  });

  // ---- calibrate
  static std::string cal_hw, cal_ops, cal_out;
  static bool cal_json = false;
  auto* cal = seer->add_subcommand("calibrate", "fit the hardware profile's efficiencies to measured operator times");
  cal->add_option("--hw", cal_hw, "hardware JSON file or bundled name to start from")->required();
  cal->add_option("--ops", cal_ops, "CSV of measured operators: kind,m,n,k,batch,bytes,dtype,time_us[,name]")
      ->required();
  cal->add_option("--out", cal_out, "write the calibrated hardware profile here");
  cal->add_flag("--json", cal_json, "print JSON instead of text");
  cal->callback([] {
    guarded([&] {
      HardwareSpec hw = load_hardware(cal_hw);
      auto ops = parse_operator_csv(cli::read_text_file(cal_ops), cal_ops);
      CalibrationResult r = calibrate(hw, ops);
      if (!cal_out.empty()) cli::write_text_file(cal_out, to_json(r.calibrated).dump(2) + "\n");
      if (cal_json) {
        json rows = json::array();
        for (const auto& x : r.rows)
          rows.push_back({{"name", x.name}, {"measured_s", x.measured}, {"before_s", x.before}, {"after_s", x.after}});
        std::cout << json{{"hardware", to_json(r.calibrated)}, {"mean_abs_error_pct_before", r.mean_abs_pct_before},
                          {"mean_abs_error_pct_after", r.mean_abs_pct_after}, {"fitted", r.fitted}, {"rows", rows}}
                         .dump(2)
                  << "\n";
      } else {
        std::cout << format_calibration(r);
        if (!cal_out.empty()) std::cout << "written to " << cal_out << "\n";
      }
    });
  });

  // ---- compare
  static std::string predicted, measured;
  static int cmp_rank = -1;
  static bool cmp_json = false;
  auto* cmp = seer->add_subcommand("compare", "compare a predicted timeline with a PyTorch profiler (Kineto) trace");
  cmp->add_option("--predicted", predicted, "timeline from astral seer predict --timeline")->required();
  cmp->add_option("--measured", measured, "Kineto trace JSON (torch.profiler export_chrome_trace)")->required();
  cmp->add_option("--rank", cmp_rank, "predicted rank to compare (default: the measured trace's rank)");
  cmp->add_flag("--json", cmp_json, "print JSON instead of text");
  cmp->callback([] {
    json p = read_json_file(predicted), m = read_json_file(measured);
    Comparison c;
    try {
      c = compare_timelines(p, m, CompareOptions{cmp_rank});
    } catch (const std::runtime_error& e) {
      throw cli::UsageError(e.what());
    }
    std::cout << (cmp_json ? to_json(c).dump(2) + "\n" : format_comparison(c));
  });

  // ---- validate
  static std::string val_set = "korthikanti", val_hw;
  static bool val_json = false;
  auto* val = seer->add_subcommand("validate", "predict a published validation set and report the errors");
  val->add_option("--set", val_set, "validation set JSON file or bundled name (default korthikanti)");
  val->add_option("--hw", val_hw, "hardware profile to use instead of the set's");
  val->add_flag("--json", val_json, "print JSON instead of text");
  val->callback([&outcome] {
    guarded([&] {
      json set = load_json("validation", val_set);
      HardwareSpec hw;
      if (!val_hw.empty()) hw = load_hardware(val_hw);
      ValidationReport r = run_validation(set, val_hw.empty() ? nullptr : &hw);
      std::cout << (val_json ? to_json(r).dump(2) + "\n" : format_validation(r));
      outcome.exit_code = r.within_tolerance() ? cli::kOk : cli::kChecksFailed;
    });
  });

  // ---- collective
  static Common cc;
  static std::string coll_op = "allreduce";
  static double coll_bytes = 1 << 30;
  static int coll_ranks = 0, coll_stride = 1;
  auto* coll = seer->add_subcommand("collective", "cost one collective for every NCCL algorithm and protocol");
  coll->add_option("--hw", cc.hw, "hardware JSON file or bundled name")->required();
  coll->add_option("--gpus", cc.gpus, "GPUs in the cluster")->required()->check(CLI::PositiveNumber);
  coll->add_option("--network", cc.network, "network JSON file or bundled name");
  coll->add_option("--op", coll_op, "allreduce | allgather | reducescatter | alltoall | broadcast | reduce | sendrecv")
      ->check(CLI::IsMember({"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"}));
  coll->add_option("--bytes", coll_bytes, "buffer size in bytes (NCCL's convention)")->check(CLI::PositiveNumber);
  coll->add_option("--ranks", coll_ranks, "communicator size (default: all GPUs)")->check(CLI::PositiveNumber);
  coll->add_option("--stride", coll_stride, "distance between members in rank order (8 = one per host)")
      ->check(CLI::PositiveNumber);
  coll->add_flag("--json", cc.json, "print JSON instead of text");
  coll->callback([] {
    guarded([&] {
      HardwareSpec hw = load_hardware(cc.hw);
      Network net = network_of(cc, hw);
      int ranks = coll_ranks ? coll_ranks : cc.gpus;
      if (ranks > cc.gpus)
        throw cli::UsageError(fmt::format("--ranks {} does not fit in --gpus {}", ranks, cc.gpus));
      Collective op = Collective::kAllReduce;
      for (int i = 0; i <= int(Collective::kSendRecv); ++i)
        if (coll_op == to_string(static_cast<Collective>(i))) op = static_cast<Collective>(i);
      Group g = group_of(ranks, coll_stride, net.gpus_per_host);
      CollectiveModel model(net, g);
      CostTable t;
      model.cost_table(op, coll_bytes, t);
      auto best = model.best(op, coll_bytes);
      if (cc.json) {
        json table = json::object();
        for (int a = 0; a < kAlgorithms; ++a)
          for (int p = 0; p < kProtocols; ++p)
            if (t[a][p] >= 0)
              table[to_string(static_cast<Algorithm>(a))][to_string(static_cast<Protocol>(p))] = t[a][p];
        std::cout << json{{"op", coll_op}, {"bytes", coll_bytes}, {"ranks", g.ranks}, {"per_host", g.per_host},
                          {"hosts", g.hosts()}, {"seconds", table},
                          {"best", {{"algorithm", to_string(best.algorithm)}, {"protocol", to_string(best.protocol)},
                                    {"seconds", best.seconds}}}}
                         .dump(2)
                  << "\n";
      } else {
        std::cout << format_cost_table(op, coll_bytes, g, t);
        std::cout << fmt::format("best: {} / {}, {:.1f} us, algorithm bandwidth {:.1f} GB/s\n", to_string(best.algorithm),
                                 to_string(best.protocol), best.seconds * 1e6,
                                 best.seconds > 0 ? coll_bytes / best.seconds / 1e9 : 0.0);
      }
    });
  });

  // ---- list
  auto* list = seer->add_subcommand("list", "list the bundled models, hardware, configs, networks and validation sets");
  list->callback([] {
    for (const char* cat : {"models", "hardware", "configs", "networks", "validation"}) {
      std::cout << cat << ":";
      for (const auto& n : bundled_names(cat)) std::cout << " " << n;
      std::cout << "\n";
    }
  });
}

}  // namespace

ASTRAL_COMMAND(seer, register_seer);
