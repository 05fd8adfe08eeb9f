#include "http_client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>
#include "poll_loop.hpp"
#include "text_util.hpp"

namespace astral::facility::detail {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  HttpResult* result;
  std::size_t max_body;
  bool too_large = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t bytes = size * n;
  if (t->result->body.size() + bytes > t->max_body) {
    t->too_large = true;
    return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  t->result->body.append(data, bytes);
  return bytes;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t bytes = size * n;
  std::string line(data, bytes);
  auto colon = line.find(':');
  if (colon == std::string::npos) return bytes;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  std::string value = trim(line.substr(colon + 1));
  if (name == "x-auth-token") t->result->auth_token = value;
  else if (name == "location") t->result->location = value;
  else if (name == "retry-after") {
    char* end = nullptr;
    double s = std::strtod(value.c_str(), &end);
    if (end != value.c_str()) t->result->retry_after_s = s;
  }
  return bytes;
}

bool retryable(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return false;
  }
}

bool tls_failure(CURLcode code) {
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace

// The client keeps its connections and DNS entries in a share of its own, not in the caches of the
// multi handle that every endpoint on a poll loop uses. libcurl walks a whole cache: the DNS cache
// on every lookup (to prune it; with a host name per BMC that was 60 % of the poller's CPU at
// 12,500 BMCs) and the connection cache whenever a connection goes back to it over its limit (the
// finished endpoints' idle connections: another 10 %). Here an endpoint's connection is reused for
// its whole crawl and closed when the crawl ends.
HttpClient::HttpClient(HttpClientOptions options) : options_(std::move(options)) {
  global_init();
  curl_ = curl_easy_init();
  CURLSH* share = curl_share_init();
  if (share && (curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
                curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK)) {
    curl_share_cleanup(share);
    share = nullptr;
  }
  connections_ = share;
  // Attached once: curl_easy_reset before each request keeps the handle's share.
  if (curl_ && share) curl_easy_setopt(static_cast<CURL*>(curl_), CURLOPT_SHARE, share);
}

HttpClient::~HttpClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (connections_) curl_share_cleanup(static_cast<CURLSH*>(connections_));  // after its last user
}

HttpResult HttpClient::request(const std::string& method, const std::string& url,
                               const std::string& body, const std::vector<std::string>& headers,
                               const BasicAuth& basic, std::chrono::milliseconds timeout) {
  HttpResult result;
  auto* curl = static_cast<CURL*>(curl_);
  if (!curl) {
    result.error = "libcurl could not create a handle";
    return result;
  }
  curl_easy_reset(curl);  // keeps the connection cache, drops the previous request's options
  Transfer transfer{&result, options_.max_body_bytes};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long long>(1, timeout.count())));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(options_.connect_timeout, timeout).count()));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  if (basic.username && basic.password) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, basic.username->c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, basic.password->c_str());
  }
  curl_slist* list = nullptr;
  list = curl_slist_append(list, "Accept: application/json");
  list = curl_slist_append(list, "OData-Version: 4.0");
  if (!body.empty()) list = curl_slist_append(list, "Content-Type: application/json");
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  CURLcode code = perform(curl);  // on a poll loop's fiber, the others run meanwhile
  curl_slist_free_all(list);
  if (code != CURLE_OK) {
    result.status = 0;
    result.retryable = retryable(code);
    result.tls_failure = tls_failure(code);
    if (transfer.too_large) {
      result.error = fmt::format("response larger than {} bytes", options_.max_body_bytes);
    } else {
      // errbuf names the host and the failure; it never contains credentials (they are not in the URL).
      result.error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(code));
    }
    result.body.clear();
    return result;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  return result;
}

}  // namespace astral::facility::detail
