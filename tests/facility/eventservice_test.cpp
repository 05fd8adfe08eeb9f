// Redfish EventService: the event-stream parser, Event payloads, SSE end to end (mockup service
// over real HTTP -> subscriber -> exporter -> /metrics and the events file), reconnection,
// duplicates, bad streams, and push subscriptions to a TLS listener with a per-subscription secret.
#include <catch2/catch.hpp>

#include <curl/curl.h>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "astral/facility/eventservice.hpp"
#include "astral/facility/exporter.hpp"
#include "support.hpp"

using namespace astral::facility;
using namespace astral::facility::test;
using json = nlohmann::json;
using Steady = std::chrono::steady_clock;

namespace {

// Waits (up to `limit`) for `done`; the limit only ends a broken test, it asserts nothing.
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(15000)) {
  auto end = Steady::now() + limit;
  while (Steady::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

long post_json(const std::string& url, const std::string& body) {
  CURL* c = curl_easy_init();
  curl_slist* h = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char*, std::size_t s, std::size_t n, void*) { return s * n; });
  curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  return status;
}

json leak_record(const std::string& event_id = "") {
  json r = {{"MessageId", "Environmental.1.2.LeakDetectedCritical"},
            {"MessageSeverity", "Critical"},
            {"Message", "Leak detector 'Tray 2' reports a critical leak."},
            {"OriginOfCondition", {{"@odata.id", "/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/2"}}}};
  if (!event_id.empty()) r["EventId"] = event_id;
  return r;
}

EventStreamOptions quick() {
  EventStreamOptions o;
  o.backoff = std::chrono::milliseconds(50);
  o.max_backoff = std::chrono::milliseconds(200);
  o.idle_timeout = std::chrono::milliseconds(3000);
  return o;
}

struct Collected {
  std::mutex mu;
  std::vector<Alarm> alarms;
  AlarmSink sink() {
    return [this](std::vector<Alarm> a) {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& x : a) alarms.push_back(std::move(x));
    };
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return alarms.size();
  }
};

EventStreamStatus status_of(const EventSubscriber& s) { return s.status().at(0); }

}  // namespace

TEST_CASE("event-stream parser: fields, comments, CRLF, split reads, limits") {
  SseParser p;
  auto a = p.feed(": keep-alive\r\n\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nid");
  REQUIRE(a.size() == 1);
  CHECK(a[0].id == "7");
  CHECK(a[0].data == "{\"a\":\n1}");
  CHECK(p.comments() == 1);
  auto b = p.feed(":8\ndata:x\n");  // "id" continued in the next read; no dispatch yet
  CHECK(b.empty());
  b = p.feed("\n");
  REQUIRE(b.size() == 1);
  CHECK(b[0].id == "8");
  CHECK(b[0].data == "x");
  CHECK(p.feed("id: 9\n\n").empty());  // no data: nothing to dispatch
  SseParser small(64);
  small.feed(std::string(100, 'x'));
  CHECK(small.bad());
  CHECK(small.error() == "an event-stream line longer than 64 bytes");
  SseParser nul;
  nul.feed(std::string("data: a\0b\n\n", 11));
  CHECK(nul.error() == "a NUL byte in the event stream (not text)");
}

TEST_CASE("Redfish Event payloads: alarms by message, rejected records named") {
  json ev = {{"Id", "12"}, {"Events", {leak_record("ev-1"),
                                       {{"MessageId", "Environmental.1.2.PumpFailed"}, {"EventId", "ev-2"}, {"MessageSeverity", "Critical"},
                                        {"EventTimestamp", "2025-02-12T12:25:00+01:00"},
                                        {"OriginOfCondition", {{"@odata.id", "/redfish/v1/ThermalEquipment/CDUs/1/Pumps/2"}}}},
                                       {{"MessageId", "Environmental.1.2.PumpFailed"}, {"EventId", "ev-3"}, {"EventTimestamp", "yesterday"}},
                                       {{"MessageId", "Environmental.1.2.LeakDetectedNormal"}, {"EventId", "ev-4"}}}}};
  ParsedEvent p = parse_redfish_event(ev.dump(), "cdu-1");
  REQUIRE(p.alarms.size() == 2);
  CHECK(p.alarms[0].type == "leak_detected");
  CHECK(p.alarms[0].kind == EntityKind::leak_detector);
  CHECK(p.alarms[0].entity == "ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/2");
  CHECK(p.alarms[0].severity == Severity::critical);
  CHECK(p.alarms[1].type == "pump_failed");
  CHECK(format_time(p.alarms[1].time) == "2025-02-12T11:25:00.000000Z");
  CHECK(p.ids == std::vector<std::string>{"event:ev-1", "event:ev-2"});
  REQUIRE(p.errors.size() == 1);
  CHECK(p.errors[0] == "cdu-1: event 12 record 2: EventTimestamp \"yesterday\" is not an RFC 3339 time");
  ParsedEvent no_id = parse_redfish_event(R"({"Events": [{"MessageId": "Environmental.1.2.PumpFailed"}]})", "cdu-1");
  CHECK(no_id.alarms.empty());
  CHECK(no_id.errors.at(0) == "cdu-1: event ? record 0: no Id, EventId or MemberId (it cannot be deduplicated)");
  CHECK(parse_redfish_event("garbage", "cdu-1", "5").errors.at(0) == "cdu-1: event 5: not a JSON object");
  CHECK(parse_redfish_event(R"({"Id": "3"})", "cdu-1").errors.at(0) == "cdu-1: event 3: no \"Events\" array");
  CHECK(parse_rfc3339("2025-02-12T12:25:00.5Z").has_value());
  CHECK(parse_rfc3339("2021-02-10T22:26:10+0000").has_value());  // as some BMCs write it
  CHECK_FALSE(parse_rfc3339("2025-13-12T12:25:00Z").has_value());
  CHECK_FALSE(parse_rfc3339("2025-02-12 12:25").has_value());
}

TEST_CASE("SSE end to end: a pushed alarm reaches /metrics and the events file before any poll") {
  MockBmc cdu(mockup_dir("public-cooling-unit"));
  TempDir dir;
  FacilityConfig cfg;
  RedfishEndpoint e;
  e.name = "cdu-1";
  e.url = cdu.url();
  cfg.redfish = {e};
  cfg.interval = std::chrono::milliseconds(600000);  // no second poll during the test
  cfg.site = parse_site_layout(R"({"racks": [{"id": "rack-41", "hosts": ["node041a"], "cooled_by": ["cdu-1"]}],
                                   "components": [{"id": "cdu-1", "kind": "cdu", "source": "cdu-1"}]})", "site");
  ExporterOptions eo;
  eo.events_path = dir.path + "/plant.events.jsonl";
  eo.event_streams = true;
  eo.stream_options = quick();
  Exporter ex(cfg, eo);
  ex.start();
  REQUIRE(eventually([&] { return ex.counters().polls == 1 && cdu.service().open_streams() == 1; }));
  CHECK(ex.scrape().find("type=\"leak_detected\"") == std::string::npos);

  auto t0 = Steady::now();
  REQUIRE(post_json(cdu.url() + "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", leak_record("leak-77").dump()) == 204);
  REQUIRE(eventually([&] { return slurp(eo.events_path).find("leak_detected") != std::string::npos; }));
  double latency = std::chrono::duration<double>(Steady::now() - t0).count();
  INFO("pushed alarm to events file: " << latency * 1000 << " ms");
  CHECK(ex.counters().polls == 1);  // it came by the stream, not by a poll
  std::string metrics = ex.scrape();
  CHECK(metrics.find("astral_facility_alarm{host=\"cdu-1\",kind=\"leak_detector\",entity=\"ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/2\",type=\"leak_detected\"") != std::string::npos);
  CHECK(metrics.find("astral_facility_event_stream_up{source=\"cdu-1\",mode=\"sse\"} 1") != std::string::npos);
  CHECK(metrics.find("astral_facility_pushed_alarms_total 1") != std::string::npos);
  // The event line carries the site ids for the monitor's join.
  std::ifstream in(eo.events_path);
  std::string line, leak_line;
  while (std::getline(in, line))
    if (line.find("leak_detected") != std::string::npos) leak_line = line;
  json ev = json::parse(leak_line);
  CHECK(ev["component"]["site"] == "cdu-1");
  CHECK(ev["keys"]["racks"] == json::array({"rack-41"}));
  CHECK(ev["layer"] == "facility");

  // The same event again (a service retrying): dropped by its id; a new one is not.
  REQUIRE(post_json(cdu.url() + "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", leak_record("leak-77").dump()) == 204);
  REQUIRE(eventually([&] { return ex.counters().event_streams.at(0).duplicates == 1; }));
  // The stream drops (BMC restart): resubscribed with backoff, events flow again.
  cdu.service().drop_streams();
  REQUIRE(eventually([&] { return ex.counters().event_streams.at(0).connects >= 2 && cdu.service().open_streams() == 1; }));
  json pump = {{"MessageId", "Environmental.1.2.PumpFailed"}, {"EventId", "pump-1"}, {"MessageSeverity", "Critical"},
               {"OriginOfCondition", "/redfish/v1/ThermalEquipment/CDUs/1/Pumps/1"}};
  REQUIRE(post_json(cdu.url() + "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", pump.dump()) == 204);
  REQUIRE(eventually([&] { return ex.scrape().find("entity=\"ThermalEquipment/CDUs/1/Pumps/1\",type=\"pump_failed\"") != std::string::npos; }));
  ex.stop();
}

TEST_CASE("SSE bad input: garbage, a stream that stops, floods, events without id or with a bad time") {
  MockBmc bmc(mockup_dir("public-cooling-unit"));
  RedfishEndpoint e;
  e.name = "cdu";
  e.url = bmc.url();
  Collected got;
  EventStreamOptions o = quick();
  o.max_events_per_second = 50;
  EventSubscriber sub({e}, o, got.sink());
  sub.start();
  REQUIRE(eventually([&] { return bmc.service().open_streams() == 1; }));

  bmc.service().publish_raw("data: {\"Events\": [{\"MessageId\": \"Environmental.1.2.PumpFailed\"}]}\n\n");
  REQUIRE(eventually([&] { return status_of(sub).rejected == 1; }));
  CHECK(status_of(sub).last_error == "cdu: event ? record 0: no Id, EventId or MemberId (it cannot be deduplicated)");
  json bad_time = leak_record("t-1");
  bad_time["EventTimestamp"] = "12/02/2025";
  bmc.service().publish_event(bad_time);
  REQUIRE(eventually([&] { return status_of(sub).rejected == 2; }));
  CHECK(status_of(sub).last_error.find("EventTimestamp \"12/02/2025\" is not an RFC 3339 time") != std::string::npos);
  CHECK(got.size() == 0);

  static const char nul_garbage[] = "data: \0\0\0garbage\n\n";
  bmc.service().publish_raw(std::string(nul_garbage, sizeof nul_garbage - 1));  // without the terminator
  REQUIRE(eventually([&] { return status_of(sub).failures >= 1; }));
  CHECK(status_of(sub).last_error == "the event stream is malformed: a NUL byte in the event stream (not text)");
  REQUIRE(eventually([&] { return bmc.service().open_streams() == 1 && status_of(sub).connected; }));

  std::string flood;
  for (int i = 0; i < 200; ++i) {
    std::string id = "f" + std::to_string(i);
    flood += "id: " + id + "\ndata: " + json{{"Id", id}, {"Events", json::array()}}.dump() + "\n\n";
  }
  std::uint64_t failures = status_of(sub).failures;
  bmc.service().publish_raw(flood);
  REQUIRE(eventually([&] { return status_of(sub).failures > failures; }));
  CHECK(status_of(sub).last_error.find("flooding") != std::string::npos);

  // After all that, a real event still gets through.
  REQUIRE(eventually([&] { return bmc.service().open_streams() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the flood window
  bmc.service().publish_event(leak_record("after"));
  REQUIRE(eventually([&] { return got.size() == 1; }));
  sub.stop();
}

TEST_CASE("a service without ServerSentEventUri leaves polling alone") {
  std::map<std::string, std::string> r = {{"/redfish/v1", R"({"EventService": {"@odata.id": "/redfish/v1/EventService"}})"}};
  MockupOptions mo;
  mo.events = false;
  r["/redfish/v1/EventService"] = R"({"ServiceEnabled": true})";
  MockupService svc(r, mo);
  HttpServer server(HttpServerOptions{}, [&](const HttpRequest& q) { return svc.handle(q); });
  RedfishEndpoint e;
  e.name = "old-bmc";
  e.url = server.url();
  EventSubscriber sub({e}, quick(), [](std::vector<Alarm>) {});
  sub.start();
  REQUIRE(eventually([&] { return status_of(sub).mode == "none"; }));
  CHECK(status_of(sub).last_error == "the service offers no ServerSentEventUri: polling only");
  sub.stop();
}

TEST_CASE("push subscription: TLS listener, per-subscription secret, refusals named, secret never shown") {
  const auto& pki = test_pki();
  std::string secret = new_subscription_secret();
  CHECK(secret.size() == 64);
  CHECK(secret != new_subscription_secret());
  Collected got;
  PushReceiver receiver("/redfish-events/cdu-1", secret, "astral-cdu-1", "cdu-1", got.sink());
  HttpServerOptions so;
  so.tls_cert_file = pki.server_cert;
  so.tls_key_file = pki.server_key;
  HttpServer listener(so, [&](const HttpRequest& r) { return receiver.handle(r); });
  std::string destination = listener.url() + "/redfish-events/cdu-1";
  REQUIRE(destination.rfind("https://", 0) == 0);

  MockupOptions mo;
  mo.push_ca_file = pki.ca_cert;
  MockBmc cdu(mockup_dir("public-cooling-unit"), mo);
  RedfishEndpoint e;
  e.name = "cdu-1";
  e.url = cdu.url();
  PushSubscription sub = subscribe_push(e, destination, secret, "astral-cdu-1");
  CHECK(sub.uri == "/redfish/v1/EventService/Subscriptions/1");
  CHECK(cdu.service().subscriptions() == 1);
  cdu.service().publish_event(leak_record("push-1"));
  REQUIRE(eventually([&] { return got.size() == 1; }));
  CHECK(got.alarms[0].type == "leak_detected");
  CHECK(receiver.accepted() == 1);
  cdu.service().publish_event(leak_record("push-1"));  // a delivery retry: deduplicated
  CHECK(got.size() == 1);

  // Anyone else posting to the listener is refused: no secret, a wrong one, the wrong context.
  HttpRequest forged;
  forged.method = "POST";
  forged.path = "/redfish-events/cdu-1";
  forged.body = json{{"Id", "9"}, {"Context", "astral-cdu-1"}, {"Events", {leak_record("forged")}}}.dump();
  CHECK(receiver.handle(forged).status == 401);
  forged.headers["authorization"] = "Bearer " + std::string(64, '0');
  CHECK(receiver.handle(forged).status == 401);
  forged.headers["authorization"] = "Bearer " + secret;
  forged.body = json{{"Id", "9"}, {"Context", "someone-else"}, {"Events", {leak_record("forged")}}}.dump();
  CHECK(receiver.handle(forged).status == 401);
  CHECK(receiver.refused() == 3);
  CHECK(got.size() == 1);

  unsubscribe_push(e, sub);
  CHECK(cdu.service().subscriptions() == 0);

  // A service that refuses: one line naming the endpoint and the service's reason, no secret.
  MockupOptions refusing;
  refusing.refuse_subscriptions = true;
  MockBmc strict(mockup_dir("public-cooling-unit"), refusing);
  RedfishEndpoint se;
  se.name = "strict-bmc";
  se.url = strict.url();
  try {
    subscribe_push(se, destination, secret, "astral-strict");
    FAIL("the refusal was not reported");
  } catch (const std::runtime_error& ex) {
    std::string what = ex.what();
    CHECK(what == "strict-bmc: the service refused the event subscription (HTTP 400: the service does not accept event "
                  "subscriptions from this client)");
    CHECK(what.find(secret) == std::string::npos);
  }
}

TEST_CASE("Fuzz regressions: event fields of another type are ignored, never thrown out of the parser") {
  // json::value("MessageId", ...), value("Id", ...), value("Message", ...) and the severities
  // threw type_error on a number or an array: out of the SSE write callback (through libcurl) and
  // out of the push handler. Such a field now reads as absent.
  const std::string file =
      ASTRAL_FIXTURES_DIR "/astral/fuzz-regressions/facility_events/crash-handmade-non-string-fields.txt";
  SseParser p;
  const auto messages = p.feed(slurp(file));
  REQUIRE(messages.size() == 2);
  ParsedEvent first = parse_redfish_event(messages[0].data, "cdu-1", messages[0].id);
  REQUIRE(first.alarms.size() == 1);  // a record without a usable MessageId: an unnamed condition
  CHECK(first.alarms[0].type == "condition");
  CHECK(first.alarms[0].severity == Severity::warning);  // neither severity is a string
  CHECK(first.alarms[0].message.empty());
  CHECK(first.ids == std::vector<std::string>{"event:e1"});
  CHECK(first.errors.empty());
  ParsedEvent second = parse_redfish_event(messages[1].data, "cdu-1", messages[1].id);
  REQUIRE(second.errors.size() == 1);
  CHECK(second.errors[0] == "cdu-1: event ?: no \"Events\" array");
  ParsedEvent typed = parse_redfish_event(
      R"({"Id": "9", "Events": [{"EventId": "e2", "MessageId": "Environmental.1.2.PumpFailed", "MessageSeverity": 3,
          "Severity": "Critical", "Message": 17, "OriginOfCondition": {"@odata.id": "/redfish/v1/ThermalEquipment/CDUs/1/Pumps/2"}}]})",
      "cdu-1");
  REQUIRE(typed.alarms.size() == 1);
  CHECK(typed.alarms[0].severity == Severity::critical);  // the deprecated Severity string is used
  CHECK(typed.alarms[0].message == "Environmental.1.2.PumpFailed");
}

TEST_CASE("Fuzz regressions: an RFC 3339 time beyond the clock's range is no time") {
  // facility_events found "4050-02-12T12:25:00Z" in an EventTimestamp: seconds * 10^9 overflowed
  // the nanosecond clock (system_clock holds 1677..2262). Such a record is rejected, named.
  CHECK(parse_rfc3339("2262-04-11T23:47:15Z"));
  CHECK_FALSE(parse_rfc3339("2262-04-11T23:47:17Z"));
  CHECK_FALSE(parse_rfc3339("4050-02-12T12:25:00Z"));
  CHECK_FALSE(parse_rfc3339("1000-02-12T12:25:00Z"));
  const std::string file = ASTRAL_FIXTURES_DIR
      "/astral/fuzz-regressions/facility_events/crash-8653932147c4bb8fee628beb27869ce9a46f8d4a";
  ParsedEvent e = parse_redfish_event(slurp(file), "cdu-1");
  REQUIRE(!e.errors.empty());
  CHECK(e.errors[0] == "cdu-1: event 41 record 0: EventTimestamp \"4050-02-12T12:25:00Z\" is not an RFC 3339 time");
}
