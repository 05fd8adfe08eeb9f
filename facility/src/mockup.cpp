#include "astral/facility/mockup.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mockup_events.hpp"

namespace astral::facility {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view kRoot = "/redfish/v1";
constexpr std::string_view kSessions = "/redfish/v1/SessionService/Sessions";
constexpr int kMaxExpandLevels = 6;     // what the DMTF mockups advertise as MaxLevels
constexpr int kMaxReferenceDepth = 16;  // how deep in a resource references are looked for

std::string normalise_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string random_token() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string t;
  for (int i = 0; i < 32; ++i) t += "0123456789abcdef"[hex(rd)];
  return t;
}

// How deep [ and { nest in a JSON text (outside strings). The mockup re-serialises what it
// expands, and nlohmann's dump recurses: a resource nested deeper is served as it is.
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

constexpr int kMaxExpandableDepth = 64;

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers.emplace_back("OData-Version", "4.0");
  return r;
}

}  // namespace

HttpResponse redfish_error(int status, const std::string& message) {
  json e = {{"error", {{"code", "Base.1.8.GeneralError"}, {"message", message}}}};
  return json_response(status, e.dump());
}

MockupService::MockupService(MockupOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()), events_(make_mockup_events(options_)) {
  fs::path root(options_.dir);
  std::error_code ec;
  if (!fs::is_regular_file(root / "index.json", ec))
    throw std::runtime_error(fmt::format("mockup {}: no index.json (the service root) in it", options_.dir));
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "index.json" || !it->is_regular_file()) continue;
    std::string rel = fs::relative(it->path().parent_path(), root).generic_string();
    std::string uri = rel == "." ? std::string(kRoot) : std::string(kRoot) + "/" + rel;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    resources_.emplace(std::move(uri), ss.str());
  }
  if (ec) throw std::runtime_error(fmt::format("mockup {}: {}", options_.dir, ec.message()));
  note_too_deep();
}

void MockupService::note_too_deep() {
  for (const auto& [uri, text] : resources_)
    if (nesting_depth(text) > kMaxExpandableDepth) too_deep_.insert(uri);
}

MockupService::MockupService(std::map<std::string, std::string> resources, MockupOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()), events_(make_mockup_events(options_)) {
  for (auto& [uri, text] : resources) resources_.emplace(normalise_path(uri), std::move(text));
  note_too_deep();
}

std::size_t MockupService::open_sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void MockupService::expire_sessions() {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.clear();
}

bool MockupService::authorised(const HttpRequest& request) const {
  if (options_.credentials.empty()) return true;
  if (options_.allow_sessions) {
    std::string token = request.header("x-auth-token");
    std::lock_guard<std::mutex> lock(mu_);
    if (!token.empty() && sessions_.count(token)) return true;
  }
  return options_.allow_basic && basic_auth_matches(request, options_.credentials);
}

HttpResponse MockupService::handle(const HttpRequest& request) {
  ++requests_;
  std::string path = normalise_path(request.path);
  if (path == "/redfish") return json_response(200, R"({"v1": "/redfish/v1/"})");
  if (path == kSessions && request.method == "POST") return login(request);
  // The service root is readable without credentials (Redfish specification).
  bool open = path == kRoot;
  if (!open && !authorised(request)) {
    HttpResponse r = redfish_error(401, "authentication required");
    if (options_.allow_basic) r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"Redfish\"");
    return r;
  }
  if (request.method == "DELETE" && path.rfind(std::string(kSessions) + "/", 0) == 0) return logout(path, request);
  if (options_.events && path.rfind("/redfish/v1/EventService", 0) == 0) return events(path, request);
  if (request.method != "GET" && request.method != "HEAD") return redfish_error(405, "this mockup is read-only");
  return get(path, request.query);
}

namespace {

// $expand=<mode>($levels=N) (DSP0266, the $expand query parameter): mode '.' or '*', N levels (1 when absent); 0 when
// the query asks for no expansion. '~' (Links only) expands members like '.', as before.
int expand_levels(const std::string& query) {
  std::string q;
  for (std::size_t i = 0; i < query.size(); ++i) {  // %24expand, %28 ... as some clients send
    if (query[i] == '%' && i + 2 < query.size() && std::isxdigit(static_cast<unsigned char>(query[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(query[i + 2]))) {
      q += static_cast<char>(std::stoi(query.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      q += query[i];
    }
  }
  if (q.find("$expand") == std::string::npos) return 0;
  auto at = q.find("$levels=");
  if (at == std::string::npos) return 1;
  long levels = std::strtol(q.c_str() + at + 8, nullptr, 10);  // saturates, never overflows
  return static_cast<int>(std::clamp<long>(levels, 1, kMaxExpandLevels));
}

}  // namespace

HttpResponse MockupService::get(const std::string& path, const std::string& query) {
  auto it = resources_.find(path);
  if (it == resources_.end()) return redfish_error(404, fmt::format("{} not found", path));
  int levels = expand_levels(query);
  if ((levels == 0 && !options_.simulate_energy) || too_deep_.count(path)) return json_response(200, it->second);
  std::string key = fmt::format("{}?{}", path, levels);
  if (!options_.simulate_energy) {
    // Static files: an expanded resource is the same every time.
    std::lock_guard<std::mutex> lock(mu_);
    if (auto cached = expanded_.find(key); cached != expanded_.end()) return json_response(200, cached->second);
  }
  json j = json::parse(it->second, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return json_response(200, it->second);  // serve bad files as they are
  expand(j, path, levels);
  if (options_.simulate_energy) return json_response(200, j.dump());
  std::string text = j.dump();
  std::lock_guard<std::mutex> lock(mu_);
  expanded_.emplace(key, text);
  return json_response(200, std::move(text));
}

// Replaces references by the resources they name, `levels` deep: a collection's Members, and
// every other reference outside Links to a resource below this one (its subordinate resources,
// not RelatedItem or Chassis links that lead back up). Energy counters advance in each.
void MockupService::expand(json& resource, const std::string& self, int levels) const {
  if (options_.simulate_energy) advance_energy(resource);
  if (levels <= 0) return;
  auto inline_reference = [&](json& ref, bool member) {
    if (!ref.is_object() || ref.size() != 1 || !ref.contains("@odata.id") || !ref["@odata.id"].is_string()) return;
    std::string uri = normalise_path(ref["@odata.id"].get<std::string>());
    if (!member && uri.rfind(self + "/", 0) != 0) return;
    auto target = resources_.find(uri);
    if (target == resources_.end() || too_deep_.count(uri)) return;
    json full = json::parse(target->second, nullptr, false);
    if (full.is_discarded() || !full.is_object()) return;
    expand(full, uri, levels - 1);
    ref = std::move(full);
  };
  std::function<void(json&, int)> walk = [&](json& node, int depth) {
    if (depth > kMaxReferenceDepth) return;  // references sit a few levels down, never this deep
    if (node.is_array()) {
      for (auto& v : node) walk(v, depth + 1);
      return;
    }
    if (!node.is_object()) return;
    for (auto& [key, value] : node.items()) {
      if (key == "Links" || key == "Members") continue;
      inline_reference(value, false);
      if (!value.contains("@odata.id") || value.size() == 1) walk(value, depth + 1);  // not into what was just inlined
    }
  };
  if (auto m = resource.find("Members"); m != resource.end() && m->is_array())
    for (auto& member : *m) inline_reference(member, true);
  walk(resource, 0);
}

void MockupService::advance_energy(nlohmann::json& j) const {
  if (!j.is_object() || !j.contains("EnergykWh") || !j["EnergykWh"].is_object()) return;
  // Energy grows at the resource's own power reading since the service started.
  double watts = 0;
  for (const char* p : {"PowerWatts", "InputPowerWatts"}) {
    if (j.contains(p) && j[p].is_object() && j[p].contains("Reading") && j[p]["Reading"].is_number()) {
      watts = j[p]["Reading"].get<double>();
      break;
    }
  }
  auto& reading = j["EnergykWh"]["Reading"];
  if (reading.is_number()) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    reading = reading.get<double>() + watts * seconds / 3.6e6;
  }
}

HttpResponse MockupService::login(const HttpRequest& request) {
  if (!options_.allow_sessions) return redfish_error(405, "sessions are not supported by this service");
  json body = json::parse(request.body, nullptr, false);
  if (!body.is_object() || !body.contains("UserName") || !body.contains("Password") ||
      !body["UserName"].is_string() || !body["Password"].is_string())
    return redfish_error(400, "expected {\"UserName\": ..., \"Password\": ...}");
  if (body["UserName"].get<std::string>() != options_.credentials.username ||
      body["Password"].get<std::string>() != options_.credentials.password)
    return redfish_error(401, "invalid credentials");
  std::string token = random_token();
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    path = fmt::format("{}/{}", kSessions, next_session_++);
    sessions_.emplace(token, path);
  }
  json session = {{"@odata.id", path}, {"@odata.type", "#Session.v1_7_0.Session"},
                  {"Id", path.substr(path.rfind('/') + 1)}, {"UserName", options_.credentials.username}};
  HttpResponse r = json_response(201, session.dump());
  r.headers.emplace_back("X-Auth-Token", token);
  r.headers.emplace_back("Location", path);
  return r;
}

HttpResponse MockupService::logout(const std::string& path, const HttpRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second == path) {
      // Only the session's own token (or an administrator with basic auth) may end it.
      if (it->first != request.header("x-auth-token") && !basic_auth_matches(request, options_.credentials))
        return redfish_error(403, "not your session");
      sessions_.erase(it);
      return HttpResponse{204, "application/json", {}, {}};
    }
  }
  return redfish_error(404, fmt::format("{} not found", path));
}

}  // namespace astral::facility
