#pragma once
// The HTTP/1.1 server behind the Prometheus exporter, the Redfish push listener and the mockup
// service: GNU libmicrohttpd (the server systemd-journal-remote uses) does the protocol, HTTPS
// (GnuTLS, TLS 1.2+), keep-alive and request parsing; this wrapper adds bounded request sizes, a
// deadline for every request (slow clients are cut off), an idle timeout, and a plain
// request/response interface. One server may listen on several addresses.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "astral/facility/redfish.hpp"

namespace astral::facility {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  std::string query;   // after '?', undecoded
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string peer;            // "127.0.0.1:53422"
  std::uint16_t local_port = 0;  // which listener the request came in on
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A body produced while the connection stays open (Server-Sent Events): called again and again;
// it appends what is ready to `out` (waiting at most about a second for more) and returns false
// to end the response. The server stops calling it when the peer goes or the server stops.
using HttpStream = std::function<bool(std::string& out)>;

struct HttpResponse {
  HttpResponse(int status_ = 200, std::string content_type_ = "application/json",
               std::vector<std::pair<std::string, std::string>> headers_ = {}, std::string body_ = {},
               HttpStream stream_ = nullptr)
      : status(status_),
        content_type(std::move(content_type_)),
        headers(std::move(headers_)),
        body(std::move(body_)),
        stream(std::move(stream_)) {}
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  HttpStream stream;  // set: `body` is sent first, then the stream, then the connection closes
  // Held this long before it is sent (a slow BMC, simulated). With threads > 0 the connection is
  // suspended meanwhile and no thread waits; with threads == 0 the connection's thread sleeps.
  std::chrono::microseconds delay{0};
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::vector<std::string> listen{"127.0.0.1:0"};  // host:port; port 0 picks a free one
  std::string tls_cert_file;  // both set: serve HTTPS (TLS 1.2+)
  std::string tls_key_file;
  std::size_t max_connections = 256;  // beyond it new connections are closed at once
  // A connection with no traffic at all (an idle keep-alive, a stalled response) is closed.
  std::chrono::milliseconds idle_timeout{15000};
  // A request (head and body) must arrive in full within this much of the connection opening
  // (after a response: idle_timeout + this), however slowly it trickles in: slow-loris clients.
  std::chrono::milliseconds io_timeout{10000};
  std::size_t max_header_bytes = 16 * 1024;  // request line and headers; beyond: 431 (or 414)
  std::size_t max_body_bytes = 1 << 20;      // beyond: 413, without reading the body
  // 0: a thread per connection, for handlers that block (the mockup's event streams, simulated
  // BMC latency). N: N threads multiplex every connection (epoll), so idle or slow clients cost
  // no thread; the handler must not block (the exporter and the push listener).
  std::size_t threads = 0;
};

class HttpServer {
 public:
  // Binds every address and starts serving; throws std::runtime_error naming the address.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  const std::vector<std::uint16_t>& ports() const;
  // "http://127.0.0.1:<port>" (or https) of the i-th listener.
  std::string url(std::size_t i = 0) const;
  void stop();  // idempotent; joins every thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port", "[v6-address]:port" or ":port"; throws std::runtime_error naming it.
std::pair<std::string, std::string> split_listen_address(const std::string& listen);
// True when "host:port" binds only loopback (127.0.0.0/8, ::1, localhost).
bool is_loopback_address(const std::string& listen);
// Constant-time check of an "Authorization: Basic ..." header against credentials.
bool basic_auth_matches(const HttpRequest& request, const Credentials& expected);
// Constant-time check of an "Authorization: Bearer ..." header.
bool bearer_token_matches(const HttpRequest& request, const std::string& token);

}  // namespace astral::facility
