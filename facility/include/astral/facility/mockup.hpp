#pragma once
// Serves a DMTF Redfish mockup directory (<dir>/index.json is /redfish/v1, each resource is
// <path>/index.json) as a Redfish service, like DMTF's Redfish-Mockup-Server: optional
// authentication (basic and sessions), $expand=.($levels=1) on collections (the mockups advertise
// it), and optionally energy counters that advance with the power readings so that PUE over an
// interval can be demonstrated against static files. Used by `astral facility mockup`, tests,
// the benchmark and the demo.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
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
};

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

 private:
  bool authorised(const HttpRequest& request) const;
  HttpResponse get(const std::string& path, const std::string& query);
  HttpResponse login(const HttpRequest& request);
  HttpResponse logout(const std::string& path, const HttpRequest& request);
  void advance_energy(nlohmann::json& resource) const;

  MockupOptions options_;
  std::map<std::string, std::string> resources_;  // "/redfish/v1/..." -> JSON text
  mutable std::mutex mu_;
  std::map<std::string, std::string> sessions_;   // token -> session path
  std::map<std::string, std::string> expanded_;   // path -> expanded collection (static mockups)
  std::size_t next_session_ = 1;
  std::atomic<std::size_t> requests_{0};
  std::chrono::steady_clock::time_point started_;
};

// A Redfish error body ({"error": {"code", "message"}}) with the given status.
HttpResponse redfish_error(int status, const std::string& message);

}  // namespace astral::facility
