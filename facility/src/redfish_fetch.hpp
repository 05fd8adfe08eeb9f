#pragma once
// Where the Redfish walker gets resources from: a live service over HTTP(S) (authentication,
// retries with backoff, a crawl deadline) or a mockup directory on disk.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include "astral/facility/mockup.hpp"
#include "astral/facility/redfish.hpp"
#include "http_client.hpp"

namespace astral::facility::detail {

using json = nlohmann::json;

struct Fetched {
  bool ok = false;
  long status = 0;     // HTTP status (200 for files), 0 when nothing came back
  json body;
  std::string error;   // one line naming the resource
  bool malformed = false;
};

// Parses JSON; bare NaN/Infinity literals (not JSON, but some BMCs send them) are read as null
// and counted in `quirks_nan`. Returns a discarded value when the text is not JSON.
json parse_lenient(const std::string& text, std::uint64_t& quirks_nan);

class ResourceFetcher {
 public:
  virtual ~ResourceFetcher() = default;
  // uri: "/redfish/v1/..." possibly with a query; fragments are the caller's business.
  virtual Fetched get(const std::string& uri) = 0;
  virtual bool supports_query() const { return false; }
  virtual bool out_of_time() const { return false; }
  std::uint64_t requests = 0;
  std::uint64_t nan_literals = 0;
};

// Reads a mockup (a directory, or resources in memory) through the same MockupService that
// `astral facility mockup` serves, without HTTP.
class ServiceFetcher final : public ResourceFetcher {
 public:
  ServiceFetcher(MockupService& service, std::string label) : service_(service), label_(std::move(label)) {}
  Fetched get(const std::string& uri) override;
  bool supports_query() const override { return true; }

 private:
  MockupService& service_;
  std::string label_;
};

class HttpFetcher final : public ResourceFetcher {
 public:
  HttpFetcher(const RedfishEndpoint& endpoint, std::string base_url, const PollOptions& options);
  ~HttpFetcher() override;  // ends the Redfish session, if one was opened

  Fetched get(const std::string& uri) override;
  bool supports_query() const override { return true; }
  bool out_of_time() const override;

  // Authenticates per the endpoint's mode once the service root is known. Returns "" or a
  // one-line error. `sessions_uri` comes from the service root's Links.Sessions.
  std::string login(const std::string& sessions_uri);
  // Tolerated deviations seen while authenticating (e.g. no session service, basic used).
  std::string auth_note() const { return auth_note_; }

 private:
  HttpResult send(const std::string& method, const std::string& uri, const std::string& body);
  HttpResult send_once(const std::string& method, const std::string& uri, const std::string& body,
                       std::chrono::milliseconds timeout);
  std::string open_session(const std::string& sessions_uri, long* status);
  void close_session();

  const RedfishEndpoint& endpoint_;
  std::string base_;
  PollOptions options_;
  HttpClient client_;
  std::chrono::steady_clock::time_point deadline_;
  AuthMode mode_ = AuthMode::none;  // resolved mode
  std::string token_;
  std::string session_uri_;
  std::string sessions_collection_;
  std::string auth_note_;
  std::minstd_rand jitter_;
};

}  // namespace astral::facility::detail
