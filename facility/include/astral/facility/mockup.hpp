#pragma once
// Serves a DMTF Redfish mockup directory (<dir>/index.json is /redfish/v1, each resource is
// <path>/index.json) as a Redfish service, like DMTF's Redfish-Mockup-Server: optional
// authentication (basic and sessions), $expand=.($levels=N) up to 6 levels (the mockups advertise
// it), and optionally energy counters that advance with the power readings so that PUE over an
// interval can be demonstrated against static files. Used by `astral facility mockup`, tests,
// the benchmark and the demo.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "astral/facility/http_server.hpp"
#include "astral/facility/redfish.hpp"

namespace astral::facility {

struct MockupOptions {
  std::string dir;
  Credentials credentials;   // empty: no authentication required
  bool allow_basic = true;
  bool allow_sessions = true;
  bool simulate_energy = false;  // EnergykWh readings grow at the resource's power reading
  bool events = true;            // EventService with SSE, subscriptions and SubmitTestEvent
  bool refuse_subscriptions = false;  // answer subscription POSTs with 400 (tests of refusals)
  std::string push_ca_file{};    // CA that signed push destinations' certificates
  std::chrono::milliseconds keep_alive{1000};  // SSE comment when no event is due
};

// The mockup's side of Redfish eventing (mockup_events.cpp).
struct MockupEvents;

class MockupService {
 public:
  // Loads every index.json under dir; throws std::runtime_error when dir holds no mockup.
  explicit MockupService(MockupOptions options);
  // A service from resources held in memory: "/redfish/v1/..." -> JSON text (options.dir unused).
  MockupService(std::map<std::string, std::string> resources, MockupOptions options);
  HttpResponse handle(const HttpRequest& request);

  std::size_t resources() const { return resources_.size(); }
  std::size_t open_sessions() const;
  std::size_t requests() const { return requests_; }
  // Forgets every session, as a BMC restart does; clients must log in again.
  void expire_sessions();
  ~MockupService();

  // Eventing (DSP0266): EventService advertises ServerSentEventUri /redfish/v1/EventService/SSE;
  // an event goes to every open stream (as "id: N" + "data: <Event>") and is POSTed to every
  // subscription's Destination with its HttpHeaders. POST .../Actions/EventService.SubmitTestEvent
  // publishes one too. `record` is one EventRecord; EventId and EventTimestamp are filled in when
  // absent. Returns the event's Id.
  std::string publish_event(nlohmann::json record);
  // Bytes to every open stream as they are (tests: garbage, floods, events without ids).
  void publish_raw(const std::string& text);
  // Closes every open stream (a BMC restart); clients must reconnect.
  void drop_streams();
  std::size_t open_streams() const;
  std::size_t subscriptions() const;

 private:
  bool authorised(const HttpRequest& request) const;
  HttpResponse get(const std::string& path, const std::string& query);
  HttpResponse login(const HttpRequest& request);
  HttpResponse logout(const std::string& path, const HttpRequest& request);
  void expand(nlohmann::json& resource, const std::string& self, int levels) const;
  void note_too_deep();
  void advance_energy(nlohmann::json& resource) const;
  HttpResponse events(const std::string& path, const HttpRequest& request);

  MockupOptions options_;
  std::map<std::string, std::string> resources_;  // "/redfish/v1/..." -> JSON text
  std::set<std::string> too_deep_;  // resources nested too deep to expand: served as they are
  mutable std::mutex mu_;
  std::map<std::string, std::string> sessions_;   // token -> session path
  std::map<std::string, std::string> expanded_;   // "path?levels" -> expanded resource (static mockups)
  std::size_t next_session_ = 1;
  std::atomic<std::size_t> requests_{0};
  std::chrono::steady_clock::time_point started_;
  std::shared_ptr<MockupEvents> events_;  // shared: its deleter is bound where the type is complete
};

// A Redfish error body ({"error": {"code", "message"}}) with the given status.
HttpResponse redfish_error(int status, const std::string& message);

}  // namespace astral::facility
