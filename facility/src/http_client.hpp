#pragma once
// A small libcurl wrapper: one easy handle and one connection cache per client (keep-alive
// connections are reused, and closed when the client goes), TLS
// verification on unless told otherwise, no redirects (they could carry credentials elsewhere),
// a cap on response size, and errors as one line that never contains credentials.
#include <chrono>
#include <string>
#include <vector>

namespace astral::facility::detail {

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{2000};
  bool verify_tls = true;
  std::string ca_file;
  std::size_t max_body_bytes = 16u << 20;
};

struct HttpResult {
  long status = 0;          // HTTP status; 0 when no response arrived
  std::string body;
  std::string error;        // transport failure, one line
  bool retryable = false;   // transport failure worth another try (timeout, reset, refused)
  bool tls_failure = false; // certificate or handshake problem: retrying will not help
  std::string auth_token;   // X-Auth-Token response header
  std::string location;     // Location response header
  double retry_after_s = -1;
};

struct BasicAuth {
  const std::string* username = nullptr;
  const std::string* password = nullptr;
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // headers: full header lines ("X-Auth-Token: ..."); basic: credentials for Basic auth or null.
  HttpResult request(const std::string& method, const std::string& url, const std::string& body,
                     const std::vector<std::string>& headers, const BasicAuth& basic,
                     std::chrono::milliseconds timeout);

 private:
  HttpClientOptions options_;
  void* curl_ = nullptr;         // CURL*, kept opaque so curl.h stays out of this header
  void* connections_ = nullptr;  // CURLSH*: this client's own connection and DNS caches
};

}  // namespace astral::facility::detail
