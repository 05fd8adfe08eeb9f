// HttpServer on GNU libmicrohttpd. Why a library: an exporter is reachable from the site network,
// and request parsing, keep-alive, chunked uploads, 100-continue and TLS are where hand-written
// servers go wrong; libmicrohttpd is small, C, packaged in Debian (libmicrohttpd-dev), and used
// by systemd-journal-remote. What it lacks we add here: a deadline for a whole request (its own
// timeout restarts at every byte, so a client sending one byte a second would never be cut off),
// a body limit answered with 413, and the request/response types the handlers share.
#include "astral/facility/http_server.hpp"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include "text_util.hpp"

namespace astral::facility {

using namespace text;  // lower

std::pair<std::string, std::string> split_listen_address(const std::string& listen) {
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

namespace detail {

// One connection as the deadline watchdog and the request callbacks see it. libmicrohttpd keeps
// the pointer as the connection's socket context from "started" to "closed". (Not in an
// anonymous namespace: HttpServer::Impl holds it.)
struct HttpConnection {
  int fd = -1;
  std::uint16_t local_port = 0;
  std::atomic<long long> waiting_since_ns{0};  // when the current request's wait began
  std::atomic<bool> awaiting{true};            // the current request has not fully arrived
  std::atomic<bool> after_response{false};     // keep-alive: the wait includes idle time
  bool cut = false;                            // the watchdog shut it down (under the server's mutex)
  // The request being read (HTTP/1.1: one at a time per connection).
  std::string target;
  std::string body;
  bool started = false;
  bool too_large = false;
  // A response held back by HttpResponse::delay while the connection is suspended.
  std::unique_ptr<HttpResponse> held;
  bool held_head = false;
};

}  // namespace detail

namespace {

using Conn = detail::HttpConnection;

long long now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// What a response stream still has to send, for libmicrohttpd's content reader.
struct StreamBody {
  HttpStream next;
  std::string pending;
  std::size_t offset = 0;
  bool ended = false;
  const std::atomic<bool>* stopping = nullptr;
};

ssize_t read_stream(void* cls, std::uint64_t, char* buf, std::size_t max) {
  auto* s = static_cast<StreamBody*>(cls);
  while (s->offset >= s->pending.size()) {
    if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    if (s->stopping->load()) return MHD_CONTENT_READER_END_WITH_ERROR;
    s->pending.clear();
    s->offset = 0;
    try {
      s->ended = !s->next(s->pending);  // waits up to about a second for more
    } catch (const std::exception&) {
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
  }
  std::size_t n = std::min(max, s->pending.size() - s->offset);
  std::memcpy(buf, s->pending.data() + s->offset, n);
  s->offset += n;
  return static_cast<ssize_t>(n);
}

void free_stream(void* cls) { delete static_cast<StreamBody*>(cls); }
void free_body(void* cls) { delete static_cast<std::string*>(cls); }

std::string read_pem(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().find("-----BEGIN") == std::string::npos)
    throw std::runtime_error(fmt::format("TLS {} {}: cannot read a PEM file", what, path));
  return ss.str();
}

// A bound, listening socket for "host:port" (libmicrohttpd takes it over and closes it).
int listen_on(const std::string& addr, std::uint16_t* port) {
  auto [host, service] = split_listen_address(addr);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) throw std::runtime_error(fmt::format("listen address '{}': {}", addr, gai_strerror(rc)));
  int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
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
  *port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

std::string peer_of(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "?";
  char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "0";
  socklen_t len = info->client_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  getnameinfo(info->client_addr, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
  return fmt::format("{}:{}", host, serv);
}

MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
  if (key) static_cast<HttpRequest*>(cls)->headers[lower(key)] = value ? value : "";
  return MHD_YES;
}

}  // namespace

struct HttpServer::Impl {
  // What each libmicrohttpd callback gets as its closure: the server and which listener.
  struct Listener {
    Impl* server;
    std::uint16_t port;
  };
  HttpServerOptions options;
  HttpHandler handler;
  std::vector<MHD_Daemon*> daemons;
  std::vector<std::uint16_t> ports;
  std::vector<std::unique_ptr<Listener>> listeners;  // stable addresses: callbacks hold them
  bool tls = false;
  std::atomic<bool> stopping{false};
  std::mutex mu;  // connections, log
  std::set<Conn*> connections;
  std::string last_log;  // libmicrohttpd's own words, for a start-up failure
  std::thread watchdog;
  std::mutex wake_mu;
  std::condition_variable wake;
  // Connections suspended until their held response is due (threads > 0 only).
  std::mutex held_mu;
  std::condition_variable held_wake;
  std::multimap<long long, MHD_Connection*> held;  // due (steady ns) -> connection
  bool releasing_closed = false;                   // the releaser has resumed everything and quit
  std::thread releaser;

  void start(const std::string& addr, const std::string& cert, const std::string& key);
  void watch();
  void release_held();
  MHD_Result hold(MHD_Connection* connection, Conn& c, HttpResponse r, bool head);
  MHD_Result answer(MHD_Connection* connection, const char* method, const char* upload, std::size_t* upload_size, Conn& c);
  MHD_Result send(MHD_Connection* connection, HttpResponse r, bool head);

  // libmicrohttpd callbacks; `cls` is the Listener.
  static void on_log(void* cls, const char* format, va_list ap) {
    auto* im = static_cast<Listener*>(cls)->server;
    char line[512];
    std::vsnprintf(line, sizeof line, format, ap);
    std::lock_guard<std::mutex> lock(im->mu);
    im->last_log = line;
    while (!im->last_log.empty() && (im->last_log.back() == '\n' || im->last_log.back() == '\r')) im->last_log.pop_back();
  }
  static void on_connection(void* cls, MHD_Connection* connection, void** socket_context, MHD_ConnectionNotificationCode code) {
    auto* im = static_cast<Listener*>(cls)->server;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* c = new Conn;
      const MHD_ConnectionInfo* fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      c->fd = fd ? fd->connect_fd : -1;
      c->local_port = static_cast<Listener*>(cls)->port;
      if (c->fd >= 0) {
        int one = 1;
        ::setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      c->waiting_since_ns = now_ns();
      *socket_context = c;
      std::lock_guard<std::mutex> lock(im->mu);
      im->connections.insert(c);
    } else if (*socket_context) {
      // Called before libmicrohttpd closes the descriptor: the watchdog never touches a reused one.
      auto* c = static_cast<Conn*>(*socket_context);
      {
        std::lock_guard<std::mutex> lock(im->mu);
        im->connections.erase(c);
      }
      delete c;
      *socket_context = nullptr;
    }
  }
  static Conn* conn_of(MHD_Connection* connection) {
    const MHD_ConnectionInfo* i = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? static_cast<Conn*>(i->socket_context) : nullptr;
  }
  // The raw request target (path and query, undecoded), before libmicrohttpd parses it.
  static void* on_uri(void*, const char* uri, MHD_Connection* connection) {
    Conn* c = conn_of(connection);
    if (!c) return nullptr;
    c->target = uri ? uri : "";
    c->body.clear();
    c->started = c->too_large = false;
    return c;
  }
  static void on_completed(void*, MHD_Connection*, void** request_context, MHD_RequestTerminationCode) {
    auto* c = static_cast<Conn*>(*request_context);
    if (!c) return;
    c->body.clear();
    c->body.shrink_to_fit();
    c->waiting_since_ns = now_ns();
    c->after_response = true;
    c->awaiting = true;
  }
  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char*, const char* method, const char*,
                               const char* upload, std::size_t* upload_size, void** request_context) {
    auto* c = static_cast<Conn*>(*request_context);
    if (!c) return MHD_NO;
    return static_cast<Listener*>(cls)->server->answer(connection, method, upload, upload_size, *c);
  }
};

MHD_Result HttpServer::Impl::answer(MHD_Connection* connection, const char* method, const char* upload,
                                    std::size_t* upload_size, Conn& c) {
  if (c.held) {  // resumed: its delay is over
    std::unique_ptr<HttpResponse> r = std::move(c.held);
    return send(connection, std::move(*r), c.held_head);
  }
  if (!c.started) {  // headers are in; the body (if any) follows in later calls
    c.started = true;
    const char* length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length && std::strtoull(length, nullptr, 10) > options.max_body_bytes) {
      c.awaiting = false;
      return send(connection, HttpResponse{413, "text/plain", {}, "Payload Too Large\n"}, false);
    }
    return MHD_YES;
  }
  if (*upload_size > 0) {
    if (c.body.size() + *upload_size > options.max_body_bytes) return MHD_NO;  // chunked and too long: drop it
    c.body.append(upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  c.awaiting = false;
  HttpRequest req;
  req.method = method;
  req.target = c.target;
  auto q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  MHD_get_connection_values(connection, MHD_HEADER_KIND, collect_header, &req);
  req.body = std::move(c.body);
  req.peer = peer_of(connection);
  req.local_port = c.local_port;
  HttpResponse resp;
  try {
    resp = handler(req);
  } catch (const std::exception& e) {
    resp = HttpResponse{500, "text/plain", {}, std::string("internal error: ") + e.what() + "\n"};
  }
  bool head = req.method == "HEAD";
  if (resp.delay.count() > 0 && options.threads > 0) return hold(connection, c, std::move(resp), head);
  if (resp.delay.count() > 0 && !stopping) std::this_thread::sleep_for(resp.delay);
  return send(connection, std::move(resp), head);
}

// Suspends the connection until the response is due; the releaser resumes it, and libmicrohttpd
// calls answer() again, which sends it.
MHD_Result HttpServer::Impl::hold(MHD_Connection* connection, Conn& c, HttpResponse r, bool head) {
  std::unique_lock<std::mutex> lock(held_mu);
  if (releasing_closed) {
    lock.unlock();
    return send(connection, std::move(r), head);
  }
  long long due = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(r.delay).count();
  c.held = std::make_unique<HttpResponse>(std::move(r));
  c.held_head = head;
  MHD_suspend_connection(connection);
  bool first = held.empty() || due < held.begin()->first;
  held.emplace(due, connection);
  lock.unlock();
  if (first) held_wake.notify_one();
  return MHD_YES;
}

// Resumes held connections when they are due, and all of them when the server stops (a
// suspended connection would make MHD_stop_daemon abort).
void HttpServer::Impl::release_held() {
  std::vector<MHD_Connection*> due;
  std::unique_lock<std::mutex> lock(held_mu);
  for (;;) {
    bool ending = stopping.load();
    long long now = now_ns();
    while (!held.empty() && (ending || held.begin()->first <= now)) {
      due.push_back(held.begin()->second);
      held.erase(held.begin());
    }
    if (ending) releasing_closed = true;
    if (!due.empty()) {
      lock.unlock();  // libmicrohttpd takes its own locks to resume
      for (MHD_Connection* connection : due) MHD_resume_connection(connection);
      due.clear();
      lock.lock();
      continue;
    }
    if (ending) return;
    if (held.empty()) held_wake.wait(lock);
    else held_wake.wait_for(lock, std::chrono::nanoseconds(held.begin()->first - now));
  }
}

MHD_Result HttpServer::Impl::send(MHD_Connection* connection, HttpResponse r, bool head) {
  MHD_Response* response = nullptr;
  if (r.stream && !head) {
    auto* s = new StreamBody{std::move(r.stream), std::move(r.body), 0, false, &stopping};
    response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, read_stream, s, free_stream);
    if (!response) delete s;
  } else {
    auto* body = new std::string(std::move(r.body));
    response = MHD_create_response_from_buffer_with_free_callback_cls(body->size(), body->data(), free_body, body);
    if (!response) delete body;
  }
  if (!response) return MHD_NO;
  if (r.status != 204) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
  if (r.stream) MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  for (const auto& [k, v] : r.headers) MHD_add_response_header(response, k.c_str(), v.c_str());
  MHD_Result rc = MHD_queue_response(connection, static_cast<unsigned>(r.status), response);
  MHD_destroy_response(response);
  return rc;
}

// Cuts off connections whose request has not arrived in full in time. libmicrohttpd's own
// timeout only notices silence; shutting the socket down makes it close the connection.
void HttpServer::Impl::watch() {
  const long long first = std::chrono::duration_cast<std::chrono::nanoseconds>(options.io_timeout).count();
  const long long later = first + std::chrono::duration_cast<std::chrono::nanoseconds>(options.idle_timeout).count();
  std::unique_lock<std::mutex> wait_lock(wake_mu);
  while (!stopping) {
    wake.wait_for(wait_lock, std::chrono::milliseconds(200));
    long long now = now_ns();
    std::lock_guard<std::mutex> lock(mu);
    for (Conn* c : connections) {
      if (c->cut || !c->awaiting || c->fd < 0) continue;
      if (now - c->waiting_since_ns > (c->after_response ? later : first)) {
        c->cut = true;
        ::shutdown(c->fd, SHUT_RDWR);
      }
    }
  }
}

void HttpServer::Impl::start(const std::string& addr, const std::string& cert, const std::string& key) {
  std::uint16_t port = 0;
  int fd = listen_on(addr, &port);
  listeners.push_back(std::make_unique<Listener>(Listener{this, port}));
  Listener* self = listeners.back().get();
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  if (options.threads == 0) flags |= MHD_USE_THREAD_PER_CONNECTION;
  else flags |= MHD_ALLOW_SUSPEND_RESUME;  // HttpResponse::delay
  if (tls) flags |= MHD_USE_TLS;
  if (addr.front() == '[') flags |= MHD_USE_IPv6;
  auto seconds = [](std::chrono::milliseconds ms) { return static_cast<unsigned>(std::max<long long>(1, (ms.count() + 999) / 1000)); };
  // The per-connection memory pool holds the request head and the read buffer; a head that
  // does not fit is answered 431 (or 414 for a long target) without reading further.
  std::size_t pool = std::max<std::size_t>(options.max_header_bytes + 4096, 8192);
  std::vector<MHD_OptionItem> opts = {
      {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(options.max_connections), nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, seconds(options.idle_timeout), nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(pool), nullptr},
      {MHD_OPTION_STRICT_FOR_CLIENT, 1, nullptr},  // e.g. HTTP/1.1 without Host: 400
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&Impl::on_log), self},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Impl::on_connection), self},
      {MHD_OPTION_URI_LOG_CALLBACK, reinterpret_cast<intptr_t>(&Impl::on_uri), self},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Impl::on_completed), self},
  };
  // Thread per connection: small stacks (the handlers are shallow), so that glibc keeps them
  // cached and a new connection does not map and unmap 8 MiB.
  if (options.threads == 0) opts.push_back({MHD_OPTION_THREAD_STACK_SIZE, 256 * 1024, nullptr});
  if (options.threads > 1) opts.push_back({MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(options.threads), nullptr});
  if (tls) {
    opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(cert.c_str())});
    opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(key.c_str())});
    opts.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0,
                    const_cast<char*>("NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2")});
  }
  opts.push_back({MHD_OPTION_END, 0, nullptr});
  // Threads libmicrohttpd starts inherit this mask: a peer that hangs up mid-response (TLS
  // writes) must not kill the process with SIGPIPE.
  sigset_t pipe_set, saved;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &saved);
  MHD_Daemon* d = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::on_request, self, MHD_OPTION_ARRAY, opts.data(), MHD_OPTION_END);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (!d) {
    ::close(fd);
    std::lock_guard<std::mutex> lock(mu);
    std::string why = last_log.empty() ? "libmicrohttpd could not start" : last_log;
    if (tls) throw std::runtime_error(fmt::format("cannot serve HTTPS on {} with {} and {}: {}", addr, options.tls_cert_file, options.tls_key_file, why));
    throw std::runtime_error(fmt::format("cannot listen on {}: {}", addr, why));
  }
  daemons.push_back(d);
  ports.push_back(port);
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  auto& im = *impl_;
  im.options = std::move(options);
  im.handler = std::move(handler);
  std::string cert, key;
  if (!im.options.tls_cert_file.empty() || !im.options.tls_key_file.empty()) {
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) throw std::runtime_error("this libmicrohttpd was built without TLS");
    cert = read_pem(im.options.tls_cert_file, "certificate");
    key = read_pem(im.options.tls_key_file, "key");
    im.tls = true;
  }
  try {
    for (const auto& addr : im.options.listen) im.start(addr, cert, key);
  } catch (...) {
    stop();
    throw;
  }
  im.watchdog = std::thread([this] { impl_->watch(); });
  if (im.options.threads > 0) im.releaser = std::thread([this] { impl_->release_held(); });
}

HttpServer::~HttpServer() { stop(); }

const std::vector<std::uint16_t>& HttpServer::ports() const { return impl_->ports; }

std::string HttpServer::url(std::size_t i) const {
  auto [host, port] = split_listen_address(impl_->options.listen.at(i));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return fmt::format("{}://{}:{}", impl_->tls ? "https" : "http", host, impl_->ports.at(i));
}

void HttpServer::stop() {
  auto& im = *impl_;
  if (im.stopping.exchange(true)) return;
  im.wake.notify_all();
  if (im.watchdog.joinable()) im.watchdog.join();
  {
    std::lock_guard<std::mutex> lock(im.held_mu);  // no lost wake-up between its test and its wait
  }
  im.held_wake.notify_all();
  if (im.releaser.joinable()) im.releaser.join();
  for (MHD_Daemon* d : im.daemons) MHD_stop_daemon(d);  // closes every connection, joins its threads
  im.daemons.clear();
}

}  // namespace astral::facility
