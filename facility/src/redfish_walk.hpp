#pragma once
// Walks a Redfish service from its root and hands every power and cooling resource to the Emitter.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "astral/facility/redfish.hpp"
#include "redfish_emit.hpp"
#include "redfish_fetch.hpp"

namespace astral::facility::detail {

struct WalkOptions {
  SensorPolicy sensors = SensorPolicy::automatic;
  bool telemetry = true;
  std::size_t max_resources = 4096;
  int expand_levels = 6;  // the most $expand levels asked for (the service's MaxLevels bounds it)
};

class Walker {
 public:
  Walker(ResourceFetcher& fetcher, Emitter& emit, WalkOptions options)
      : fetch_(fetcher), emit_(emit), options_(options) {}

  // Reads everything reachable from the service root. Returns false when the crawl was cut short
  // (deadline, resource bound) or some resources failed; details are findings.
  bool run(const json& root);

 private:
  // Resources are cached for the crawl and handed out by pointer (payloads can be large).
  const json* get(const std::string& uri);
  std::vector<std::reference_wrapper<const json>> members(const std::string& collection_uri);
  void report_deadline();  // once per crawl; marks it incomplete
  void index_inline(const json& payload, int depth = 0);
  bool expanded_inline(const std::string& collection_uri) const;
  void prefetch(const std::string& uri);

  void chassis(const json& c);
  bool power_subsystem(const std::string& uri, const std::string& chassis_uri, const Target& chassis);
  bool power_supply(const json& p, bool rectifier);
  bool power_deprecated(const std::string& uri, const Target& chassis);
  void thermal_deprecated(const std::string& uri, const Target& chassis);
  bool environment(const std::string& uri, const Target& t);
  void thermal_subsystem(const std::string& uri, const Target& chassis);
  void thermal_metrics(const std::string& uri, const Target& chassis);
  void fan(const json& f);
  void sensors(const std::string& uri);

  void power_equipment(const std::string& uri);
  void distribution(const json& d);
  void circuit(const json& c, EntityKind kind);

  void thermal_equipment(const std::string& uri);
  void cooling_unit(const json& u);
  void cooling_loop(const json& l);
  void connector(const json& c);
  void pump(const json& p);
  void reservoir(const json& r);
  void filter(const json& f);
  void leak_detection(const std::string& uri, const Target& parent);
  void leak_state(const Target& t, const std::string& state, std::optional<int> health);
  void telemetry(const std::string& uri);

  // PowerWatts-style excerpts also carry ApparentVA and PowerFactor.
  bool power_excerpt(const json& parent, const char* property, const Target& t, const char* quantity);
  void fan_speeds(const json& parent, const Target& owner);

  ResourceFetcher& fetch_;
  Emitter& emit_;
  WalkOptions options_;
  bool expand_ = false;
  int expand_levels_ = 1;  // levels asked for at the top of a subtree (1: members only)
  bool complete_ = true;
  bool bound_reported_ = false;
  std::map<std::string, json> cache_;
  std::map<std::string, const json*> inline_members_;  // expanded resources, inside their payload
  std::set<std::string> failed_;
  std::set<std::string> shelf_chassis_;
  std::vector<std::string> sensor_collections_;  // read last, so excerpts claim their sensors first  // chassis linked from power shelves: their PSUs are rectifiers
};

}  // namespace astral::facility::detail
