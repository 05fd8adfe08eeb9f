#include "astral/facility/http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // trim, lower, starts_with, ends_with, contains

namespace {

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

std::string tls_error() {
  unsigned long e = ERR_get_error();
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Splits "host:port", "[v6]:port" or ":port".
std::pair<std::string, std::string> split_listen(const std::string& listen) {
  if (!listen.empty() && listen.front() == '[') {
    auto close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
      throw std::runtime_error(fmt::format("listen address '{}': expected [v6-address]:port", listen));
    return {listen.substr(1, close - 1), listen.substr(close + 2)};
  }
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error(fmt::format("listen address '{}': expected host:port", listen));
  return {listen.substr(0, colon), listen.substr(colon + 1)};
}

// One accepted connection's byte stream: plain TCP or TLS.
class Stream {
 public:
  Stream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~Stream() {
    if (ssl_) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
  }
  bool buffered() const { return (ssl_ && SSL_pending(ssl_) > 0) || pos_ < buf_.size(); }
  // Waits for input; false on timeout or error.
  bool wait_readable(std::chrono::milliseconds timeout) {
    if (buffered()) return true;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }
  // Reads more bytes into the buffer; false at EOF or error.
  bool fill() {
    char tmp[16384];
    long n = ssl_ ? SSL_read(ssl_, tmp, sizeof tmp) : ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    if (pos_ > 0) {  // drop what earlier requests consumed
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }
  bool write_all(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      long n = ssl_ ? SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off))
                    : ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  std::string& buffer() { return buf_; }
  std::size_t& pos() { return pos_; }

 private:
  int fd_;
  SSL* ssl_;
  std::string buf_;
  std::size_t pos_ = 0;
};

// The status line and headers; the body is written after them (it can be megabytes).
std::string render_head(const HttpResponse& r, bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
  if (r.stream) {
    out += fmt::format("Content-Type: {}\r\nCache-Control: no-cache\r\n", r.content_type);
  } else if (r.status != 204) {
    out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", r.content_type, r.body.size());
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  out += "\r\n";
  return out;
}

std::string render(const HttpResponse& r, bool keep_alive) { return render_head(r, keep_alive) + r.body; }

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  SSL_CTX* tls = nullptr;
  std::vector<int> listeners;
  std::vector<std::uint16_t> ports;
  int wake[2] = {-1, -1};
  std::thread acceptor;
  std::atomic<bool> stopping{false};

  struct Connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::mutex mu;
  std::list<Connection> connections;

  void accept_loop();
  void serve(Connection& c, std::string peer, std::uint16_t local_port);
  // Reads one request; 0 when the peer went away quietly, else an HTTP status for errors, or 200.
  int read_request(Stream& s, HttpRequest& req);
  void reap(bool all);
  // Writes what `body` produces until it ends, the peer hangs up or the server stops.
  void stream_body(Stream& s, const HttpStream& body, int fd) {
    std::string chunk;
    while (!stopping) {
      chunk.clear();
      bool more = body(chunk);
      if (!chunk.empty() && !s.write_all(chunk)) return;
      if (!more) return;
      pollfd p{fd, POLLIN, 0};  // a readable socket here means the peer closed (or sent junk)
      if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN))) {
        char tmp;
        if (::recv(fd, &tmp, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return;
      }
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  auto& im = *impl_;
  auto cleanup = [&] {
    for (int fd : im.listeners) ::close(fd);
    if (im.tls) SSL_CTX_free(im.tls);
  };
  if (!im.options.tls_cert_file.empty() || !im.options.tls_key_file.empty()) {
    im.tls = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(im.tls, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(im.tls, im.options.tls_cert_file.c_str()) != 1) {
      std::string e = tls_error();
      cleanup();
      throw std::runtime_error(fmt::format("TLS certificate {}: {}", im.options.tls_cert_file, e));
    }
    if (SSL_CTX_use_PrivateKey_file(im.tls, im.options.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(im.tls) != 1) {
      std::string e = tls_error();
      cleanup();
      throw std::runtime_error(fmt::format("TLS key {}: {}", im.options.tls_key_file, e));
    }
  }
  for (const auto& addr : im.options.listen) {
    try {
      auto [host, port] = split_listen(addr);
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
      addrinfo* res = nullptr;
      int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
      if (rc != 0) throw std::runtime_error(fmt::format("listen address '{}': {}", addr, gai_strerror(rc)));
      int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
        std::string why = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        freeaddrinfo(res);
        throw std::runtime_error(fmt::format("cannot listen on {}: {}", addr, why));
      }
      freeaddrinfo(res);
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      std::uint16_t p = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                                 : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
      im.listeners.push_back(fd);
      im.ports.push_back(p);
    } catch (...) {
      cleanup();
      throw;
    }
  }
  if (::pipe2(im.wake, O_CLOEXEC) != 0) {
    cleanup();
    throw std::runtime_error("cannot create a pipe for the HTTP server");
  }
  im.acceptor = std::thread([this] { impl_->accept_loop(); });
}

HttpServer::~HttpServer() { stop(); }

const std::vector<std::uint16_t>& HttpServer::ports() const { return impl_->ports; }

std::string HttpServer::url(std::size_t i) const {
  auto [host, port] = split_listen(impl_->options.listen.at(i));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return fmt::format("{}://{}:{}", impl_->tls ? "https" : "http", host, impl_->ports.at(i));
}

void HttpServer::stop() {
  auto& im = *impl_;
  if (im.stopping.exchange(true)) return;
  if (im.wake[1] >= 0) {
    char c = 1;
    [[maybe_unused]] auto n = ::write(im.wake[1], &c, 1);
  }
  if (im.acceptor.joinable()) im.acceptor.join();
  {
    std::lock_guard<std::mutex> lock(im.mu);
    for (auto& c : im.connections)
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
  }
  im.reap(true);
  for (int fd : im.listeners) ::close(fd);
  im.listeners.clear();
  for (int& fd : im.wake) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  if (im.tls) SSL_CTX_free(im.tls);
  im.tls = nullptr;
}

void HttpServer::Impl::reap(bool all) {
  std::list<Connection> finished;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = connections.begin(); it != connections.end();) {
      auto next = std::next(it);
      if (all || it->done) finished.splice(finished.end(), connections, it);
      it = next;
    }
  }
  for (auto& c : finished) c.thread.join();
}

void HttpServer::Impl::accept_loop() {
  std::vector<pollfd> fds;
  fds.push_back({wake[0], POLLIN, 0});
  for (int fd : listeners) fds.push_back({fd, POLLIN, 0});
  while (!stopping) {
    int n = ::poll(fds.data(), fds.size(), 1000);
    reap(false);
    if (n <= 0) continue;
    if (fds[0].revents) break;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = ::accept4(fds[i].fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      timeval tv{static_cast<long>(options.io_timeout.count() / 1000),
                 static_cast<long>((options.io_timeout.count() % 1000) * 1000)};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      char host[INET6_ADDRSTRLEN] = "?";
      std::uint16_t port = 0;
      if (ss.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (connections.size() >= options.max_connections) {
        HttpResponse busy{503, "text/plain", {{"Retry-After", "1"}}, "too many connections\n"};
        std::string out = render(busy, false);
        if (!tls) [[maybe_unused]] auto sent = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      auto& c = connections.emplace_back();
      c.fd = fd;
      c.thread = std::thread([this, &c, peer = fmt::format("{}:{}", host, port), lp = ports[i - 1]] {
        serve(c, peer, lp);
      });
    }
  }
}

int HttpServer::Impl::read_request(Stream& s, HttpRequest& req) {
  auto& buf = s.buffer();
  auto& pos = s.pos();
  std::size_t end;
  while ((end = buf.find("\r\n\r\n", pos)) == std::string::npos) {
    if (buf.size() - pos > options.max_header_bytes) return 431;
    if (!s.wait_readable(options.io_timeout)) return buf.size() > pos ? 408 : 0;
    if (!s.fill()) return 0;
  }
  std::string head = buf.substr(pos, end - pos);
  pos = end + 4;
  auto line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  auto sp1 = request_line.find(' ');
  auto sp2 = request_line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return 400;
  req.method = request_line.substr(0, sp1);
  req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string version = request_line.substr(sp2 + 1);
  if (version.rfind("HTTP/1.", 0) != 0) return 400;
  if (version == "HTTP/1.0") req.headers["connection"] = "close";
  std::size_t at = line_end == std::string::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    auto e = head.find("\r\n", at);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(at, e - at);
    at = e + 2;
    auto colon = line.find(':');
    if (colon == std::string::npos) return 400;
    req.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  auto q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  if (!req.header("transfer-encoding").empty()) return 411;  // chunked uploads: not needed here
  std::string cl = req.header("content-length");
  if (!cl.empty()) {
    char* endp = nullptr;
    unsigned long long n = std::strtoull(cl.c_str(), &endp, 10);
    if (*endp != '\0') return 400;
    if (n > options.max_body_bytes) return 413;
    if (lower(req.header("expect")) == "100-continue") s.write_all("HTTP/1.1 100 Continue\r\n\r\n");
    while (buf.size() - pos < n) {
      if (!s.wait_readable(options.io_timeout)) return 408;
      if (!s.fill()) return 0;
    }
    req.body = buf.substr(pos, n);
    pos += n;
  }
  return 200;
}

void HttpServer::Impl::serve(Connection& c, std::string peer, std::uint16_t local_port) {
  // A peer that hangs up mid-response must not kill the process with SIGPIPE (TLS writes).
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
  SSL* ssl = nullptr;
  bool ok = true;
  if (tls) {
    ssl = SSL_new(tls);
    SSL_set_fd(ssl, c.fd);
    if (SSL_accept(ssl) != 1) ok = false;  // a bad handshake only ends this connection
  }
  {
    Stream stream(c.fd, ssl);
    while (ok && !stopping) {
      if (!stream.wait_readable(options.idle_timeout)) break;
      HttpRequest req;
      req.peer = peer;
      req.local_port = local_port;
      int rc = read_request(stream, req);
      if (rc == 0) break;
      HttpResponse resp;
      bool keep_alive = rc == 200 && lower(req.header("connection")) != "close";
      if (rc != 200) {
        resp = HttpResponse{rc, "text/plain", {}, std::string(reason(rc)) + "\n"};
      } else {
        try {
          resp = handler(req);
        } catch (const std::exception& e) {
          resp = HttpResponse{500, "text/plain", {}, std::string("internal error: ") + e.what() + "\n"};
        }
      }
      bool with_body = req.method != "HEAD" && resp.status != 204;
      if (resp.stream) keep_alive = false;  // the stream ends with the connection
      if (!stream.write_all(render_head(resp, keep_alive)) || (with_body && !stream.write_all(resp.body))) break;
      if (resp.stream && with_body) stream_body(stream, resp.stream, c.fd);
      if (!keep_alive) break;
    }
  }
  int fd;
  {
    // Under the lock, so stop() never shuts down a descriptor number that was reused meanwhile.
    std::lock_guard<std::mutex> lock(mu);
    fd = c.fd;
    c.fd = -1;
  }
  ::close(fd);
  c.done = true;
}

bool is_loopback_address(const std::string& listen) {
  std::string host;
  try {
    host = split_listen(listen).first;
  } catch (...) {
    return false;
  }
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace {

bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string base64_decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned value = 0;
  int bits = -8;
  for (char ch : in) {
    if (ch == '=') break;
    auto idx = kAlphabet.find(ch);
    if (idx == std::string::npos) return {};
    value = (value << 6) | static_cast<unsigned>(idx);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((value >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace

bool basic_auth_matches(const HttpRequest& request, const Credentials& expected) {
  std::string h = request.header("authorization");
  if (h.size() < 6 || lower(h.substr(0, 6)) != "basic ") return false;
  return equal_constant_time(base64_decode(trim(h.substr(6))), expected.username + ":" + expected.password);
}

bool bearer_token_matches(const HttpRequest& request, const std::string& token) {
  std::string h = request.header("authorization");
  if (token.empty() || h.size() < 7 || lower(h.substr(0, 7)) != "bearer ") return false;
  return equal_constant_time(trim(h.substr(7)), token);
}

}  // namespace astral::facility
