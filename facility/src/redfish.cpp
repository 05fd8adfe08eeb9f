// Public Redfish entry points: URL and credential handling, one endpoint, many endpoints.
#include "astral/facility/redfish.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "astral/facility/mockup.hpp"
#include "poll_loop.hpp"
#include "redfish_emit.hpp"
#include "redfish_fetch.hpp"
#include "redfish_walk.hpp"

namespace astral::facility {

AuthMode parse_auth_mode(const std::string& s) {
  if (s == "auto" || s == "automatic") return AuthMode::automatic;
  if (s == "none") return AuthMode::none;
  if (s == "basic") return AuthMode::basic;
  if (s == "session") return AuthMode::session;
  throw std::invalid_argument("unknown auth mode '" + s + "' (use auto, none, basic or session)");
}

const char* to_string(AuthMode mode) {
  switch (mode) {
    case AuthMode::automatic: return "auto";
    case AuthMode::none: return "none";
    case AuthMode::basic: return "basic";
    case AuthMode::session: return "session";
  }
  return "auto";
}

Credentials credentials_from_env(const std::string& prefix) {
  Credentials c;
  if (const char* u = std::getenv((prefix + "_USERNAME").c_str())) c.username = u;
  if (const char* p = std::getenv((prefix + "_PASSWORD").c_str())) c.password = p;
  return c;
}

Credentials credentials_from_file(const std::string& path, std::string* warning) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw std::runtime_error(fmt::format("credentials file {}: not a readable file", path));
  if ((st.st_mode & 077) && warning)
    *warning = fmt::format("credentials file {} is readable by group or others; chmod 600 it", path);
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("credentials file {}: cannot open", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  Credentials c;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object()) {
    auto pick = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
      return std::string();
    };
    c.username = pick({"username", "UserName", "user"});
    c.password = pick({"password", "Password"});
  } else {
    std::string line = text.substr(0, text.find('\n'));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos)
      throw std::runtime_error(fmt::format("credentials file {}: expected 'username:password' on the first line or a JSON object", path));
    c.username = line.substr(0, colon);
    c.password = line.substr(colon + 1);
  }
  if (c.username.empty())
    throw std::runtime_error(fmt::format("credentials file {}: no username", path));
  return c;
}

std::string normalise_base_url(const std::string& url_in) {
  std::string url = url_in;
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("Redfish URL '{}': {}", url_in, why));
  };
  if (url.empty()) throw fail("empty");
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) url = "https://" + url;
  scheme_end = url.find("://");
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") throw fail("the scheme must be http or https");
  std::string rest = url.substr(scheme_end + 3);
  std::string authority = rest.substr(0, rest.find('/'));
  std::string path = rest.size() > authority.size() ? rest.substr(authority.size()) : std::string();
  if (authority.find('@') != std::string::npos)
    throw std::invalid_argument(fmt::format(
        "Redfish URL for host '{}': credentials in the URL would be visible in argv and logs; "
        "use ASTRAL_REDFISH_USERNAME/ASTRAL_REDFISH_PASSWORD or --credentials-file",
        authority.substr(authority.find('@') + 1)));
  if (authority.empty()) throw fail("no host");
  if (path.find_first_of("?#") != std::string::npos) throw fail("no query or fragment, please");
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (!path.empty() && path != "/redfish/v1" && path != "/redfish")
    throw fail("give the service address (https://bmc or https://bmc/redfish/v1), not a resource path");
  return scheme + "://" + authority;
}

namespace {

std::string default_name(const std::string& base) {
  auto p = base.find("://");
  return p == std::string::npos ? base : base.substr(p + 3);
}

}  // namespace

Snapshot read_redfish(const RedfishEndpoint& endpoint, const PollOptions& options) {
  using namespace detail;
  Snapshot out;
  SourceStatus status;
  status.reader = "redfish";
  status.name = endpoint.name;
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t requests = 0;
  try {
    std::string base = normalise_base_url(endpoint.url);
    if (status.name.empty()) status.name = default_name(base);
    Emitter emit(out, status.name, Clock::now());
    if (!endpoint.verify_tls && base.rfind("https", 0) == 0)
      emit.finding({}, "insecure", fmt::format("TLS certificate verification is off for {}", base));
    {
      HttpFetcher fetcher(endpoint, base, options);
      Fetched root = fetcher.get("/redfish/v1");
      std::string error;
      if (!root.ok && (root.status == 401 || root.status == 403) && !endpoint.credentials.empty()) {
        // Some services protect even the service root; log in first, then ask again.
        error = fetcher.login("/redfish/v1/SessionService/Sessions");
        if (error.empty()) root = fetcher.get("/redfish/v1");
      } else if (root.ok) {
        error = fetcher.login(link_of(child(root.body, "Links"), "Sessions"));
      }
      if (!error.empty()) {
        status.error = error;
      } else if (!root.ok) {
        status.error = root.error.empty() ? fmt::format("{}: no Redfish service root", base) : root.error;
        if (root.malformed) out.count_quirk("malformed_json");
      } else if (!root.body.is_object() || !root.body.contains("@odata.id")) {
        status.error = fmt::format("{}/redfish/v1: not a Redfish service root", base);
      } else {
        if (!fetcher.auth_note().empty()) {
          out.count_quirk("no_session_service");
          emit.finding({}, "auth", fetcher.auth_note());
        }
        WalkOptions wo{endpoint.sensors, endpoint.telemetry, options.max_resources, endpoint.expand_levels};
        Walker walker(fetcher, emit, wo);
        status.partial = !walker.run(root.body);
        status.ok = true;
      }
      if (fetcher.nan_literals) out.count_quirk("nan_literal", fetcher.nan_literals);
      requests = fetcher.requests;
    }
  } catch (const std::exception& e) {
    status.ok = false;
    status.error = e.what();
  }
  status.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  status.requests = requests;
  out.sources.push_back(std::move(status));
  return out;
}

namespace {

// An event loop per core (at most one per 32 endpoints in flight), all taking endpoints from one
// counter: parsing and walking is CPU work, and one thread would leave the other cores idle.
void poll_on_loops(std::size_t count, std::size_t concurrency, const std::function<void(std::size_t)>& read_one) {
  std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::size_t loops = std::clamp<std::size_t>(concurrency / 32, 1, cores);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    std::size_t i = next++;
    if (i >= count) return false;
    read_one(i);
    return true;
  };
  std::size_t per_loop = (concurrency + loops - 1) / loops;
  // A loop that cannot map its fibers' stacks leaves the endpoints to the others; when none ran
  // at all, run_on_fibers' error reaches the caller, which falls back to threads.
  std::vector<std::thread> others;
  for (std::size_t l = 1; l < loops; ++l) {
    others.emplace_back([&] {
      try {
        detail::run_on_fibers(per_loop, work);
      } catch (const std::runtime_error&) {
      }
    });
  }
  std::exception_ptr failure;
  try {
    detail::run_on_fibers(per_loop, work);
  } catch (const std::runtime_error&) {
    failure = std::current_exception();
  }
  for (auto& t : others) t.join();
  if (failure && next.load() == 0) std::rethrow_exception(failure);
}

}  // namespace

Snapshot poll_redfish(const std::vector<RedfishEndpoint>& endpoints, const PollOptions& options) {
  std::vector<Snapshot> results(endpoints.size());
  std::atomic<std::size_t> next{0};
  auto read_one = [&](std::size_t i) {
    try {
      results[i] = read_redfish(endpoints[i], options);
    } catch (const std::exception& e) {  // e.g. bad_alloc: never let it leave the thread or fiber
      SourceStatus s;
      s.name = endpoints[i].name;
      s.reader = "redfish";
      s.error = e.what();
      results[i].sources.push_back(std::move(s));
    }
  };
  auto worker = [&] {
    for (std::size_t i = next++; i < endpoints.size(); i = next++) read_one(i);
  };
  std::size_t threads = std::min(std::max<std::size_t>(1, options.concurrency), endpoints.size());
  bool looped = false;
  if (options.engine == PollEngine::event_loop && threads > 1) {
    try {
      poll_on_loops(endpoints.size(), threads, read_one);
      looped = true;
    } catch (const std::runtime_error&) {  // no memory for the fibers' stacks: threads it is
    }
  }
  if (!looped) {
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    if (threads > 0) worker();
    for (auto& t : pool) t.join();
  }
  return Snapshot::merged(std::move(results));
}

namespace {

Snapshot read_service(MockupService& service, const std::string& label, const std::string& name) {
  using namespace detail;
  Snapshot out;
  SourceStatus status;
  status.reader = "redfish";
  status.name = name;
  auto t0 = std::chrono::steady_clock::now();
  ServiceFetcher fetcher(service, label);
  Emitter emit(out, name, Clock::now());
  Fetched root = fetcher.get("/redfish/v1");
  if (!root.ok) {
    status.error = root.error;
  } else {
    Walker walker(fetcher, emit, WalkOptions{SensorPolicy::automatic, true, 4096, 6});
    status.partial = !walker.run(root.body);
    status.ok = true;
  }
  if (fetcher.nan_literals) out.count_quirk("nan_literal", fetcher.nan_literals);
  status.requests = fetcher.requests;
  status.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.sources.push_back(std::move(status));
  return out;
}

}  // namespace

Snapshot read_redfish_mockup(const std::string& dir, const std::string& name) {
  std::unique_ptr<MockupService> service;
  try {
    service = std::make_unique<MockupService>(MockupOptions{dir, {}, true, true, false});
  } catch (const std::exception& e) {
    Snapshot out;
    out.sources.push_back(SourceStatus{name, "redfish", false, false, e.what()});
    return out;
  }
  return read_service(*service, dir, name);
}

Snapshot read_redfish_resources(const std::map<std::string, std::string>& resources, const std::string& name) {
  MockupService service(resources, MockupOptions{});
  return read_service(service, "(in memory)", name);
}

}  // namespace astral::facility
