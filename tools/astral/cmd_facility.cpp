// astral facility: read | serve | pue | events | mockup. Thin: parse flags, call the facility
// library, print (human reports come from astral/facility/report.hpp).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "astral/facility/config.hpp"
#include "astral/facility/events.hpp"
#include "astral/facility/exporter.hpp"
#include "astral/facility/mockup.hpp"
#include "astral/facility/prometheus.hpp"
#include "astral/facility/serialize.hpp"
#include "astral/facility/site.hpp"
#include "command.hpp"
#include "astral/facility/report.hpp"

namespace astral::cli {
namespace {

using namespace astral::facility;

// Flags shared by read and events: which sources, how to reach them.
struct SourceFlags {
  std::vector<std::string> redfish, mockups, ipmi_files;
  std::string config, site, auth = "auto", credentials_file, credentials_env = "ASTRAL_REDFISH", ca_file;
  std::string sysfs_root = "/", nvml_library = "libnvidia-ml.so.1", ipmi_host, ipmi_user, sensors = "auto";
  bool hwmon = false, rapl = false, ipmi = false, nvml = false, insecure = false;
  double timeout_s = 5, deadline_s = 60, rapl_interval_s = 1;
  int retries = 2;
  std::size_t concurrency = 16;
  std::optional<double> budget_w;
  std::vector<CLI::Option*> poll_flags;  // --timeout --deadline --retries --concurrency

  bool given(std::size_t i) const { return poll_flags.size() > i && poll_flags[i]->count() > 0; }

  void add(CLI::App* app) {
    app->add_option("--redfish", redfish, "Redfish service URL (https://bmc); repeat for several")->type_name("URL");
    app->add_option("--mockup", mockups, "read a DMTF mockup directory offline (no HTTP)")->type_name("DIR");
    app->add_flag("--hwmon", hwmon, "read hwmon sensors under --sysfs-root");
    app->add_flag("--rapl", rapl, "read powercap/RAPL energy under --sysfs-root (power over --rapl-interval)");
    app->add_flag("--ipmi", ipmi, "run ipmitool (dcmi power reading, sdr elist); remote with --ipmi-host");
    app->add_option("--ipmi-file", ipmi_files, "parse recorded `ipmitool dcmi power reading` or `sdr` output")->type_name("FILE");
    app->add_flag("--nvml", nvml, "read GPUs through NVML (skipped where the driver is absent)");
    app->add_option("--config", config, "sources.json (docs/facility.md)")->type_name("FILE");
    app->add_option("--site", site, "site layout: hosts in racks, racks to CDUs/loops and shelves/PDUs/feeds")->type_name("FILE");
    app->add_option("--auth", auth, "Redfish authentication: auto, session, basic or none")->capture_default_str();
    app->add_option("--credentials-file", credentials_file, "file with username:password (mode 600)")->type_name("FILE");
    app->add_option("--credentials-env", credentials_env, "read <PREFIX>_USERNAME and <PREFIX>_PASSWORD")->capture_default_str();
    app->add_option("--ca-file", ca_file, "PEM CA bundle that signed the BMC certificates")->type_name("FILE");
    app->add_flag("--insecure", insecure, "do not verify TLS certificates (prints a warning)");
    app->add_option("--sensors", sensors, "read Sensors collections: auto, all or none")->capture_default_str();
    poll_flags = {app->add_option("--timeout", timeout_s, "seconds per request try")->capture_default_str(),
                  app->add_option("--deadline", deadline_s, "seconds per endpoint for the whole crawl")->capture_default_str(),
                  app->add_option("--retries", retries, "extra tries on timeouts and 5xx")->capture_default_str(),
                  app->add_option("--concurrency", concurrency, "endpoints polled at once")->capture_default_str()};
    app->add_option("--sysfs-root", sysfs_root, "root of the sysfs tree for --hwmon/--rapl")->capture_default_str();
    app->add_option("--rapl-interval", rapl_interval_s, "seconds between the two RAPL reads")->capture_default_str();
    app->add_option("--ipmi-host", ipmi_host, "remote BMC for --ipmi (lanplus; password from IPMI_PASSWORD)");
    app->add_option("--ipmi-user", ipmi_user, "user for --ipmi-host");
    app->add_option("--nvml-library", nvml_library, "NVML library to dlopen")->capture_default_str();
    app->add_option("--budget", budget_w, "rack power budget in watts (when no --config)")->type_name("WATTS");
  }

  bool any_source() const {
    return !redfish.empty() || !mockups.empty() || !ipmi_files.empty() || hwmon || rapl || ipmi || nvml || !config.empty();
  }

  FacilityConfig to_config() const {
    FacilityConfig c;
    if (!config.empty()) {
      c = load_config(config);
    }
    // Flags override the config file's poll section only when given.
    bool plain = config.empty();
    if (plain || given(0)) c.poll.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    if (plain || given(1)) c.poll.deadline = std::chrono::milliseconds(static_cast<long long>(deadline_s * 1000));
    if (plain || given(2)) c.poll.retries = retries;
    if (plain || given(3)) c.poll.concurrency = std::max<std::size_t>(1, concurrency);
    Credentials creds;
    if (!credentials_file.empty()) {
      std::string warning;
      creds = credentials_from_file(credentials_file, &warning);
      if (!warning.empty()) c.warnings.push_back(warning);
    } else {
      creds = credentials_from_env(credentials_env);
    }
    for (const auto& url : redfish) {
      RedfishEndpoint e;
      try {
        e.url = normalise_base_url(url);
        e.auth = parse_auth_mode(auth);
      } catch (const std::invalid_argument& ex) {
        throw UsageError(ex.what());
      }
      e.name = e.url.substr(e.url.find("://") + 3);
      e.credentials = creds;
      e.ca_file = ca_file;
      e.verify_tls = !insecure;
      e.sensors = sensors == "all" ? SensorPolicy::all : sensors == "none" ? SensorPolicy::none : SensorPolicy::automatic;
      c.redfish.push_back(std::move(e));
    }
    if (hwmon) c.hwmon_root = sysfs_root;
    if (rapl) c.rapl_root = sysfs_root;
    for (const auto& f : ipmi_files) c.ipmi_files.push_back(f);
    if (ipmi || !ipmi_files.empty()) {
      IpmiOptions o;
      o.bmc_host = ipmi_host;
      o.username = ipmi_user;
      if (!ipmi) o.ipmitool.clear();
      c.ipmi = o;
    }
    if (nvml) c.nvml = NvmlOptions{nvml_library};
    if (budget_w) {
      if (c.derive.racks.empty()) c.derive.racks.push_back(RackConfig{"all", budget_w, {}, {}, {}, {}});
      else c.derive.racks.front().budget_w = budget_w;
    }
    if (!site.empty()) use_site_layout(c, load_site_layout(site));
    if (insecure) c.warnings.push_back("TLS certificate verification is off (--insecure): anyone on the path can read and change what the BMC says");
    return c;
  }
};

void print_warnings(const FacilityConfig& c) {
  for (const auto& w : c.warnings) std::fprintf(stderr, "astral: warning: %s\n", w.c_str());
}

// Reads every source once (RAPL twice, for power), then derives.
Snapshot read_all(const SourceFlags& f, const FacilityConfig& c, Derived& derived) {
  RaplMeter rapl(c.rapl_root.value_or("/"));
  bool slow = !c.redfish.empty() || c.rapl_root;
  if (slow) std::fprintf(stderr, "astral: reading %zu Redfish source(s)%s...\n", c.redfish.size(), c.rapl_root ? " and RAPL" : "");
  if (c.rapl_root) {
    rapl.sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long long>(f.rapl_interval_s * 1000)));
  }
  Snapshot s = poll_sources(c, &rapl);
  for (const auto& dir : f.mockups) s.merge(read_redfish_mockup(dir, dir.substr(dir.find_last_of('/') + 1)));
  derived = derive(s, c.derive);
  return s;
}

int outcome_of(const Snapshot& s) {
  bool failed = std::any_of(s.sources.begin(), s.sources.end(), [](const SourceStatus& x) { return !x.ok && x.reader != "nvml"; });
  bool serious = std::any_of(s.alarms.begin(), s.alarms.end(), [](const Alarm& a) { return a.severity >= Severity::error; });
  return failed || serious ? kChecksFailed : kOk;
}

void write_events_file(const std::string& path, const std::vector<Alarm>& alarms, const SiteLayout& site) {
  if (path == "-") {
    write_events(std::cout, alarms, &site);
    return;
  }
  std::ofstream out(path, std::ios::app);
  if (!out) throw UsageError(fmt::format("--events {}: cannot write; give a writable path ending in .events.jsonl", path));
  write_events(out, alarms, &site);
}

// Blocks until SIGINT or SIGTERM. Call block_stop_signals() before starting threads.
void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}
void wait_for_stop_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

// Connection limits shared by serve and mockup: how long a request may take to arrive in full,
// how long a connection may sit silent.
struct ListenerFlags {
  double request_timeout_s = 10, idle_timeout_s = 15;
  std::string port_file;
  void add(CLI::App* app) {
    app->add_option("--request-timeout", request_timeout_s, "seconds a request may take to arrive in full (slow clients are cut off)")
        ->capture_default_str();
    app->add_option("--idle-timeout", idle_timeout_s, "seconds a silent connection is kept open")->capture_default_str();
    app->add_option("--port-file", port_file, "write the URL(s) here, one per line, once listening")->type_name("FILE");
  }
  void apply(HttpServerOptions& so) const {
    if (!(request_timeout_s > 0) || !(idle_timeout_s > 0)) throw UsageError("--request-timeout and --idle-timeout must be positive");
    so.io_timeout = std::chrono::milliseconds(static_cast<long long>(request_timeout_s * 1000));
    so.idle_timeout = std::chrono::milliseconds(static_cast<long long>(idle_timeout_s * 1000));
  }
  // Atomically (rename), so a reader never sees half a file; without --port-file, to stdout.
  void announce(const std::string& urls) const {
    if (port_file.empty()) {
      std::cout << urls << std::flush;
      return;
    }
    std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << urls;
    std::rename(tmp.c_str(), port_file.c_str());
  }
};

struct ServeFlags {
  std::string listen = "127.0.0.1:9580", config, site, tls_cert, tls_key, auth_file, events, push_listen, push_url;
  bool allow_unauthenticated = false, once = false, no_event_streams = false;
  ListenerFlags listener;
};

// `facility serve` until SIGINT/SIGTERM: the exporter, its /metrics listener, and with
// --push-listen a listener for pushed events plus a subscription on every Redfish source
// (removed again on the way out).
void serve_until_stopped(const FacilityConfig& c, const ExporterOptions& eo, const ServeFlags& sf) {
  block_stop_signals();
  Exporter ex(c, eo);
  HttpServerOptions so;
  so.listen = {sf.listen};
  so.tls_cert_file = sf.tls_cert;
  so.tls_key_file = sf.tls_key;
  so.max_connections = 512;  // idle connections cost a little memory, no thread
  so.threads = 2;            // the handlers never block: they render the last poll, queue pushed alarms
  sf.listener.apply(so);
  HttpServer server(so, [&ex](const HttpRequest& r) { return ex.handle(r); });
  std::string urls = server.url() + "\n";
  std::unique_ptr<PushSubscriptions> push;
  std::unique_ptr<HttpServer> push_server;
  if (!sf.push_listen.empty()) {
    push = std::make_unique<PushSubscriptions>(c.redfish, [&ex](std::vector<Alarm> a) { ex.ingest(std::move(a)); },
                                               eo.stream_options);
    so.listen = {sf.push_listen};
    so.max_connections = 256;
    push_server = std::make_unique<HttpServer>(so, [&push](const HttpRequest& r) { return push->handle(r); });
    urls += push_server->url() + "\n";
  }
  if (!sf.listener.port_file.empty()) sf.listener.announce(urls);
  ex.start();
  if (push) {
    for (const auto& error : push->subscribe(sf.push_url.empty() ? push_server->url() : sf.push_url))
      std::fprintf(stderr, "astral: %s; its alarms wait for the next poll\n", error.c_str());
    std::fprintf(stderr, "astral: receiving pushed events at %s (%zu of %zu Redfish sources subscribed)\n",
                 push_server->url().c_str(), push->active(), c.redfish.size());
  }
  std::fprintf(stderr, "astral: serving %s/metrics (%zu Redfish sources, every %.1f s); Ctrl-C stops\n",
               server.url().c_str(), c.redfish.size(), c.interval.count() / 1000.0);
  wait_for_stop_signal();
  if (push) push->close();  // before the listener goes: the services stop pushing first
  server.stop();
  ex.stop();
  if (!ex.last_error().empty()) std::fprintf(stderr, "astral: %s\n", ex.last_error().c_str());
}

void register_facility(CLI::App& root, Outcome& outcome) {
  auto* group = root.add_subcommand("facility", "power and cooling: Redfish, hwmon, RAPL, IPMI, NVML; PUE; Prometheus");
  group->require_subcommand(1);

  // read
  auto* read = group->add_subcommand("read", "read power and cooling sources once and print readings, derived figures and alarms");
  auto rf = std::make_shared<SourceFlags>();
  auto read_json = std::make_shared<bool>(false);
  auto read_prom = std::make_shared<bool>(false);
  auto read_events = std::make_shared<std::string>();
  auto read_all_flag = std::make_shared<bool>(false);
  rf->add(read);
  read->add_flag("--json", *read_json, "machine-readable output");
  read->add_flag("--prometheus", *read_prom, "print Prometheus exposition instead");
  read->add_flag("--all", *read_all_flag, "print every reading, not a summary per entity");
  read->add_option("--events", *read_events, "append alarms as monitor events (*.events.jsonl, '-' for stdout)")->type_name("FILE");
  read->callback([&outcome, rf, read_json, read_prom, read_events, read_all_flag] {
    if (!rf->any_source()) throw UsageError("facility read: name a source (--redfish URL, --mockup DIR, --hwmon, --rapl, --ipmi, --ipmi-file FILE, --nvml or --config FILE)");
    FacilityConfig c = rf->to_config();
    print_warnings(c);
    Derived d;
    Snapshot s = read_all(*rf, c, d);
    if (!read_events->empty()) write_events_file(*read_events, s.alarms, c.site);
    if (*read_prom) std::cout << render_prometheus(s, &d);
    else if (*read_json) std::cout << nlohmann::json{{"snapshot", to_json(s)}, {"derived", to_json(d)}}.dump(2) << "\n";
    else print_read(std::cout, s, d, *read_all_flag);
    outcome.exit_code = outcome_of(s);
  });

  // events
  auto* events = group->add_subcommand("events", "read the sources once and write their alarms as monitor events (JSON lines)");
  auto ef = std::make_shared<SourceFlags>();
  auto events_out = std::make_shared<std::string>("-");
  ef->add(events);
  events->add_option("-o,--output", *events_out, "file to append to (*.events.jsonl); '-' is stdout")->capture_default_str();
  events->callback([&outcome, ef, events_out] {
    if (!ef->any_source()) throw UsageError("facility events: name a source (see astral facility read --help)");
    FacilityConfig c = ef->to_config();
    print_warnings(c);
    Derived d;
    Snapshot s = read_all(*ef, c, d);
    write_events_file(*events_out, s.alarms, c.site);
    std::fprintf(stderr, "astral: %zu alarm event(s)\n", s.alarms.size());
    outcome.exit_code = outcome_of(s);
  });

  // serve
  auto* serve = group->add_subcommand("serve", "poll the configured sources on a schedule and serve Prometheus /metrics");
  auto sf = std::make_shared<ServeFlags>();
  serve->add_option("--listen", sf->listen, "address:port to listen on")->capture_default_str();
  sf->listener.add(serve);
  serve->add_option("--push-listen", sf->push_listen,
                    "receive pushed Redfish events on address:port, subscribing every Redfish source (EventService Subscriptions)")
      ->type_name("ADDR");
  serve->add_option("--push-url", sf->push_url, "the URL the services reach --push-listen at (default: its own address)")
      ->type_name("URL");
  serve->add_option("--config", sf->config, "sources.json (docs/facility.md)")->required()->type_name("FILE");
  serve->add_option("--site", sf->site, "site layout (replaces the config's \"site\")")->type_name("FILE");
  serve->add_flag("--no-event-streams", sf->no_event_streams,
                  "do not hold Redfish EventService streams (SSE) open; alarms wait for the next poll");
  serve->add_option("--tls-cert", sf->tls_cert, "serve HTTPS with this certificate chain (PEM)")->type_name("FILE");
  serve->add_option("--tls-key", sf->tls_key, "private key for --tls-cert (PEM)")->type_name("FILE");
  serve->add_option("--auth-file", sf->auth_file, "require HTTP Basic auth with the username:password in FILE")->type_name("FILE");
  serve->add_flag("--allow-unauthenticated", sf->allow_unauthenticated, "serve a non-loopback address without --auth-file");
  serve->add_option("--events", sf->events, "append alarm changes to FILE (*.events.jsonl)")->type_name("FILE");
  serve->add_flag("--once", sf->once, "poll once, print the exposition to stdout and exit");
  serve->callback([&outcome, sf] {
    FacilityConfig c = load_config(sf->config);
    if (!sf->site.empty()) use_site_layout(c, load_site_layout(sf->site));
    print_warnings(c);
    if (sf->tls_cert.empty() != sf->tls_key.empty()) throw UsageError("facility serve: --tls-cert and --tls-key go together");
    ExporterOptions eo;
    eo.events_path = sf->events;
    eo.event_streams = !sf->no_event_streams && !sf->once;
    if (!sf->auth_file.empty()) {
      std::string warning;
      eo.scrape_credentials = credentials_from_file(sf->auth_file, &warning);
      if (!warning.empty()) std::fprintf(stderr, "astral: warning: %s\n", warning.c_str());
    }
    if (!sf->once && !is_loopback_address(sf->listen) && !eo.scrape_credentials) {
      if (!sf->allow_unauthenticated)
        throw UsageError(fmt::format("facility serve: {} is reachable from other hosts; pass --auth-file FILE (and --tls-cert/--tls-key), "
                                     "or --allow-unauthenticated if the network is trusted", sf->listen));
      std::fprintf(stderr, "astral: warning: serving %s without authentication\n", sf->listen.c_str());
    }
    if (!sf->push_listen.empty() && !is_loopback_address(sf->push_listen) && sf->tls_cert.empty())
      throw UsageError(fmt::format("facility serve: --push-listen {} is reachable from other hosts; pass --tls-cert/--tls-key "
                                   "(each subscription's secret must not cross the network in clear)", sf->push_listen));
    if (sf->once) {
      Exporter ex(c, eo);
      ex.poll_once();
      std::cout << ex.scrape();
      return;
    }
    serve_until_stopped(c, eo, *sf);
    outcome.exit_code = kOk;
  });

  // pue
  auto* pue = group->add_subcommand("pue", "PUE over an interval from energy counters (live, or between two `read --json` files)");
  struct PueFlags {
    std::string config, from, to;
    double interval_s = 60;
    bool json = false;
  };
  auto pf = std::make_shared<PueFlags>();
  pue->add_option("--config", pf->config, "sources.json with a \"pue\" section classifying meters")->required()->type_name("FILE");
  pue->add_option("--interval", pf->interval_s, "seconds between the two live reads")->capture_default_str();
  pue->add_option("--from", pf->from, "`astral facility read --json` output at the start")->type_name("FILE");
  pue->add_option("--to", pf->to, "`astral facility read --json` output at the end")->type_name("FILE");
  pue->add_flag("--json", pf->json, "machine-readable output");
  pue->callback([&outcome, pf] {
    FacilityConfig c = load_config(pf->config);
    print_warnings(c);
    if (c.derive.pue_it.empty()) throw UsageError(fmt::format("{}: no \"pue\" section with \"it\" meters", pf->config));
    Snapshot a, b;
    if (!pf->from.empty() || !pf->to.empty()) {
      if (pf->from.empty() || pf->to.empty()) throw UsageError("facility pue: --from and --to go together");
      auto load = [](const std::string& path) {
        std::ifstream in(path);
        if (!in) throw UsageError(fmt::format("{}: cannot open", path));
        auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) throw UsageError(fmt::format("{}: not JSON", path));
        try {
          return snapshot_from_json(j.contains("snapshot") ? j["snapshot"] : j);
        } catch (const std::exception& e) {
          throw UsageError(fmt::format("{}: {}", path, e.what()));
        }
      };
      a = load(pf->from);
      b = load(pf->to);
    } else {
      if (pf->interval_s <= 0) throw UsageError("facility pue: --interval must be positive");
      RaplMeter rapl(c.rapl_root.value_or("/"));
      std::fprintf(stderr, "astral: reading the meters, waiting %.1f s, reading again...\n", pf->interval_s);
      a = poll_sources(c, &rapl);
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long long>(pf->interval_s * 1000)));
      b = poll_sources(c, &rapl);
    }
    PueResult r = pue_between(a, b, c.derive);
    if (pf->json) std::cout << to_json(r).dump(2) << "\n";
    else print_pue(std::cout, r);
    outcome.exit_code = r.pue ? kOk : kChecksFailed;
  });

  // site
  auto* site = group->add_subcommand("site", "check a site layout, or derive one from Redfish rack chassis");
  struct SiteFlags {
    std::string check, from_mockup, source;
    std::vector<std::string> hosts;
  };
  auto sif = std::make_shared<SiteFlags>();
  site->add_option("--check", sif->check, "validate this site layout and summarise it")->type_name("FILE");
  site->add_option("--hosts", sif->hosts, "with --check: also fail when a host is in no rack")->type_name("HOST");
  site->add_option("--from-mockup", sif->from_mockup, "print the layout derived from a Redfish mockup directory")->type_name("DIR");
  site->add_option("--source", sif->source, "Redfish source name for derived ids (default: the directory name)");
  site->callback([&outcome, sif] {
    if (sif->check.empty() == sif->from_mockup.empty()) throw UsageError("facility site: give --check FILE or --from-mockup DIR");
    if (!sif->from_mockup.empty()) {
      std::string dir = sif->from_mockup;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      std::string name = sif->source.empty() ? dir.substr(dir.find_last_of('/') + 1) : sif->source;
      std::cout << site_layout_to_json(site_from_redfish_mockup(dir, name));
      return;
    }
    SiteLayout s = load_site_layout(sif->check);
    std::size_t hosts = 0;
    for (const auto& r : s.racks) hosts += r.hosts.size();
    std::printf("%s: %zu racks, %zu hosts, %zu components\n", sif->check.c_str(), s.racks.size(), hosts, s.components.size());
    for (const auto& r : s.racks) {
      auto up = s.upstream_of(r.id);
      std::printf("  %s (%zu hosts) <- %s\n", r.id.c_str(), r.hosts.size(), up.empty() ? "(nothing)" : fmt::format("{}", fmt::join(up, ", ")).c_str());
    }
    auto unknown = unknown_hosts(s, sif->hosts);
    if (!unknown.empty())
      throw UsageError(fmt::format("{}: hosts in no rack: {}", sif->check, fmt::join(unknown, ", ")));
    outcome.exit_code = kOk;
  });

  // mockup
  auto* mock = group->add_subcommand("mockup", "serve a DMTF Redfish mockup directory as a Redfish service (testing, demos)");
  struct MockFlags {
    std::vector<std::string> dirs;
    std::string listen = "127.0.0.1:0", tls_cert, tls_key, credentials_file;
    bool simulate = false;
    ListenerFlags listener;
  };
  auto mf = std::make_shared<MockFlags>();
  mock->add_option("--dir", mf->dirs, "mockup directory (index.json is /redfish/v1); repeat to serve several, one port each")->required();
  mock->add_option("--listen", mf->listen, "address:port (port 0 picks free ports)")->capture_default_str();
  mock->add_option("--tls-cert", mf->tls_cert, "serve HTTPS with this certificate chain")->type_name("FILE");
  mock->add_option("--tls-key", mf->tls_key, "private key for --tls-cert")->type_name("FILE");
  mock->add_option("--credentials-file", mf->credentials_file, "require these credentials (basic or session)")->type_name("FILE");
  mock->add_flag("--simulate-energy", mf->simulate, "energy counters grow with the power readings");
  mf->listener.add(mock);
  mock->callback([&outcome, mf] {
    block_stop_signals();
    std::vector<std::unique_ptr<MockupService>> services;
    std::vector<std::unique_ptr<HttpServer>> servers;
    std::string urls;
    for (const auto& dir : mf->dirs) {
      MockupOptions mo;
      mo.dir = dir;
      mo.simulate_energy = mf->simulate;
      if (!mf->credentials_file.empty()) mo.credentials = credentials_from_file(mf->credentials_file);
      services.push_back(std::make_unique<MockupService>(mo));
      HttpServerOptions so;
      so.listen = {mf->listen};
      so.tls_cert_file = mf->tls_cert;
      so.tls_key_file = mf->tls_key;
      mf->listener.apply(so);  // a thread per connection (the default): event streams block
      auto* svc = services.back().get();
      servers.push_back(std::make_unique<HttpServer>(so, [svc](const HttpRequest& r) { return svc->handle(r); }));
      urls += servers.back()->url() + "\n";
      std::fprintf(stderr, "astral: serving %s (%zu resources) at %s\n", dir.c_str(), svc->resources(), servers.back()->url().c_str());
    }
    mf->listener.announce(urls);
    wait_for_stop_signal();
    outcome.exit_code = kOk;
  });
}

}  // namespace
}  // namespace astral::cli

ASTRAL_COMMAND(facility, astral::cli::register_facility);
