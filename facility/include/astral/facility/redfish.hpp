#pragma once
// Redfish reader: discovers a service from its root (Chassis -> PowerSubsystem, PowerSupplies and
// their Metrics, EnvironmentMetrics, Sensors, ThermalSubsystem; ThermalEquipment -> CDUs -> pumps,
// reservoirs, filters, leak detection, coolant connectors; PowerEquipment -> PDUs, power shelves,
// circuits, outlets; the deprecated Power/Thermal resources as fallback; TelemetryService metric
// reports) and returns normalised samples, alarms and findings.
//
// Transport: libcurl, TLS verified by default, basic auth or Redfish sessions, per-request
// timeouts, retries with exponential backoff and jitter, a per-endpoint deadline, and bounded
// concurrency across endpoints. Credentials never appear in URLs, argv, findings or logs.
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "astral/facility/sample.hpp"

namespace astral::facility {

enum class AuthMode { automatic, none, basic, session };
AuthMode parse_auth_mode(const std::string& s);  // throws std::invalid_argument
const char* to_string(AuthMode mode);

struct Credentials {
  std::string username;
  std::string password;
  bool empty() const { return username.empty() && password.empty(); }
};
// ASTRAL_REDFISH_USERNAME / ASTRAL_REDFISH_PASSWORD (or <prefix>_USERNAME / <prefix>_PASSWORD).
Credentials credentials_from_env(const std::string& prefix = "ASTRAL_REDFISH");
// A file holding "username:password" on its first line, or JSON {"username": .., "password": ..}.
// Throws std::runtime_error naming the file on error; a group/world-readable file is accepted
// with `warning` set so the caller can tell the user.
Credentials credentials_from_file(const std::string& path, std::string* warning = nullptr);

// When to read a chassis's Sensors collection (one GET per sensor unless $expand works).
enum class SensorPolicy {
  automatic,  // when the service supports $expand, or when no power reading was found otherwise
  all,
  none
};

struct RedfishEndpoint {
  std::string name;  // label for samples and metrics; defaults to host[:port] of url
  std::string url;   // http(s)://host[:port]; the service root /redfish/v1 is implied
  AuthMode auth = AuthMode::automatic;
  Credentials credentials;
  bool verify_tls = true;
  std::string ca_file;  // PEM bundle that signed the BMC's certificate
  SensorPolicy sensors = SensorPolicy::automatic;
  bool telemetry = true;  // read TelemetryService metric reports when the service has them
  // $expand depth for the Chassis, PowerEquipment and ThermalEquipment subtrees, bounded by the
  // service's MaxLevels: at 5, a server's chassis with its power, cooling and sensors is one
  // request. 1 asks for collections' members only; a service that refuses deep expansion is
  // read at 1.
  int expand_levels = 6;
};

// How poll_redfish waits for many BMCs at once.
enum class PollEngine {
  event_loop,  // one thread: every crawl on a fiber over one libcurl multi handle
  threads      // a thread per endpoint in flight (the poller before issue 15; kept as the baseline)
};

struct PollOptions {
  std::chrono::milliseconds timeout{5000};          // one try of one request
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds deadline{60000};        // one endpoint's whole crawl
  int retries = 2;                                  // extra tries on timeouts, resets, 429, 5xx
  std::chrono::milliseconds backoff{200};           // first wait; doubles, with jitter, capped
  std::size_t concurrency = 16;                     // endpoints polled at once
  std::size_t max_resources = 4096;                 // crawl bound per endpoint
  std::size_t max_body_bytes = 16u << 20;
  PollEngine engine = PollEngine::event_loop;
};

// Normalises a user-given URL: checks scheme and host, rejects credentials in the URL (they would
// end up in argv and logs) and paths other than the service root. Throws std::invalid_argument
// with a one-line message naming the URL.
std::string normalise_base_url(const std::string& url);

// Reads one endpoint. Never throws for anything the service does; the outcome is in
// Snapshot::sources (one entry) and Snapshot::findings.
Snapshot read_redfish(const RedfishEndpoint& endpoint, const PollOptions& options = {});

// Reads many endpoints with at most options.concurrency in flight (options.engine says how);
// results are merged in the order of `endpoints`.
Snapshot poll_redfish(const std::vector<RedfishEndpoint>& endpoints, const PollOptions& options = {});

// Reads a DMTF mockup directory (<dir>/index.json is /redfish/v1) without HTTP: the same mapping
// as read_redfish, for offline inspection and fast tests.
Snapshot read_redfish_mockup(const std::string& dir, const std::string& name);

// The same from resources in memory ("/redfish/v1/..." -> JSON text), e.g. payloads saved from a
// support bundle.
Snapshot read_redfish_resources(const std::map<std::string, std::string>& resources, const std::string& name);

}  // namespace astral::facility
