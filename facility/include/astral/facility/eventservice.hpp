#pragma once
// Redfish EventService (DSP0266 "Eventing"; docs/facility.md "Pushed alarms"): alarms that cannot
// wait for the next poll (leaks, pump failures) arrive as Redfish Event payloads, either over
// Server-Sent Events from the service's EventService.ServerSentEventUri, or POSTed by the service
// to a listener of ours after we create an EventDestination subscription. Either way they become
// Alarms, deduplicated by event id, and reach the exporter and its events file at once. Polling
// continues underneath: a stream that breaks costs latency, never an alarm.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "astral/facility/http_server.hpp"
#include "astral/facility/redfish.hpp"
#include "astral/facility/sample.hpp"

namespace astral::facility {

// --- the text/event-stream format (WHATWG HTML "Server-sent events") ---------------------------
struct SseMessage {
  std::string id;     // the "id:" field (DSP0266: the event's Id)
  std::string event;  // the "event:" field, usually empty
  std::string data;   // "data:" lines joined with '\n'
};

// Incremental parser: feed it bytes as they arrive. Lines end in LF, CR or CRLF; ':' lines are
// comments (keep-alives); a blank line dispatches. A line or message over max_message_bytes, or a
// NUL byte, makes the stream bad (error() says why, one line); the caller drops the connection.
class SseParser {
 public:
  explicit SseParser(std::size_t max_message_bytes = 1 << 20) : max_(max_message_bytes) {}
  std::vector<SseMessage> feed(std::string_view bytes);
  bool bad() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  std::uint64_t comments() const { return comments_; }

 private:
  void line(std::string_view text, std::vector<SseMessage>& out);
  std::size_t max_;
  std::string partial_;
  bool after_cr_ = false;
  SseMessage current_;
  bool have_data_ = false;
  std::string error_;
  std::uint64_t comments_ = 0;
};

// --- Event payloads -----------------------------------------------------------------------------
struct ParsedEvent {
  std::vector<Alarm> alarms;        // one per EventRecord that names an alarm
  std::vector<std::string> ids;     // dedupe key per alarm: its EventId, else payload Id + MemberId
  std::vector<std::string> errors;  // one line per record that was rejected (missing id, bad time)
};
// Parses an Event (Event.v1_x: {"Id", "Events": [{"EventId", "EventTimestamp", "MessageId",
// "MessageSeverity"|"Severity", "Message", "OriginOfCondition"}]}). `source` is the Redfish
// source name (the alarm's host). Records without an id or with a timestamp that is not RFC 3339
// are rejected with a line naming the field; the payload itself must be a JSON object with an
// "Events" array, else errors holds one line and nothing else is returned.
ParsedEvent parse_redfish_event(std::string_view json_text, const std::string& source,
                                std::string_view sse_id = {});

// RFC 3339 ("2025-02-12T12:25:00Z", "+01:00" offsets, fractions; also "+0000" as some BMCs send).
std::optional<Clock::time_point> parse_rfc3339(std::string_view text);

// Remembers the last `capacity` ids so an event delivered twice (SSE reconnect, push retry, both
// paths at once) is reported once. Thread-safe.
class EventDeduper {
 public:
  explicit EventDeduper(std::size_t capacity = 4096) : capacity_(capacity) {}
  bool first_time(const std::string& key);

 private:
  std::size_t capacity_;
  std::mutex mu_;
  std::set<std::string> seen_;
  std::deque<std::string> order_;
};

// --- subscribing ----------------------------------------------------------------------------------
struct EventStreamOptions {
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{5000};   // EventService GET, subscription POST/DELETE
  std::chrono::milliseconds idle_timeout{60000};     // no byte (not even a keep-alive): reconnect
  std::chrono::milliseconds backoff{500};            // first wait after a failure; doubles
  std::chrono::milliseconds max_backoff{30000};
  std::size_t max_message_bytes = 1 << 20;
  std::size_t max_events_per_second = 200;           // beyond: the stream floods; drop and reconnect
};

// What happened, for metrics and logs (never holds a credential or secret).
struct EventStreamStatus {
  std::string source;
  std::string mode;  // "sse", "push", "none" (the service offers neither: polling only)
  bool connected = false;
  std::uint64_t connects = 0, failures = 0, events = 0, duplicates = 0, rejected = 0;
  std::string last_error;
};

using AlarmSink = std::function<void(std::vector<Alarm>)>;

// One thread per endpoint: reads EventService; with ServerSentEventUri, holds the stream open
// and reconnects with exponential backoff (and jitter), sending Last-Event-ID; otherwise reports
// mode "none". Every request has a timeout; TLS is verified as the endpoint says.
class EventSubscriber {
 public:
  EventSubscriber(std::vector<RedfishEndpoint> endpoints, EventStreamOptions options, AlarmSink sink);
  ~EventSubscriber();
  EventSubscriber(const EventSubscriber&) = delete;
  EventSubscriber& operator=(const EventSubscriber&) = delete;
  void start();
  void stop();  // idempotent; returns within about a second
  std::vector<EventStreamStatus> status() const;

 private:
  struct Stream;
  void run(Stream& s);
  std::string find_stream(Stream& s, std::string& error, bool& polling_only);
  std::string hold_stream(Stream& s, const std::string& url, bool& healthy);
  void deliver(Stream& s, const SseMessage& m);
  void update(Stream& s, const std::function<void(EventStreamStatus&)>& change);
  void wait(std::chrono::milliseconds d);
  std::vector<RedfishEndpoint> endpoints_;
  EventStreamOptions options_;
  AlarmSink sink_;
  EventDeduper dedupe_;
  std::vector<std::unique_ptr<Stream>> streams_;
  mutable std::mutex mu_;  // statuses
  std::atomic<bool> stopping_{false};
  std::mutex wait_mu_;
  std::condition_variable wake_;
};

// --- push subscriptions ---------------------------------------------------------------------------
// The receiving end: an HTTP handler for POST <path> that accepts an Event only with the
// subscription's secret (Authorization: Bearer, compared in constant time) and its Context.
// The secret is never logged or echoed; rejected requests get 401 without a body that helps.
class PushReceiver {
 public:
  PushReceiver(std::string path, std::string secret, std::string context, std::string source, AlarmSink sink,
               EventDeduper* dedupe = nullptr);
  HttpResponse handle(const HttpRequest& request);
  std::uint64_t accepted() const { return accepted_; }
  std::uint64_t refused() const { return refused_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, secret_, context_, source_;
  AlarmSink sink_;
  EventDeduper own_dedupe_;
  EventDeduper* dedupe_;
  std::atomic<std::uint64_t> accepted_{0}, refused_{0};  // the listener may run several threads
};

// A random secret for one subscription (32 bytes from the OS, hex).
std::string new_subscription_secret();

struct PushSubscription {
  std::string uri;  // the EventDestination the service created (DELETE it when done)
};
// POSTs an EventDestination {Destination, Protocol "Redfish", Context, EventFormatType "Event",
// HttpHeaders [{"Authorization": "Bearer <secret>"}]} to the service's Subscriptions collection.
// Throws std::runtime_error naming the endpoint when the service refuses (status and the
// service's own message, never the secret).
PushSubscription subscribe_push(const RedfishEndpoint& endpoint, const std::string& destination,
                                const std::string& secret, const std::string& context,
                                const EventStreamOptions& options = {});
void unsubscribe_push(const RedfishEndpoint& endpoint, const PushSubscription& subscription,
                      const EventStreamOptions& options = {});

// What `astral facility serve --push-listen` holds: one PushReceiver per Redfish source (path
// /redfish-events/<n>-<name>, its own secret and Context), the subscriptions created on the
// services, and their removal when it ends.
class PushSubscriptions {
 public:
  PushSubscriptions(std::vector<RedfishEndpoint> endpoints, AlarmSink sink, EventStreamOptions options = {});
  ~PushSubscriptions();  // close()
  PushSubscriptions(const PushSubscriptions&) = delete;
  PushSubscriptions& operator=(const PushSubscriptions&) = delete;
  // POSTs a subscription to every source, destination `listener_url` + the source's path. A
  // service that refuses (or cannot be reached) leaves one line in the result naming the source,
  // the status and the service's own message (never the secret); it is still polled.
  std::vector<std::string> subscribe(const std::string& listener_url);
  void close();  // DELETEs every subscription created; idempotent
  HttpResponse handle(const HttpRequest& request);  // the listener's handler: routes by path
  std::size_t active() const;

 private:
  struct Entry {
    RedfishEndpoint endpoint;
    std::unique_ptr<PushReceiver> receiver;
    PushSubscription subscription;
    std::string secret, context;
  };
  std::vector<Entry> entries_;  // fixed after construction: handle() reads it from listener threads
  EventStreamOptions options_;
  EventDeduper dedupe_;
  mutable std::mutex mu_;  // subscriptions
};

}  // namespace astral::facility
