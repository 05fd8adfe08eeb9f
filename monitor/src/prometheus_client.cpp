// Prometheus HTTP API range queries (GET /api/v1/query_range) over libcurl: one query per
// metric rule, every request bounded by a connect and a total timeout, the first failure ends
// the fetch with one line that names the URL. TLS verifies by default; a bearer token is read
// from a file and sent in a header, never on the command line or in messages.
#include <curl/curl.h>

#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "astral/common/checked.hpp"
#include "astral/monitor/metrics.hpp"
#include "metric_rules.hpp"

namespace astral::monitor {

namespace {

constexpr size_t kMaxBody = 256u << 20;  // a range query over a large fleet, not more

struct HttpReply {
  long status = 0;
  std::string body;
  std::string error;  // transport failure
};

size_t collect_body(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > kMaxBody) return 0;  // curl fails the transfer
  body->append(data, size * n);
  return size * n;
}

std::string url_escape(CURL* curl, const std::string& s) {
  char* e = curl_easy_escape(curl, s.c_str(), int(s.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

class PrometheusHttp {
 public:
  explicit PrometheusHttp(const PrometheusOptions& o) : options_(o) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
    if (!o.bearer_token_file.empty()) {
      std::ifstream in(o.bearer_token_file);
      std::getline(in, token_);
      while (!token_.empty() && (token_.back() == '\r' || token_.back() == ' ')) token_.pop_back();
      if (token_.empty()) token_error_ = o.bearer_token_file + ": no bearer token in the file";
    }
  }
  ~PrometheusHttp() {
    if (curl_) curl_easy_cleanup(curl_);
  }
  PrometheusHttp(const PrometheusHttp&) = delete;
  PrometheusHttp& operator=(const PrometheusHttp&) = delete;

  const std::string& token_error() const { return token_error_; }

  HttpReply get(const std::string& path_and_query) {
    HttpReply reply;
    if (!curl_) {
      reply.error = "libcurl could not create a handle";
      return reply;
    }
    curl_easy_reset(curl_);
    std::string base = options_.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    const std::string url = base + path_and_query;
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, long(options_.timeout.count()));
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, long(std::min(options_.connect_timeout, options_.timeout).count()));
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(curl_, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
    std::string auth;
    if (!token_.empty()) {
      auth = "Authorization: Bearer " + token_;
      headers = curl_slist_append(headers, auth.c_str());
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    const CURLcode code = curl_easy_perform(curl_);
    curl_slist_free_all(headers);
    if (code != CURLE_OK) {
      reply.error = errbuf[0] ? errbuf : curl_easy_strerror(code);
      return reply;
    }
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
  }

  std::string escape(const std::string& s) { return curl_ ? url_escape(curl_, s) : s; }

 private:
  const PrometheusOptions& options_;
  CURL* curl_ = nullptr;
  std::string token_, token_error_;
};

std::string seconds_arg(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(us) / 1e6);
  return buf;
}

// Prometheus's own error text, when the body is its JSON error object.
std::string api_error(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return {};
}

}  // namespace

std::string read_query_range_reply(const std::string& body, std::vector<MetricSeries>& out) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return "malformed JSON in the reply";
  // Compared as JSON values: json::value("status", "") throws when the field is not a string.
  auto field_is = [](const nlohmann::json& o, const char* key, const char* want) {
    auto it = o.find(key);
    return it != o.end() && *it == want;
  };
  if (!j.is_object() || !field_is(j, "status", "success") || !j.contains("data") || !j["data"].is_object())
    return "reply is not a successful query result";
  const auto& data = j["data"];
  if (!field_is(data, "resultType", "matrix") || !data.contains("result") || !data["result"].is_array())
    return "reply holds no range-query matrix";
  for (const auto& r : data["result"]) {
    if (!r.is_object() || !r.contains("metric") || !r["metric"].is_object() || !r.contains("values") ||
        !r["values"].is_array())
      return "malformed series in the reply";
    MetricSeries s;
    for (auto it = r["metric"].begin(); it != r["metric"].end(); ++it)
      if (it.value().is_string()) {
        if (it.key() == "__name__") s.metric = it.value().get<std::string>();
        else s.labels[it.key()] = it.value().get<std::string>();
      }
    for (const auto& v : r["values"]) {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_string()) return "malformed sample in the reply";
      char* end = nullptr;
      const std::string text = v[1].get<std::string>();
      double value = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || !std::isfinite(value)) continue;  // NaN / Inf samples say nothing
      const auto time_us = checked_round<int64_t>(v[0].get<double>() * 1e6);
      if (!time_us) return "sample time out of range in the reply";
      s.samples.push_back({*time_us, value});
    }
    if (!s.samples.empty()) out.push_back(std::move(s));
  }
  return {};
}

std::string redacted_url(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t from = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t at = url.find('@', from), slash = url.find('/', from);
  if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
  return url.substr(0, from) + "***" + url.substr(at);
}

MetricFetch fetch_prometheus(const PrometheusOptions& options, const MetricWindow& window) {
  MetricFetch fetch;
  const std::string where = "prometheus " + redacted_url(options.url);
  if (!options.url.starts_with("http://") && !options.url.starts_with("https://")) {
    fetch.error = where + ": not an http(s) URL";
    return fetch;
  }
  PrometheusHttp http(options);
  if (!http.token_error().empty()) {
    fetch.error = where + ": " + http.token_error();
    return fetch;
  }
  const int64_t step_s = std::max<int64_t>(1, window.step_us / 1000000);
  std::map<std::string_view, size_t> series_of_exporter;
  for (const MetricRule& rule : metric_rules()) {
    series_of_exporter.try_emplace(rule.exporter, 0);
    const std::string query = "/api/v1/query_range?query=" + http.escape(rule_query(rule)) +
                              "&start=" + seconds_arg(window.start_us()) + "&end=" + seconds_arg(window.end_us()) +
                              "&step=" + std::to_string(step_s) + "s";
    HttpReply reply = http.get(query);
    ++fetch.queries;
    if (!reply.error.empty()) {
      fetch.error = where + ": unreachable: " + reply.error;
      return fetch;
    }
    if (reply.status != 200) {
      std::string detail = api_error(reply.body);
      fetch.error = where + ": HTTP " + std::to_string(reply.status) +
                    (reply.status == 401 || reply.status == 403 ? " (not authorised; see --prometheus-token-file)" : "") +
                    (detail.empty() ? "" : ": " + detail);
      return fetch;
    }
    const size_t before = fetch.series.size();
    if (std::string bad = read_query_range_reply(reply.body, fetch.series); !bad.empty()) {
      fetch.error = where + ": " + bad + " (query " + std::string(rule.name) + ")";
      return fetch;
    }
    series_of_exporter[rule.exporter] += fetch.series.size() - before;
  }
  for (const auto& [exporter, n] : series_of_exporter)
    if (n == 0) fetch.notes.push_back(where + ": no " + std::string(exporter) + " series in the window (exporter missing?)");
  fetch.ok = true;
  return fetch;
}

}  // namespace astral::monitor
