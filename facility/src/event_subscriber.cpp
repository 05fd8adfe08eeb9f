// Holding Redfish event streams open (SSE), receiving pushed events, creating subscriptions.
#include <curl/curl.h>
#include <sys/random.h>

#include <atomic>
#include <condition_variable>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/facility/eventservice.hpp"
#include "http_client.hpp"
#include "redfish_emit.hpp"

namespace astral::facility {

namespace {

using json = nlohmann::json;
using Steady = std::chrono::steady_clock;

detail::HttpClientOptions client_options(const RedfishEndpoint& e, const EventStreamOptions& o) {
  detail::HttpClientOptions c;
  c.connect_timeout = o.connect_timeout;
  c.verify_tls = e.verify_tls;
  c.ca_file = e.ca_file;
  c.max_body_bytes = 1 << 20;
  return c;
}

detail::BasicAuth basic_of(const RedfishEndpoint& e) {
  if (e.credentials.empty() || e.auth == AuthMode::none) return {};
  return {&e.credentials.username, &e.credentials.password};
}

// The service's own error message ({"error": {"message"}}), for a refusal the user can act on.
std::string service_message(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    if (e.contains("@Message.ExtendedInfo") && e["@Message.ExtendedInfo"].is_array() && !e["@Message.ExtendedInfo"].empty() &&
        e["@Message.ExtendedInfo"][0].is_object())
      return detail::string_of(e["@Message.ExtendedInfo"][0], "Message", detail::string_of(e, "message"));
    return detail::string_of(e, "message");
  }
  return {};
}

}  // namespace

struct EventSubscriber::Stream {
  RedfishEndpoint endpoint;
  EventStreamStatus status;
  std::thread thread;
  std::string last_event_id;
};

namespace {

struct StreamTransfer {
  SseParser parser;
  const std::atomic<bool>* stopping;
  std::function<void(const SseMessage&)> on_message;
  std::string flood;  // set when the stream sends more than allowed; aborts the transfer
  std::size_t per_second_limit;
  Steady::time_point window = Steady::now();
  std::size_t in_window = 0;
  bool ok_status = false;
};

std::size_t on_stream_bytes(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<StreamTransfer*>(user);
  std::size_t bytes = size * n;
  if (!t->ok_status) return 0;
  for (auto& m : t->parser.feed(std::string_view(data, bytes))) {
    auto now = Steady::now();
    if (now - t->window >= std::chrono::seconds(1)) t->window = now, t->in_window = 0;
    if (++t->in_window > t->per_second_limit) {
      t->flood = fmt::format("the stream sent more than {} events in a second (flooding); reconnecting later",
                             t->per_second_limit);
      return 0;
    }
    t->on_message(m);
  }
  return t->parser.bad() ? 0 : bytes;
}

int on_stream_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<StreamTransfer*>(user);
  return t->stopping->load() ? 1 : 0;
}

std::size_t on_stream_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<StreamTransfer*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    auto sp = line.find(' ');
    t->ok_status = sp != std::string_view::npos && line.substr(sp + 1, 3) == "200";
  }
  return size * n;
}

}  // namespace

EventSubscriber::EventSubscriber(std::vector<RedfishEndpoint> endpoints, EventStreamOptions options, AlarmSink sink)
    : endpoints_(std::move(endpoints)), options_(options), sink_(std::move(sink)) {}

EventSubscriber::~EventSubscriber() { stop(); }

void EventSubscriber::start() {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  for (const auto& e : endpoints_) {
    auto s = std::make_unique<Stream>();
    s->endpoint = e;
    s->status.source = e.name;
    s->status.mode = "sse";
    streams_.push_back(std::move(s));
  }
  for (auto& s : streams_) s->thread = std::thread([this, raw = s.get()] { run(*raw); });
}

void EventSubscriber::stop() {
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& s : streams_)
    if (s->thread.joinable()) s->thread.join();
}

std::vector<EventStreamStatus> EventSubscriber::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EventStreamStatus> out;
  for (const auto& s : streams_) out.push_back(s->status);
  return out;
}

void EventSubscriber::update(Stream& s, const std::function<void(EventStreamStatus&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  change(s.status);
}

void EventSubscriber::wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(wait_mu_);
  wake_.wait_for(lock, d, [&] { return stopping_.load(); });
}

// Where is the stream? EventService.ServerSentEventUri (DSP0266). Returns its URL, or "" with
// `error` set (a failure worth retrying) or with `polling_only` set (the service offers none).
std::string EventSubscriber::find_stream(Stream& s, std::string& error, bool& polling_only) {
  detail::HttpClient client(client_options(s.endpoint, options_));
  const std::string& base = s.endpoint.url;
  auto es = client.request("GET", base + "/redfish/v1/EventService", "", {"Accept: application/json"}, basic_of(s.endpoint),
                           options_.request_timeout);
  if (es.status != 200) {
    error = es.status ? fmt::format("GET EventService: HTTP {}", es.status) : "GET EventService: " + es.error;
    return {};
  }
  auto j = json::parse(es.body, nullptr, false);
  if (!j.is_object()) {
    error = "EventService is not JSON";
    return {};
  }
  if (!j.contains("ServerSentEventUri") || !j["ServerSentEventUri"].is_string()) {
    polling_only = true;
    return {};
  }
  std::string uri = j["ServerSentEventUri"].get<std::string>();
  if (uri.find("://") == std::string::npos) return base + uri;
  if (uri.rfind(base + "/", 0) != 0) {  // our credentials go with the stream request: never to another host
    error = "ServerSentEventUri points to another host; not following it";
    return {};
  }
  return uri;
}

// One event from the stream: dedupe by id, count, hand fresh alarms to the sink.
void EventSubscriber::deliver(Stream& s, const SseMessage& m) {
  if (!m.id.empty()) s.last_event_id = m.id;
  ParsedEvent ev = parse_redfish_event(m.data, s.endpoint.name, m.id);
  std::vector<Alarm> fresh;
  std::uint64_t dups = 0;
  for (std::size_t i = 0; i < ev.alarms.size(); ++i) {
    if (dedupe_.first_time(s.endpoint.name + "|" + ev.ids[i])) fresh.push_back(std::move(ev.alarms[i]));
    else ++dups;
  }
  update(s, [&](EventStreamStatus& st) {
    ++st.events;
    st.duplicates += dups;
    st.rejected += ev.errors.size();
    if (!ev.errors.empty()) st.last_error = ev.errors.back();
  });
  if (!fresh.empty()) sink_(std::move(fresh));
}

namespace {

// The stream request: no overall timeout (a silent stream is cut by the low-speed limit instead),
// Last-Event-ID to resume, TLS and credentials as the endpoint says.
void configure_stream(CURL* curl, const RedfishEndpoint& e, const EventStreamOptions& o, const std::string& url,
                      curl_slist* headers, StreamTransfer& t, char* errbuf) {
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(o.idle_timeout.count() / 1000)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_stream_bytes);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_stream_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_stream_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, e.verify_tls ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, e.verify_tls ? 2L : 0L);
  if (!e.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, e.ca_file.c_str());
  if (auto b = basic_of(e); b.username) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, b.username->c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, b.password->c_str());
  }
}

}  // namespace

// Holds the stream open until it ends; returns why it ended. `healthy`: it worked for a while
// (events or keep-alives) and ended without misbehaving, so the backoff starts again.
std::string EventSubscriber::hold_stream(Stream& s, const std::string& url, bool& healthy) {
  StreamTransfer t{SseParser(options_.max_message_bytes), &stopping_, {}, {}, options_.max_events_per_second};
  t.on_message = [&](const SseMessage& m) { deliver(s, m); };
  curl_slist* headers = curl_slist_append(nullptr, "Accept: text/event-stream");
  std::string last_id_header;
  if (!s.last_event_id.empty()) {
    last_id_header = "Last-Event-ID: " + s.last_event_id;
    headers = curl_slist_append(headers, last_id_header.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* curl = curl_easy_init();
  configure_stream(curl, s.endpoint, options_, url, headers, t, errbuf);
  update(s, [](EventStreamStatus& st) { st.connected = true; ++st.connects; });
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  bool misbehaved = !t.flood.empty() || t.parser.bad();
  healthy = !misbehaved && (t.in_window > 0 || t.parser.comments() > 0);
  if (!t.flood.empty()) return t.flood;
  if (t.parser.bad()) return "the event stream is malformed: " + t.parser.error();
  if (status != 200 && status != 0) return fmt::format("the service refused the event stream: HTTP {}", status);
  if (rc == CURLE_OPERATION_TIMEDOUT) return "the event stream went silent (no keep-alive); reconnecting";
  if (rc != CURLE_OK) return fmt::format("the event stream broke: {}", errbuf[0] ? errbuf : curl_easy_strerror(rc));
  return "the service closed the event stream";
}

void EventSubscriber::run(Stream& s) {
  std::mt19937 rng(std::random_device{}());
  auto backoff = options_.backoff;
  while (!stopping_.load()) {
    std::string error;
    bool polling_only = false;
    std::string url = find_stream(s, error, polling_only);
    if (polling_only) {
      update(s, [](EventStreamStatus& st) { st.mode = "none"; st.last_error = "the service offers no ServerSentEventUri: polling only"; });
      return;
    }
    if (!url.empty()) {
      bool healthy = false;
      error = hold_stream(s, url, healthy);
      if (stopping_.load()) break;
      if (healthy) backoff = options_.backoff;  // a stream that worked for a while starts the backoff again
    }
    update(s, [&](EventStreamStatus& st) {
      st.connected = false;
      ++st.failures;
      st.last_error = error;
    });
    std::uniform_int_distribution<long long> jitter(0, backoff.count() / 2);
    wait(backoff + std::chrono::milliseconds(jitter(rng)));
    backoff = std::min(options_.max_backoff, backoff * 2);
  }
  update(s, [](EventStreamStatus& st) { st.connected = false; });
}

PushReceiver::PushReceiver(std::string path, std::string secret, std::string context, std::string source,
                           AlarmSink sink, EventDeduper* dedupe)
    : path_(std::move(path)),
      secret_(std::move(secret)),
      context_(std::move(context)),
      source_(std::move(source)),
      sink_(std::move(sink)),
      dedupe_(dedupe ? dedupe : &own_dedupe_) {}

HttpResponse PushReceiver::handle(const HttpRequest& r) {
  if (r.path != path_) return HttpResponse{404, "text/plain", {}, "not found\n"};
  if (r.method != "POST") return HttpResponse{405, "text/plain", {{"Allow", "POST"}}, "only POST\n"};
  if (!bearer_token_matches(r, secret_)) {
    ++refused_;
    return HttpResponse{401, "text/plain", {}, "not authorised\n"};
  }
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("Context") && detail::string_of(j, "Context") != context_) {
    ++refused_;
    return HttpResponse{401, "text/plain", {}, "not authorised\n"};
  }
  ParsedEvent ev = parse_redfish_event(r.body, source_);
  if (ev.alarms.empty() && !ev.errors.empty()) return HttpResponse{400, "text/plain", {}, ev.errors.front() + "\n"};
  std::vector<Alarm> fresh;
  for (std::size_t i = 0; i < ev.alarms.size(); ++i)
    if (dedupe_->first_time(source_ + "|" + ev.ids[i])) fresh.push_back(std::move(ev.alarms[i]));
  ++accepted_;
  if (!fresh.empty()) sink_(std::move(fresh));
  return HttpResponse{204, "text/plain", {}, ""};
}

std::string new_subscription_secret() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n <= 0) throw std::runtime_error("cannot read random bytes for a subscription secret");
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

PushSubscription subscribe_push(const RedfishEndpoint& e, const std::string& destination, const std::string& secret,
                                const std::string& context, const EventStreamOptions& o) {
  detail::HttpClient client(client_options(e, o));
  json body = {{"Destination", destination},
               {"Protocol", "Redfish"},
               {"Context", context},
               {"EventFormatType", "Event"},
               {"HttpHeaders", json::array({{{"Authorization", "Bearer " + secret}}})}};
  auto r = client.request("POST", e.url + "/redfish/v1/EventService/Subscriptions", body.dump(),
                          {"Content-Type: application/json", "Accept: application/json"}, basic_of(e), o.request_timeout);
  if (r.status != 201 && r.status != 200 && r.status != 204) {
    std::string why = r.status ? fmt::format("HTTP {}", r.status) : r.error;
    std::string msg = service_message(r.body);
    throw std::runtime_error(fmt::format("{}: the service refused the event subscription ({}{}{})", e.name, why,
                                         msg.empty() ? "" : ": ", msg));
  }
  PushSubscription s;
  s.uri = r.location;
  if (s.uri.empty()) {
    auto j = json::parse(r.body, nullptr, false);
    s.uri = detail::string_of(j, "@odata.id");
  }
  return s;
}

void unsubscribe_push(const RedfishEndpoint& e, const PushSubscription& s, const EventStreamOptions& o) {
  if (s.uri.empty()) return;
  detail::HttpClient client(client_options(e, o));
  std::string url = s.uri.rfind("http", 0) == 0 ? s.uri : e.url + s.uri;
  client.request("DELETE", url, "", {}, basic_of(e), o.request_timeout);
}

}  // namespace astral::facility
