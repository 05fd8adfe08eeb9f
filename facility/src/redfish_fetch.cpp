#include "redfish_fetch.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "json_parse.hpp"
#include "poll_loop.hpp"

namespace astral::facility::detail {

namespace {

// Replaces bare NaN / Infinity tokens outside strings with null.
std::string null_out_non_finite(const std::string& text, std::uint64_t& replaced) {
  static const std::string_view kTokens[] = {"-Infinity", "Infinity", "-NaN", "NaN", "-nan", "nan"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    bool matched = false;
    for (auto token : kTokens) {
      if (text.compare(i, token.size(), token) == 0) {
        out += "null";
        i += token.size();
        ++replaced;
        matched = true;
        break;
      }
    }
    if (!matched) out += text[i++];
  }
  return out;
}

}  // namespace

json parse_lenient(const std::string& text, std::uint64_t& quirks_nan) {
  if (auto fast = parse_json_fast(text)) return std::move(*fast);
  json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  std::uint64_t replaced = 0;
  std::string cleaned = null_out_non_finite(text, replaced);
  if (replaced == 0) return j;
  json k = json::parse(cleaned, nullptr, false);
  if (!k.is_discarded()) quirks_nan += replaced;
  return k;
}

Fetched ServiceFetcher::get(const std::string& uri) {
  Fetched f;
  ++requests;
  HttpRequest request;
  request.method = "GET";
  request.target = uri;
  auto q = uri.find('?');
  request.path = uri.substr(0, q);
  if (q != std::string::npos) request.query = uri.substr(q + 1);
  HttpResponse r = service_.handle(request);
  f.status = r.status;
  if (r.status != 200) {
    f.error = fmt::format("{}: HTTP {} from mockup {}", uri, r.status, label_);
    return f;
  }
  f.body = parse_lenient(r.body, nan_literals);
  if (f.body.is_discarded()) {
    f.malformed = true;
    f.error = fmt::format("{}: malformed JSON", uri);
    return f;
  }
  f.ok = true;
  return f;
}

HttpFetcher::HttpFetcher(const RedfishEndpoint& endpoint, std::string base_url,
                         const PollOptions& options)
    : endpoint_(endpoint),
      base_(std::move(base_url)),
      options_(options),
      client_(HttpClientOptions{options.connect_timeout, endpoint.verify_tls, endpoint.ca_file,
                                options.max_body_bytes}),
      deadline_(std::chrono::steady_clock::now() + options.deadline),
      jitter_(static_cast<unsigned>(std::hash<std::string>{}(base_))) {}

HttpFetcher::~HttpFetcher() { close_session(); }

bool HttpFetcher::out_of_time() const { return std::chrono::steady_clock::now() >= deadline_; }

HttpResult HttpFetcher::send_once(const std::string& method, const std::string& uri,
                                  const std::string& body, std::chrono::milliseconds timeout) {
  std::vector<std::string> headers;
  BasicAuth basic;
  if (mode_ == AuthMode::session && !token_.empty()) headers.push_back("X-Auth-Token: " + token_);
  if (mode_ == AuthMode::basic) {
    basic.username = &endpoint_.credentials.username;
    basic.password = &endpoint_.credentials.password;
  }
  ++requests;
  return client_.request(method, base_ + uri, body, headers, basic, timeout);
}

HttpResult HttpFetcher::send(const std::string& method, const std::string& uri,
                             const std::string& body) {
  using namespace std::chrono;
  HttpResult r;
  bool relogged = false;
  for (int attempt = 0;; ++attempt) {
    // One test of the deadline for every caller (out_of_time), and no request with a timeout
    // rounded down to nothing.
    const auto remaining = ceil<milliseconds>(deadline_ - steady_clock::now());
    if (out_of_time() || remaining.count() <= 0) {
      r.status = 0;
      r.error = fmt::format("deadline of {} ms for this endpoint exceeded", options_.deadline.count());
      return r;
    }
    r = send_once(method, uri, body, std::min(options_.timeout, remaining));
    if (r.status == 401 && mode_ == AuthMode::session && !relogged && !sessions_collection_.empty()) {
      // The session expired or the BMC restarted: log in again once.
      relogged = true;
      token_.clear();
      long status = 0;
      if (open_session(sessions_collection_, &status).empty()) {
        --attempt;
        continue;
      }
      return r;
    }
    bool retry = (r.status == 0 && r.retryable) || r.status == 429 || r.status == 500 ||
                 r.status == 502 || r.status == 503 || r.status == 504;
    if (!retry || attempt >= options_.retries) return r;
    double factor = std::ldexp(1.0, attempt) * std::uniform_real_distribution<double>(0.5, 1.5)(jitter_);
    auto wait = duration_cast<milliseconds>(options_.backoff * factor);
    if (r.retry_after_s >= 0) wait = std::max(wait, milliseconds(static_cast<long long>(r.retry_after_s * 1000)));
    wait = std::min(wait, milliseconds(5000));
    if (steady_clock::now() + wait >= deadline_) return r;
    pause_for(wait);
  }
}

Fetched HttpFetcher::get(const std::string& uri) {
  Fetched f;
  HttpResult r = send("GET", uri, {});
  f.status = r.status;
  std::string where = base_ + uri;
  if (r.status == 0) {
    f.error = fmt::format("GET {}: {}", where, r.error);
    if (r.tls_failure && endpoint_.verify_tls) {
      f.error += endpoint_.ca_file.empty()
                     ? " (TLS verification failed: pass the BMC's CA with --ca-file, or --insecure to skip verification)"
                     : " (TLS verification failed against " + endpoint_.ca_file + ")";
    }
    return f;
  }
  if (r.status == 401 || r.status == 403) {
    f.error = fmt::format("GET {}: HTTP {} ({})", where, r.status,
                          endpoint_.credentials.empty()
                              ? "the service needs credentials: set ASTRAL_REDFISH_USERNAME/ASTRAL_REDFISH_PASSWORD or --credentials-file"
                              : "credentials rejected");
    return f;
  }
  if (r.status < 200 || r.status >= 300) {
    f.error = fmt::format("GET {}: HTTP {}", where, r.status);
    return f;
  }
  f.body = parse_lenient(r.body, nan_literals);
  if (f.body.is_discarded()) {
    f.malformed = true;
    f.error = fmt::format("GET {}: malformed JSON ({} bytes)", where, r.body.size());
    return f;
  }
  f.ok = true;
  return f;
}

std::string HttpFetcher::open_session(const std::string& sessions_uri, long* status) {
  json creds = {{"UserName", endpoint_.credentials.username},
                {"Password", endpoint_.credentials.password}};
  auto saved = mode_;
  mode_ = AuthMode::none;  // the login request itself carries no token
  HttpResult r = send_once("POST", sessions_uri, creds.dump(), std::min(options_.timeout, options_.deadline));
  mode_ = saved;
  *status = r.status;
  if (r.status == 0) return fmt::format("POST {}{}: {}", base_, sessions_uri, r.error);
  if (r.status < 200 || r.status >= 300) return fmt::format("POST {}{}: HTTP {}", base_, sessions_uri, r.status);
  if (r.auth_token.empty()) return fmt::format("POST {}{}: no X-Auth-Token in the reply", base_, sessions_uri);
  token_ = r.auth_token;
  session_uri_ = r.location;
  if (session_uri_.empty()) {
    // Some services only return the session in the body.
    std::uint64_t ignored = 0;
    json j = parse_lenient(r.body, ignored);
    if (j.is_object() && j.contains("@odata.id") && j["@odata.id"].is_string())
      session_uri_ = j["@odata.id"].get<std::string>();
  }
  return {};
}

std::string HttpFetcher::login(const std::string& sessions_uri) {
  sessions_collection_ = sessions_uri.empty() ? "/redfish/v1/SessionService/Sessions" : sessions_uri;
  AuthMode wanted = endpoint_.auth;
  if (wanted == AuthMode::automatic) wanted = endpoint_.credentials.empty() ? AuthMode::none : AuthMode::session;
  if (wanted != AuthMode::none && endpoint_.credentials.empty())
    return fmt::format("{}: {} authentication needs credentials (ASTRAL_REDFISH_USERNAME/ASTRAL_REDFISH_PASSWORD or --credentials-file)",
                       base_, to_string(wanted));
  if (wanted != AuthMode::session) {
    mode_ = wanted;
    return {};
  }
  long status = 0;
  std::string error = open_session(sessions_collection_, &status);
  if (error.empty()) {
    mode_ = AuthMode::session;
    return {};
  }
  bool no_session_service = status == 404 || status == 405 || status == 501;
  if (endpoint_.auth == AuthMode::automatic && no_session_service) {
    mode_ = AuthMode::basic;
    auth_note_ = "no session service; using basic authentication";
    return {};
  }
  if (status == 401 || status == 403 || status == 400) return error + " (login rejected: check the credentials)";
  return error;
}

void HttpFetcher::close_session() {
  if (token_.empty() || session_uri_.empty()) return;
  std::string uri = session_uri_;
  // Location may be absolute; DELETE only on the same service.
  if (uri.rfind(base_, 0) == 0) uri = uri.substr(base_.size());
  if (uri.empty() || uri[0] != '/') return;
  send_once("DELETE", uri, {}, std::chrono::milliseconds(std::min<long long>(1000, options_.timeout.count())));
  token_.clear();
}

}  // namespace astral::facility::detail
