// Redfish eventing in the mockup service: SSE on ServerSentEventUri, EventDestination
// subscriptions that receive POSTs, and the SubmitTestEvent action (DSP0266; docs/facility.md).
#include <condition_variable>
#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "astral/facility/sample.hpp"
#include "http_client.hpp"
#include "mockup_events.hpp"

namespace astral::facility {

namespace {
using json = nlohmann::json;
constexpr const char* kSseUri = "/redfish/v1/EventService/SSE";
constexpr const char* kSubscriptionsUri = "/redfish/v1/EventService/Subscriptions";
constexpr std::size_t kReplayChunks = 1024;  // what Last-Event-ID can resume from
}  // namespace

struct MockupEvents {
  struct Subscription {
    std::string id, destination, context;
    std::vector<std::string> headers;  // "Name: value"
  };
  MockupOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::uint64_t, std::string>> log;  // sequence -> chunk, for streams and replay
  std::uint64_t sequence = 0;   // of the last chunk
  std::uint64_t next_event = 1;
  std::uint64_t generation = 0;  // drop_streams() bumps it
  std::size_t open_streams = 0;
  std::vector<Subscription> subscriptions;
  std::uint64_t next_subscription = 1;
  bool closing = false;

  void append(std::string chunk) {
    std::lock_guard<std::mutex> lock(mu);
    log.emplace_back(++sequence, std::move(chunk));
    if (log.size() > kReplayChunks) log.pop_front();
    cv.notify_all();
  }
};

std::shared_ptr<MockupEvents> make_mockup_events(const MockupOptions& options) {
  auto e = std::make_shared<MockupEvents>();
  e->options = options;
  return e;
}

MockupService::~MockupService() {
  if (!events_) return;
  std::lock_guard<std::mutex> lock(events_->mu);
  events_->closing = true;
  events_->cv.notify_all();
}

std::string MockupService::publish_event(json record) {
  auto& ev = *events_;
  std::uint64_t n;
  std::vector<MockupEvents::Subscription> subs;
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    n = ev.next_event++;
    subs = ev.subscriptions;
  }
  if (!record.is_object()) record = json::object();
  if (!record.contains("EventId")) record["EventId"] = std::to_string(n);
  if (!record.contains("EventTimestamp")) record["EventTimestamp"] = format_time(Clock::now());
  if (!record.contains("EventType")) record["EventType"] = "Alert";
  record["MemberId"] = "0";
  json payload = {{"@odata.type", "#Event.v1_7_0.Event"}, {"Id", std::to_string(n)}, {"Name", "Event"},
                  {"Events", json::array({record})}};
  ev.append(fmt::format("id: {}\ndata: {}\n\n", n, payload.dump()));
  // Push delivery, as a service does: POST with the subscription's headers and a timeout.
  detail::HttpClientOptions co;
  co.ca_file = ev.options.push_ca_file;
  for (const auto& s : subs) {
    detail::HttpClient client(co);
    json body = payload;
    body["Context"] = s.context;
    std::vector<std::string> headers = s.headers;
    headers.push_back("Content-Type: application/json");
    client.request("POST", s.destination, body.dump(), headers, {}, std::chrono::milliseconds(2000));
  }
  return std::to_string(n);
}

void MockupService::publish_raw(const std::string& text) { events_->append(text); }

void MockupService::drop_streams() {
  std::lock_guard<std::mutex> lock(events_->mu);
  ++events_->generation;
  events_->cv.notify_all();
}

std::size_t MockupService::open_streams() const {
  std::lock_guard<std::mutex> lock(events_->mu);
  return events_->open_streams;
}

std::size_t MockupService::subscriptions() const {
  std::lock_guard<std::mutex> lock(events_->mu);
  return events_->subscriptions.size();
}

namespace {

// The SSE body: replay after Last-Event-ID when the log still has it, then live chunks, with a
// keep-alive comment whenever nothing was due for a while.
HttpStream event_stream(std::shared_ptr<MockupEvents> events, std::uint64_t cursor) {
  MockupEvents& ev = *events;
  struct Open {  // counts the stream while it is open
    std::shared_ptr<MockupEvents> ev;
    explicit Open(std::shared_ptr<MockupEvents> e) : ev(std::move(e)) {
      std::lock_guard<std::mutex> lock(ev->mu);
      ++ev->open_streams;
    }
    ~Open() {
      std::lock_guard<std::mutex> lock(ev->mu);
      --ev->open_streams;
    }
  };
  std::uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(ev.mu);
    generation = ev.generation;
  }
  auto open = std::make_shared<Open>(events);
  // The stream keeps the event state alive even if the service goes first.
  return [events, cursor, generation, open](std::string& out) mutable {
    MockupEvents& ev = *events;
    std::unique_lock<std::mutex> lock(ev.mu);
    bool due = ev.cv.wait_for(lock, ev.options.keep_alive, [&] {
      return ev.closing || ev.generation != generation || ev.sequence > cursor;
    });
    if (ev.closing || ev.generation != generation) return false;
    if (!due) {
      out = ": keep-alive\n\n";
      return true;
    }
    for (const auto& [seq, chunk] : ev.log)
      if (seq > cursor) out += chunk;
    cursor = ev.sequence;
    return true;
  };
}

}  // namespace

HttpResponse MockupService::events(const std::string& path, const HttpRequest& request) {
  auto& ev = *events_;
  if (path == "/redfish/v1/EventService" && request.method == "GET") {
    auto it = resources_.find(path);
    json j = it == resources_.end() ? json::object() : json::parse(it->second, nullptr, false);
    if (!j.is_object()) j = json::object();
    j["@odata.id"] = path;
    j["ServerSentEventUri"] = kSseUri;
    j["Subscriptions"] = {{"@odata.id", kSubscriptionsUri}};
    return HttpResponse{200, "application/json", {{"OData-Version", "4.0"}}, j.dump(), {}};
  }
  if (path == kSseUri && request.method == "GET") {
    std::uint64_t cursor;
    std::string replay = ": astral mockup event stream\n\n";
    {
      std::lock_guard<std::mutex> lock(ev.mu);
      cursor = ev.sequence;
      // Resume after the client's last event when the log still holds it: events only, not the
      // raw bytes tests inject.
      std::string last = request.header("last-event-id");
      bool after = false;
      for (const auto& [seq, chunk] : ev.log) {
        bool is_event = chunk.rfind("id: ", 0) == 0;
        if (after && is_event) replay += chunk;
        if (!last.empty() && chunk.rfind("id: " + last + "\n", 0) == 0) after = true;
      }
    }
    return HttpResponse{200, "text/event-stream", {}, std::move(replay), event_stream(events_, cursor)};
  }
  if (path == kSubscriptionsUri && request.method == "POST") {
    if (ev.options.refuse_subscriptions)
      return redfish_error(400, "the service does not accept event subscriptions from this client");
    json b = json::parse(request.body, nullptr, false);
    if (!b.is_object() || !b.contains("Destination") || !b["Destination"].is_string())
      return redfish_error(400, "Destination is required");
    if (b.value("Protocol", "Redfish") != "Redfish") return redfish_error(400, "only Protocol Redfish is supported");
    MockupEvents::Subscription s;
    s.destination = b["Destination"].get<std::string>();
    s.context = b.value("Context", std::string());
    if (b.contains("HttpHeaders") && b["HttpHeaders"].is_array())
      for (const auto& h : b["HttpHeaders"])
        if (h.is_object())
          for (const auto& [k, v] : h.items())
            if (v.is_string()) s.headers.push_back(k + ": " + v.get<std::string>());
    {
      std::lock_guard<std::mutex> lock(ev.mu);
      s.id = std::to_string(ev.next_subscription++);
      ev.subscriptions.push_back(s);
    }
    std::string uri = fmt::format("{}/{}", kSubscriptionsUri, s.id);
    // HttpHeaders are write-only: a GET shows null (DSP0266), so the secret never comes back.
    json created = {{"@odata.id", uri}, {"@odata.type", "#EventDestination.v1_14_0.EventDestination"}, {"Id", s.id},
                    {"Destination", s.destination}, {"Context", s.context}, {"Protocol", "Redfish"}, {"HttpHeaders", nullptr}};
    return HttpResponse{201, "application/json", {{"Location", uri}}, created.dump(), {}};
  }
  if (path.rfind(std::string(kSubscriptionsUri) + "/", 0) == 0 && request.method == "DELETE") {
    std::lock_guard<std::mutex> lock(ev.mu);
    std::string id = path.substr(path.rfind('/') + 1);
    auto n = std::erase_if(ev.subscriptions, [&](const MockupEvents::Subscription& s) { return s.id == id; });
    return n ? HttpResponse{204, "application/json", {}, "", {}} : redfish_error(404, fmt::format("{} not found", path));
  }
  if (path == "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent" && request.method == "POST") {
    json b = json::parse(request.body, nullptr, false);
    if (!b.is_object()) return redfish_error(400, "expected a JSON object (MessageId, Severity, OriginOfCondition, ...)");
    json record = json::object();
    for (const char* k : {"EventId", "EventTimestamp", "EventType", "Message", "MessageId", "MessageArgs", "Severity",
                          "MessageSeverity", "OriginOfCondition"})
      if (b.contains(k)) record[k] = b[k];
    if (record.contains("OriginOfCondition") && record["OriginOfCondition"].is_string())
      record["OriginOfCondition"] = {{"@odata.id", record["OriginOfCondition"]}};
    publish_event(record);
    return HttpResponse{204, "application/json", {}, "", {}};
  }
  if (request.method == "GET" || request.method == "HEAD") return get(path, request.query);
  return redfish_error(405, fmt::format("{} does not support {}", path, request.method));
}

}  // namespace astral::facility
